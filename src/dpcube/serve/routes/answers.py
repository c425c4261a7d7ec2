"""``POST /api/releases/{name}/answer`` (a batch of queries) and
``GET /api/releases/{name}/answer?where=...`` (one query in the command line's ``--where``
text): each answer with its interval (:meth:`dpcube.release.base.Release.uncertainty`)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from dpcube.serve.errors import ERRORS, error
from dpcube.serve.inputs import check_level, read_json
from dpcube.serve.models import (
    AnswerBody,
    AnswerRequest,
    AnswerResponse,
    AnswersResponse,
    queries_are_objects,
)
from dpcube.serve.routes.common import lookup, overlapping_query, parse_where
from dpcube.serve.served import ServedRelease

router = APIRouter()


async def answer(
    request: Request, item: ServedRelease, queries: list[Any], level: float
) -> JSONResponse:
    """The answers to ``queries`` at ``level``; a batch over the app's ``max_batch`` is a 413."""
    max_batch: int = request.app.state.max_batch
    if len(queries) > max_batch:
        return error(413, f"{len(queries):,} queries in one batch; the limit is {max_batch:,}")
    level = check_level(level)
    if item.bootstrap:  # replicates answer each query: keep the event loop free
        body = await run_in_threadpool(item.answer, queries, level)
    else:
        body = item.answer(queries, level)
    return AnswersResponse(body)


@router.post(
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
    item = lookup(request, name)
    # parsed and validated by pydantic-core in one pass (the hot path: FastAPI's own body
    # handling costs more than answering one query)
    try:
        body = AnswerBody.model_validate(read_json(await request.body(), "the request body"))
    except ValidationError as exc:
        located = [{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors()]
        raise RequestValidationError(located) from None
    queries_are_objects(body.queries)
    return await answer(request, item, body.queries, body.level)


@router.get(
    "/api/releases/{name}/answer",
    response_model=AnswerResponse,
    tags=["answers"],
    responses=ERRORS,
)
async def answer_get(
    name: str,
    request: Request,
    where: str = Query(
        "",
        max_length=4096,
        description="the CLI's --where: `age=18..64, sex=F, income=#3..5, "
        "carrier in (UA, DL), loc=33.9..34.1:-118.3..-118.1`, or a JSON object "
        '(a set of categories: `{"carrier": {"in": ["UA", "DL"]}}`)',
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
    item = lookup(request, name)
    query = overlapping_query(item, parse_where(where), overlapping)
    response = await answer(request, item, [query], level)
    if overlapping and response.status_code == 200:
        assert item.release.schema is not None  # checked by overlapping_query
        body = json.loads(bytes(response.body))
        body["covered"] = item.release.schema.coverage(query)
        return JSONResponse(body)
    return response
