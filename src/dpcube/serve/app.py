"""The read-only query service: :func:`create_app` builds the FastAPI app.

Endpoints (OpenAPI at ``/docs``, schema at ``/openapi.json``):

- ``GET /api/health``; ``GET /api/releases`` lists the served releases by folder name;
- ``GET /api/releases/{name}``: manifest metadata, guarantee, schema (attributes with labels,
  bins, ranges), cuboids of a data cube, hierarchy of a census release, bounds of a spatial one;
- ``POST /api/releases/{name}/answer`` ``{"queries": [...], "level": 0.95}`` and
  ``GET /api/releases/{name}/answer?where=...`` (the CLI's ``--where`` syntax): each answer with
  its interval (:meth:`dpcube.release.base.Release.uncertainty`);
- ``GET /api/releases/{name}/table?format=csv|parquet|json`` (as ``dpcube export``);
- ``GET /api/releases/{name}/report``: the release's HTML report, if present;
- ``GET /``: the explorer page, ``/static/...`` its files (this package's ``static`` folder);
  ``GET /docs``: Swagger UI from the same folder (no CDN: it works offline).

Hardening: every error is a 4xx (or, for a bug, a 500) with the body ``{"error": "one line"}``
and no traceback (the traceback goes to the server log); request bodies over ``max_body_bytes``
are refused with 413 before they are parsed, batches over ``max_batch`` queries with 413; JSON
is read strictly and levels checked (:mod:`dpcube.serve.inputs`: repeated keys, nesting, levels
whose interval cannot be computed are 422); no
request text ever becomes a file path (releases are looked up by name in memory, the report path
is fixed at load, static files are served by Starlette's ``StaticFiles`` from one folder). The app
only reads: nothing is written and no budget is spent (a release is public by construction).
Read timeouts and the connection limit are below the app, in :mod:`dpcube.serve.connections`.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pydantic_core
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dpcube.errors import DPCubeError
from dpcube.serve.inputs import RequestRefused, check_level, read_json
from dpcube.serve.served import ServedRelease, load_served

#: Largest request body accepted (bytes): 1 MiB holds about 30,000 small queries.
DEFAULT_MAX_BODY_BYTES = 1 << 20
#: Most queries in one batch.
DEFAULT_MAX_BATCH = 10_000
#: Most rows of a table the service builds and sends (``dpcube export`` writes larger ones).
DEFAULT_MAX_TABLE_ROWS = 1_000_000
#: Longest error line returned (a huge value quoted back in a message is cut).
MAX_ERROR_CHARS = 500
STATIC_DIR = Path(__file__).resolve().parent / "static"
#: Swagger UI's files (npm's swagger-ui-dist, see its SOURCE.txt), served under /static.
SWAGGER_UI = "swagger-ui"

log = logging.getLogger("dpcube.serve")


# ------------------------------------------------------------------------------------------------
# request and response models (the OpenAPI schema)
# ------------------------------------------------------------------------------------------------


class ErrorBody(BaseModel):
    """Every error response: one line saying what is wrong and how to fix it."""

    error: str = Field(examples=["unknown release 'adult'; served: census, cells"])


class AnswerRequest(BaseModel):
    """A batch of queries in the Python API's language and the interval's confidence level."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "queries": [{"age": [20, 39], "sex": "F"}, {"age": {"bins": [0, 3]}}],
                    "level": 0.95,
                },
                {"queries": [{"loc": [[33.9, 34.1], [-118.3, -118.1]]}], "level": 0.9},
                {"queries": [{"region": "GA", "size": [1, 2]}]},
            ]
        },
    )

    queries: list[dict[str, Any]] = Field(
        description="one query per answer: {attribute: constraint} with ordinal ranges in the "
        "attribute's unit ([lo, hi] inclusive), {'bins': [i, j]}, categories or hierarchy nodes, "
        "[[lat0, lat1], [lon0, lon1]] boxes; census: {'region': R, 'size': s or [lo, hi]}"
    )
    level: float = Field(
        0.95, gt=0.0, lt=1.0, allow_inf_nan=False, description="confidence level of lower/upper"
    )


class _AnswerBody(BaseModel):
    """:class:`AnswerRequest` as the hot path parses it: the queries as any JSON values, then
    checked to be objects in one loop (:func:`_queries_are_objects`); pydantic-core validating
    ``dict[str, Any]`` item by item took 6 ms of a 1,000-query batch, this 2 ms. The OpenAPI
    schema is :class:`AnswerRequest`'s, and the errors are the same."""

    model_config = ConfigDict(extra="forbid")
    queries: list[Any]
    level: float = Field(0.95, gt=0.0, lt=1.0, allow_inf_nan=False)


def _queries_are_objects(queries: list[Any]) -> None:
    """Raise the validation error :class:`AnswerRequest` gives for the first query that is not
    a JSON object (keys of a JSON object are always strings).

    >>> _queries_are_objects([{}, {"age": [1, 2]}])
    >>> try:
    ...     _queries_are_objects([{}, 1])
    ... except RequestValidationError as exc:
    ...     print(_validation_line(exc))
    body.queries.1: Input should be a valid dictionary
    """
    for i, query in enumerate(queries):
        if type(query) is not dict:
            raise RequestValidationError(
                [
                    {
                        "type": "dict_type",
                        "loc": ("body", "queries", i),
                        "msg": "Input should be a valid dictionary",
                        "input": query,
                    }
                ]
            )


class Answer(BaseModel):
    answer: float | None = Field(description="the released answer")
    lower: float | None = Field(description="lower end of the interval at `level` (null: none)")
    upper: float | None = Field(description="upper end of the interval at `level` (null: none)")
    stddev: float | None = Field(
        description="the answer's error sd: exact noise sd, or the bootstrap's error sd"
    )
    noise_sd: float | None = Field(description="noise only (never the error of a bootstrap)")
    error_kind: str = Field(description="exact, bootstrap or none")


class AnswerResponse(BaseModel):
    answers: list[Answer]
    level: float
    error_kind: str
    error_reason: str
    bootstrap_runs: int | None
    not_for_publication: str | None = Field(
        description="why the release is NOT FOR PUBLICATION, or null when it may be published"
    )


class ReleaseSummary(BaseModel):
    name: str
    kind: str
    mechanism: str
    epsilon: float | None
    delta: float | None
    neighbour: str
    for_publication: bool
    release_id: str
    error_kind: str


class ReleaseList(BaseModel):
    releases: list[ReleaseSummary]


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in (
        (400, "the query cannot be answered (unknown attribute, value outside the domain...)"),
        (404, "no such release, report or page"),
        (413, "request body or batch too large"),
        (422, "malformed request (bad JSON, wrong types, level outside (0, 1))"),
    )
}


# ------------------------------------------------------------------------------------------------
# hardening
# ------------------------------------------------------------------------------------------------


class AnswersResponse(JSONResponse):
    """The JSON of an answer batch, rendered by pydantic-core (FastAPI's own serialiser: 6x faster
    than ``json.dumps`` on 1,000 answers, the service's largest cost after resolving the
    queries). Non-finite floats become ``null`` (the answer path already maps them)."""

    def render(self, content: Any) -> bytes:
        return pydantic_core.to_json(content, inf_nan_mode="null")


def error(status: int, line: str) -> JSONResponse:
    """The one error shape: ``{"error": line}`` (first line only, never a traceback)."""
    text = str(line).strip().splitlines()[0] if str(line).strip() else "error"
    if len(text) > MAX_ERROR_CHARS:  # a value quoted back is cut, not the whole line dropped
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    return JSONResponse({"error": text}, status_code=status)


def host_name(header: str) -> str:
    """The host name of a ``Host`` header, without its port, lower case.

    >>> host_name("127.0.0.1:8000"), host_name("[::1]:80"), host_name("LocalHost")
    ('127.0.0.1', '::1', 'localhost')
    """
    text = header.strip().lower()
    if text.startswith("["):
        return text[1:].partition("]")[0]
    return text.rpartition(":")[0] if text.count(":") == 1 else text


class AllowedHosts:
    """ASGI middleware: answer only requests whose ``Host`` names one of ``hosts``.

    ``dpcube serve`` on a loopback address allows the loopback names only: a web page that
    rebinds its own domain name to 127.0.0.1 (DNS rebinding) then cannot read the service
    through a visitor's browser.
    """

    def __init__(self, app: ASGIApp, hosts: Sequence[str]) -> None:
        self.app = app
        self.hosts = {h.lower() for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = next((v for k, v in scope.get("headers", []) if k == b"host"), b"")
            name = host_name(header.decode("latin-1"))
            if name not in self.hosts:
                shown = name[:100] or "(none)"
                refusal = error(
                    400,
                    f"Host {shown!r} is not served here (this service answers "
                    f"{', '.join(sorted(self.hosts))}); start dpcube serve with --host to serve "
                    "another name",
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BodyLimit:
    """ASGI middleware: refuse a request body over ``limit`` bytes with 413, before parsing.

    A declared ``Content-Length`` over the limit is refused at once; a body without one is read
    up to the limit and refused as soon as it passes it.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def too_large(self) -> JSONResponse:
        return error(413, f"request body larger than {self.limit:,} bytes; send fewer queries")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await error(400, "Content-Length is not a number")(scope, receive, send)
                    return
                if declared > self.limit:
                    await self.too_large()(scope, receive, send)
                    return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # disconnect: pass it on
                buffered = message
                break
            body = message.get("body", b"")
            size += len(body)
            if size > self.limit:
                await self.too_large()(scope, receive, send)
                return
            chunks.append(body)
            more = bool(message.get("more_body", False))
        else:
            buffered = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return buffered
            return await receive()

        await self.app(scope, replay, send)


def _validation_line(exc: RequestValidationError) -> str:
    """One line for FastAPI's validation errors: the first error, located.

    >>> e = RequestValidationError([{"loc": ("body", "level"), "msg": "Input should be less than 1", "type": "less_than"}])
    >>> _validation_line(e)
    'body.level: Input should be less than 1'
    """
    errors = exc.errors()
    if not errors:
        return "malformed request"
    first = errors[0]
    if first.get("type") == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "")
        return f"the request body is not valid JSON{': ' + str(reason) if reason else ''}"
    if first.get("type") == "model_type" and tuple(first.get("loc", ())) == ("body",):
        return 'the request body must be a JSON object {"queries": [...], "level": 0.95}'
    if tuple(first.get("loc", ())) == ("body",):
        return (
            'the request body must be a JSON object {"queries": [...], "level": 0.95} '
            "sent with Content-Type: application/json"
        )
    where = ".".join(str(p) for p in first.get("loc", ()))
    line = f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg"))
    if len(errors) > 1:
        line += f" (and {len(errors) - 1} more)"
    return line


# ------------------------------------------------------------------------------------------------
# the app
# ------------------------------------------------------------------------------------------------


def overlapping_query(item: ServedRelease, query: dict[str, Any], overlapping: bool) -> Any:
    """``query`` with value ranges widened to the bins they overlap when ``overlapping``
    (:meth:`dpcube.schema.Schema.with_overlapping`, as the CLI's ``--overlapping``)."""
    if not overlapping:
        return query
    if item.release.schema is None:
        raise DPCubeError(
            f"overlapping applies to releases with a schema; a {item.release.kind!r} release "
            "has none"
        )
    return item.release.schema.with_overlapping(query)


def parse_where(text: str) -> dict[str, Any]:
    """A ``where`` parameter in the query text language (:func:`dpcube.query_text.parse_where`,
    as ``dpcube query --where``), a JSON object read strictly first
    (:func:`dpcube.serve.inputs.read_json`: no repeated key, no nesting past the limit)."""
    from dpcube.query_text import parse_where as parse_query_text

    if text.strip().startswith("{"):
        read_json(text.strip(), "where")
    return parse_query_text(text)


def _safe_file_part(text: str) -> str:
    """A file-name part of letters, digits, ``._-`` only (for Content-Disposition).

    >>> _safe_file_part('cells "2024"/x')
    'cells__2024__x'
    """
    return re.sub(r"[^A-Za-z0-9._-]", "_", text) or "release"


def create_app(
    release_dirs: Sequence[str | os.PathLike[str]],
    *,
    max_batch: int = DEFAULT_MAX_BATCH,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_table_rows: int = DEFAULT_MAX_TABLE_ROWS,
    allowed_hosts: Sequence[str] | None = None,
    runs: int | None = None,
    bootstrap_seed: int | None = None,
    warm: bool = True,
) -> FastAPI:
    """The service answering ``release_dirs`` (each loaded once and verified, keyed by its folder
    name; duplicate names are refused with a :class:`dpcube.errors.UsageError`).

    ``max_table_rows``: larger tables are refused (413) before they are built.
    ``allowed_hosts``: the host names a request's ``Host`` may name (None: any).
    ``runs``/``bootstrap_seed``: replicates of the bootstrap of bootstrap-kind releases (default:
    those stored with the release by ``dpcube release --bootstrap-runs``, else
    :data:`dpcube.release.uncertainty.DEFAULT_RUNS`) and their seed (default: OS entropy; the
    bootstrap is post-processing, so a seed changes no guarantee). ``warm``: compute those
    replicates now rather than at the first query.
    """
    from dpcube.release.uncertainty import MIN_RUNS

    if max_batch < 1 or max_body_bytes < 1 or max_table_rows < 1:
        raise DPCubeError("max_batch, max_body_bytes and max_table_rows must be positive")
    if runs is not None and runs < MIN_RUNS:
        raise DPCubeError(f"runs must be at least {MIN_RUNS}, got {runs}")
    served = load_served(release_dirs, runs=runs, seed=bootstrap_seed)
    if warm:
        for item in served.values():
            item.warm()

    app = FastAPI(
        docs_url=None,  # /docs below, from this package's files rather than a CDN
        redoc_url=None,
        title="dpcube release service",
        version=_version(),
        description=(
            "Read-only answers from differentially private releases. A release is public by "
            "construction, so answering from it spends no privacy budget. Every answer carries "
            'its interval; every error is `{"error": "one line"}`.'
        ),
    )
    app.state.served = served
    app.state.max_batch = max_batch

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else "request refused"
        if exc.status_code == 404 and detail == "Not Found":
            detail = "not found: no such page (see /docs for the endpoints)"
        return error(exc.status_code, detail)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, _validation_line(exc))

    @app.exception_handler(DPCubeError)
    async def refused(request: Request, exc: DPCubeError) -> JSONResponse:
        return error(400, str(exc))

    @app.exception_handler(RequestRefused)
    async def refused_input(request: Request, exc: RequestRefused) -> JSONResponse:
        return error(exc.status, exc.line)

    @app.exception_handler(ClientDisconnect)
    async def disconnected(request: Request, exc: ClientDisconnect) -> JSONResponse:
        # the client left (or was cut off by a read timeout) before its body was read: no bug,
        # and nobody reads this answer
        return error(400, "the client closed the connection before the request body was read")

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return error(500, f"internal error ({type(exc).__name__}); it was logged on the server")

    def lookup(name: str) -> ServedRelease:
        item = served.get(name)
        if item is None:
            listed = ", ".join(sorted(served))
            raise StarletteHTTPException(404, f"unknown release {name!r}; served: {listed}")
        return item

    async def answer(item: ServedRelease, queries: list[Any], level: float) -> JSONResponse:
        if len(queries) > max_batch:
            return error(413, f"{len(queries):,} queries in one batch; the limit is {max_batch:,}")
        level = check_level(level)
        if item.bootstrap:  # replicates answer each query: keep the event loop free
            body = await run_in_threadpool(item.answer, queries, level)
        else:
            body = item.answer(queries, level)
        return AnswersResponse(body)

    @app.get("/api/health", tags=["service"])
    async def health() -> dict[str, Any]:
        """Whether the service is up, and how many releases it serves."""
        return {"status": "ok", "releases": len(served)}

    @app.get("/api/releases", response_model=ReleaseList, tags=["releases"])
    async def list_releases() -> JSONResponse:
        """The served releases by name (their folder name), with their guarantee."""
        return JSONResponse({"releases": [item.summary() for item in served.values()]})

    @app.get("/api/releases/{name}", tags=["releases"], responses={404: ERRORS[404]})
    async def describe(name: str) -> JSONResponse:
        """The release's manifest metadata and guarantee, its schema (attributes with labels,
        bins and ranges), the cuboids of a data cube, the hierarchy of a census release, the
        bounds of a spatial one."""
        return JSONResponse(lookup(name).describe())

    @app.post(
        "/api/releases/{name}/answer",
        response_model=AnswerResponse,
        tags=["answers"],
        responses=ERRORS,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": AnswerRequest.model_json_schema()}},
            }
        },
    )
    async def answer_post(name: str, request: Request) -> JSONResponse:
        """Answer a batch of queries, each with its interval at `level`."""
        item = lookup(name)
        # parsed and validated by pydantic-core in one pass (the hot path: FastAPI's own body
        # handling costs more than answering one query)
        try:
            body = _AnswerBody.model_validate(read_json(await request.body(), "the request body"))
        except ValidationError as exc:
            located = [{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors()]
            raise RequestValidationError(located) from None
        _queries_are_objects(body.queries)
        return await answer(item, body.queries, body.level)

    @app.get(
        "/api/releases/{name}/answer",
        response_model=AnswerResponse,
        tags=["answers"],
        responses=ERRORS,
    )
    async def answer_get(
        name: str,
        where: str = Query(
            "",
            max_length=4096,
            description="the CLI's --where: `age=18..64, sex=F, income=#3..5, "
            "loc=33.9..34.1:-118.3..-118.1`, or a JSON object",
            examples=["age=20..39, sex=F"],
        ),
        level: float = Query(0.95, gt=0.0, lt=1.0, allow_inf_nan=False),
        overlapping: bool = Query(
            False,
            description="answer value ranges off the bin edges with the bins they overlap "
            "(as `dpcube query --overlapping`); the response then says what was `covered`",
        ),
    ) -> JSONResponse:
        """Answer one query written as `dpcube query --where` takes it."""
        item = lookup(name)
        query = overlapping_query(item, parse_where(where), overlapping)
        response = await answer(item, [query], level)
        if overlapping and response.status_code == 200:
            assert item.release.schema is not None  # checked by overlapping_query
            body = json.loads(bytes(response.body))
            body["covered"] = item.release.schema.coverage(query)
            return JSONResponse(body)
        return response

    @app.get(
        "/api/releases/{name}/table",
        tags=["tables"],
        responses={**ERRORS, 200: {"description": "the table as CSV, Parquet or JSON"}},
    )
    def table(
        name: str,
        format: str = Query("csv", pattern="^(csv|parquet|json)$"),
        cuboid: str | None = Query(None, max_length=1024, examples=["sex,income"]),
        level: float = Query(0.95, gt=0.0, lt=1.0, allow_inf_nan=False),
        where: str = Query("", max_length=4096),
        overlapping: bool = Query(False, description="as `dpcube export --overlapping`"),
    ) -> Response:
        """The release's labelled table (as `dpcube export`): one row per released cell, leaf,
        cuboid cell or region x size, with the estimate and its interval at `level`."""
        from dpcube.query_text import split_names
        from dpcube.release.formats import encode
        from dpcube.release.tables import labelled_table, table_info

        item = lookup(name)
        level = check_level(level)
        names = None if cuboid is None else split_names(cuboid, "cuboid")
        query = overlapping_query(item, parse_where(where), overlapping)
        rows = item.table_rows(names, query)
        if rows > max_table_rows:
            return error(
                413,
                f"the table has {rows:,} rows, more than the {max_table_rows:,} this service "
                "sends; narrow it with where= or cuboid=, or use `dpcube export`",
            )
        item.warm()
        labelled = labelled_table(
            item.release,
            level=level,
            cuboid=names,
            where=query,
            runs=item.runs if item.bootstrap else None,
            seed=item.seed if item.bootstrap else None,
        )
        stem = _safe_file_part(item.name) + (
            "-" + "-".join(map(_safe_file_part, names)) if names else ""
        )
        disposition = {"Content-Disposition": f'attachment; filename="{stem}.{format}"'}
        if format == "json":
            from dpcube.release.formats import arrow_rows_json

            listed = arrow_rows_json(labelled)
            return JSONResponse({**table_info(labelled), "rows": listed}, headers=disposition)
        media = "text/csv" if format == "csv" else "application/vnd.apache.parquet"
        return Response(encode(labelled, format), media_type=media, headers=disposition)

    @app.get("/api/releases/{name}/report", tags=["releases"], response_class=HTMLResponse,
             responses={404: ERRORS[404]})  # fmt: skip
    def report(name: str) -> Response:
        """The release's HTML report (`dpcube report`), if its directory holds one."""
        item = lookup(name)
        path = item.report_file()
        if path is None:
            return error(404, f"release {name!r} has no HTML report (run `dpcube report` on it)")
        return FileResponse(path, media_type="text/html")

    @app.get("/", include_in_schema=False)
    def explorer() -> Response:
        page = STATIC_DIR / "explorer.html"
        if not page.is_file():
            return error(404, "the explorer page is not installed")
        return FileResponse(page, media_type="text/html")

    @app.get("/docs", include_in_schema=False)
    def docs() -> Response:
        """Swagger UI over ``/openapi.json``, every file from this package (works offline)."""
        if not (STATIC_DIR / SWAGGER_UI / "swagger-ui-bundle.js").is_file():
            return error(404, "the API documentation page is not installed; see /openapi.json")
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="dpcube release service",
            swagger_js_url=f"/static/{SWAGGER_UI}/swagger-ui-bundle.js",
            swagger_css_url=f"/static/{SWAGGER_UI}/swagger-ui.css",
            swagger_favicon_url=f"/static/{SWAGGER_UI}/favicon-32x32.png",
            # no badge fetched from the online validator: the page makes no outside request
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        """No icon: an empty answer, so that a browser's own request logs no error."""
        return Response(status_code=204)

    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    if allowed_hosts is not None:
        app.add_middleware(AllowedHosts, hosts=list(allowed_hosts))
    return app


def _version() -> str:
    from dpcube import __version__

    return __version__


__all__ = [
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_TABLE_ROWS",
    "AnswerRequest",
    "create_app",
]
