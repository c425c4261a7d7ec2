"""``GET /api/releases/{name}/table?format=csv|parquet|json``: a release's labelled table, as
``dpcube export`` writes it."""

from __future__ import annotations

import re

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from dpcube.serve.errors import ERRORS, error
from dpcube.serve.inputs import check_level
from dpcube.serve.routes.common import lookup, overlapping_query, parse_where

router = APIRouter()


def safe_file_part(text: str) -> str:
    """A file-name part of letters, digits, ``._-`` only (for Content-Disposition).

    >>> safe_file_part('cells "2024"/x')
    'cells__2024__x'
    """
    return re.sub(r"[^A-Za-z0-9._-]", "_", text) or "release"


@router.get(
    "/api/releases/{name}/table",
    tags=["tables"],
    responses={**ERRORS, 200: {"description": "the table as CSV, Parquet or JSON"}},
)
def table(
    name: str,
    request: Request,
    format: str = Query("csv", pattern="^(csv|parquet|json)$"),
    cuboid: str | None = Query(None, max_length=1024, examples=["sex,income"]),
    level: float = Query(0.95, gt=0.0, lt=1.0, allow_inf_nan=False),
    where: str = Query("", max_length=4096),
    overlapping: bool = Query(False, description="as `dpcube export --overlapping`"),
) -> Response:
    """The release's labelled table (as `dpcube export`): one row per released cell, leaf,
    cuboid cell or region x size, with the estimate and its interval at `level`."""
    from dpcube.query_text import split_names
    from dpcube.release.formats import arrow_rows_json, encode
    from dpcube.release.tables import labelled_table, table_info

    max_table_rows: int = request.app.state.max_table_rows
    item = lookup(request, name)
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
    stem = safe_file_part(item.name) + ("-" + "-".join(map(safe_file_part, names)) if names else "")
    disposition = {"Content-Disposition": f'attachment; filename="{stem}.{format}"'}
    if format == "json":
        listed = arrow_rows_json(labelled)
        return JSONResponse({**table_info(labelled), "rows": listed}, headers=disposition)
    media = "text/csv" if format == "csv" else "application/vnd.apache.parquet"
    return Response(encode(labelled, format), media_type=media, headers=disposition)
