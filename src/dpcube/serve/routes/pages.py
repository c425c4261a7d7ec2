"""The pages a browser asks for: ``GET /`` (the explorer), ``GET /docs`` (Swagger UI, every file
from this package's ``static`` folder: it works offline) and ``GET /favicon.ico``."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, Response

from dpcube.serve.errors import error

#: The explorer page and its files, served under ``/static``.
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
#: Swagger UI's files (npm's swagger-ui-dist, see its SOURCE.txt), served under /static.
SWAGGER_UI = "swagger-ui"

router = APIRouter(include_in_schema=False)


@router.get("/")
def explorer() -> Response:
    page = STATIC_DIR / "explorer.html"
    if not page.is_file():
        return error(404, "the explorer page is not installed")
    return FileResponse(page, media_type="text/html")


@router.get("/docs")
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


@router.get("/favicon.ico")
def favicon() -> Response:
    """No icon: an empty answer, so that a browser's own request logs no error."""
    return Response(status_code=204)
