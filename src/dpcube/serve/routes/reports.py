"""``GET /api/releases/{name}/report``: a release's HTML report, if its directory holds one."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from dpcube.serve.errors import ERRORS, error
from dpcube.serve.routes.common import lookup

router = APIRouter()


@router.get("/api/releases/{name}/report", tags=["releases"], response_class=HTMLResponse,
            responses={404: ERRORS[404]})  # fmt: skip
def report(name: str, request: Request) -> Response:
    """The release's HTML report (`dpcube report`), if its directory holds one."""
    item = lookup(request, name)
    path = item.report_file()
    if path is None:
        return error(404, f"release {name!r} has no HTML report (run `dpcube report` on it)")
    return FileResponse(path, media_type="text/html")
