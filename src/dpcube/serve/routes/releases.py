"""``GET /api/health``, ``GET /api/releases`` (the served releases) and
``GET /api/releases/{name}`` (one release's description)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from dpcube.serve.errors import ERRORS
from dpcube.serve.models import ReleaseList
from dpcube.serve.routes.common import lookup, served_releases

router = APIRouter()


@router.get("/api/health", tags=["service"])
async def health(request: Request) -> dict[str, Any]:
    """Whether the service is up, and how many releases it serves."""
    return {"status": "ok", "releases": len(served_releases(request))}


@router.get("/api/releases", response_model=ReleaseList, tags=["releases"])
async def list_releases(request: Request) -> JSONResponse:
    """The served releases by name (their folder name), with their guarantee."""
    served = served_releases(request)
    return JSONResponse({"releases": [item.summary() for item in served.values()]})


@router.get("/api/releases/{name}", tags=["releases"], responses={404: ERRORS[404]})
async def describe(name: str, request: Request) -> JSONResponse:
    """The release's manifest metadata and guarantee, its schema (attributes with labels,
    bins and ranges), the cuboids of a data cube, the hierarchy of a census release, the
    bounds of a spatial one."""
    return JSONResponse(lookup(request, name).describe())
