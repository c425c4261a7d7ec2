"""What the routers share: the served release a path names, and the ``where`` and
``overlapping`` parameters read as the command line reads ``--where`` and ``--overlapping``."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.exceptions import HTTPException as StarletteHTTPException

from dpcube.errors import DPCubeError
from dpcube.serve.inputs import read_json
from dpcube.serve.served import ServedRelease


def served_releases(request: Request) -> dict[str, ServedRelease]:
    """The releases the app serves, by name (``app.state.served``)."""
    served: dict[str, ServedRelease] = request.app.state.served
    return served


def lookup(request: Request, name: str) -> ServedRelease:
    """The served release called ``name``; a 404 listing the served names if there is none."""
    served = served_releases(request)
    item = served.get(name)
    if item is None:
        listed = ", ".join(sorted(served))
        raise StarletteHTTPException(404, f"unknown release {name!r}; served: {listed}")
    return item


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


__all__ = ["lookup", "overlapping_query", "parse_where", "served_releases"]
