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

The endpoints are routers, one per resource (:mod:`dpcube.serve.routes`); the error shape is
:mod:`dpcube.serve.errors`'s, the request and response models :mod:`dpcube.serve.models`'s,
the middleware :mod:`dpcube.serve.middleware`'s.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from dpcube.errors import DPCubeError
from dpcube.serve.errors import error, validation_line
from dpcube.serve.inputs import RequestRefused
from dpcube.serve.middleware import AllowedHosts, BodyLimit
from dpcube.serve.models import AnswerRequest
from dpcube.serve.routes import answers, pages, releases, reports, tables
from dpcube.serve.routes.pages import STATIC_DIR
from dpcube.serve.served import load_served

#: Largest request body accepted (bytes): 1 MiB holds about 30,000 small queries.
DEFAULT_MAX_BODY_BYTES = 1 << 20
#: Most queries in one batch.
DEFAULT_MAX_BATCH = 10_000
#: Most rows of a table the service builds and sends (``dpcube export`` writes larger ones).
DEFAULT_MAX_TABLE_ROWS = 1_000_000

log = logging.getLogger("dpcube.serve")


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
    app.state.max_table_rows = max_table_rows

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else "request refused"
        if exc.status_code == 404 and detail == "Not Found":
            detail = "not found: no such page (see /docs for the endpoints)"
        return error(exc.status_code, detail)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, validation_line(exc))

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

    for module in (releases, answers, tables, reports, pages):
        app.include_router(module.router)
    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    if allowed_hosts is not None:
        app.add_middleware(AllowedHosts, hosts=list(allowed_hosts))
    return app


def _version() -> str:
    from dpcube.version import __version__

    return __version__


__all__ = [
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_TABLE_ROWS",
    "STATIC_DIR",
    "AnswerRequest",
    "create_app",
]
