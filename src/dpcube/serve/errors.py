"""The service's one error shape: every error is ``{"error": "one line"}`` with a 4xx status (or,
for a bug, a 500), never a traceback; :func:`validation_line` makes FastAPI's validation errors
that one line."""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

#: Longest error line returned (a huge value quoted back in a message is cut).
MAX_ERROR_CHARS = 500


class ErrorBody(BaseModel):
    """Every error response: one line saying what is wrong and how to fix it."""

    error: str = Field(examples=["unknown release 'adult'; served: census, cells"])


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in (
        (400, "the query cannot be answered (unknown attribute, value outside the domain...)"),
        (404, "no such release, report or page"),
        (413, "request body or batch too large"),
        (422, "malformed request (bad JSON, wrong types, level outside (0, 1))"),
    )
}


def error(status: int, line: str) -> JSONResponse:
    """The one error shape: ``{"error": line}`` (first line only, never a traceback)."""
    text = str(line).strip().splitlines()[0] if str(line).strip() else "error"
    if len(text) > MAX_ERROR_CHARS:  # a value quoted back is cut, not the whole line dropped
        text = text[: MAX_ERROR_CHARS - 3] + "..."
    return JSONResponse({"error": text}, status_code=status)


def validation_line(exc: RequestValidationError) -> str:
    """One line for FastAPI's validation errors: the first error, located.

    >>> e = RequestValidationError([{"loc": ("body", "level"), "msg": "Input should be less than 1", "type": "less_than"}])
    >>> validation_line(e)
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


__all__ = ["ERRORS", "MAX_ERROR_CHARS", "ErrorBody", "error", "validation_line"]
