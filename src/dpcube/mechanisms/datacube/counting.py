"""True counts of the measured cuboids (spec 2.4; issue part 2, counting at scale).

From a :class:`dpcube.Histogram` the base cuboid is in memory and every cuboid is a roll-up. From a
data source the cuboids are counted by DuckDB in one pass, ``GROUP BY GROUPING SETS`` over the bin
codes of :func:`dpcube.engine.duckdb_engine.axis_expressions`, so only the measured cuboids are
ever materialised: a cube whose base cuboid has 10^9 cells works when only lower cuboids are
measured. Rows with a NULL or out-of-domain value follow the same policies as
:func:`dpcube.histogram` (``error``, ``drop``, ``clip``) and are treated the same way in every
cuboid (a dropped row is dropped from all of them; ``dropped`` counts, per attribute, the rows
with a bad value there, so a row bad in two attributes is counted under both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.engine.base import POLICIES, policy_report
from dpcube.engine.duckdb_engine import axis_expressions, open_source
from dpcube.engine.sql import ABOVE, BELOW, DUCKDB, NULL, offending_values_sql
from dpcube.errors import DataError
from dpcube.histogram import Histogram
from dpcube.mechanisms.datacube.geometry import CubeGeometry
from dpcube.mechanisms.datacube.lattice import is_subset, rollup, shape
from dpcube.mechanisms.datacube.measures import SumMeasure
from dpcube.schema import Nominal


def counts_from_histogram(
    geo: CubeGeometry, hist: Histogram, masks: Sequence[int]
) -> dict[int, NDArray[np.int64]]:
    """Roll the base cuboid up to each cuboid in ``masks`` (each from its smallest computed superset).

    >>> from dpcube.schema import Schema
    >>> s = Schema.from_dict({"attributes": [{"name": n, "kind": "nominal", "categories": ["0", "1"]}
    ...                                      for n in "ab"]})
    >>> out = counts_from_histogram(CubeGeometry(s), Histogram(s, [[1, 2], [3, 4]]), [0b01, 0b00])
    >>> out[0b01].tolist(), int(out[0b00])
    ([3, 7], 10)
    """
    lat = geo.lattice
    have: dict[int, NDArray[np.int64]] = {lat.base: hist.counts.reshape(shape(lat, lat.base))}
    out: dict[int, NDArray[np.int64]] = {}
    for mask in sorted(set(masks), key=lambda m: -bin(m).count("1")):
        parent = min((p for p in have if is_subset(mask, p)), key=lat.cells)
        have[mask] = np.asarray(rollup(have[parent], parent, mask), dtype=np.int64)
        out[mask] = have[mask]
    return out


def counts_from_source(
    geo: CubeGeometry,
    source: Any,
    masks: Sequence[int],
    on_out_of_domain: str = "error",
    weight: SumMeasure | None = None,
) -> tuple[dict[int, NDArray[np.int64]], dict[str, Any]]:
    """Count the cuboids ``masks`` of ``source`` with one DuckDB GROUPING SETS query.

    With ``weight`` each cell holds the sum of the rows' measure values (rounded to integers and
    clipped to the measure's bounds, spec 8.3) instead of their number; a row whose measure is
    NULL is refused (``on_out_of_domain="error"``) or dropped from every cuboid.

    Returns the cuboids (lattice layout) and the data report of :func:`dpcube.engine.base.policy_report`.
    """
    if on_out_of_domain not in POLICIES:
        raise DataError(
            f"on_out_of_domain must be one of {', '.join(POLICIES)}, got {on_out_of_domain!r}"
        )
    schema = geo.schema
    lat = geo.lattice
    with open_source(source) as view:
        exprs = axis_expressions(schema, view.columns)
        axis_attr = [schema[name] for name, _ in schema.axes]
        codes = ", ".join(f"{e} AS a{i}" for i, e in enumerate(exprs))
        measure_report: dict[str, Any] = {}
        if weight is not None:
            if weight.column not in view.columns:
                raise DataError(
                    f"measure column {weight.column!r} is not in the data; columns: "
                    f"{', '.join(view.columns)}"
                )
            raw = f'TRY_CAST("{weight.column.replace(chr(34), chr(34) * 2)}" AS DOUBLE)'
            nulls, clipped_values = view.sql(
                f"SELECT count(*) FILTER (WHERE {raw} IS NULL), "
                f"count(*) FILTER (WHERE round({raw}) < {weight.low} OR round({raw}) > {weight.high}) "
                "FROM src"
            ).fetchall()[0]
            if nulls and on_out_of_domain != "drop":
                raise DataError(
                    f"measure column {weight.column!r}: {int(nulls)} rows are NULL or not numbers; "
                    "drop them with on_out_of_domain='drop' or fill them"
                )
            measure_report = {
                "measure": {
                    "column": weight.column,
                    "null": int(nulls),
                    "clipped": int(clipped_values),
                }
            }
            # greatest/least skip NULLs, so a NULL measure must stay NULL explicitly
            clip = f"least(greatest(round({raw}), {weight.low}), {weight.high})"
            codes += f", CASE WHEN {raw} IS NULL THEN NULL ELSE CAST({clip} AS BIGINT) END AS w"
        summary = ", ".join(
            f"count(*) FILTER (WHERE a{i} = {code})"
            for i in range(len(exprs))
            for code in (BELOW, NULL, ABOVE)
        )
        row = view.sql(f"SELECT count(*), {summary} FROM (SELECT {codes} FROM src)").fetchall()[0]
        rows = int(row[0])
        bad = np.array(row[1:], dtype=np.int64).reshape(len(exprs), 3)
        clipped: dict[str, int] = {}
        dropped: dict[str, int] = {}
        keys = [f"a{i}" for i in range(len(exprs))]
        for i, attr in enumerate(axis_attr):
            for j, code in enumerate((BELOW, NULL, ABOVE)):
                count = int(bad[i, j])
                if not count:
                    continue
                can_clip = code in (BELOW, ABOVE) and not isinstance(attr, Nominal)
                if on_out_of_domain == "error" or (on_out_of_domain == "clip" and not can_clip):
                    found = view.sql(
                        offending_values_sql(attr.columns, exprs[i], code, DUCKDB)
                    ).fetchall()
                    shown = ", ".join(
                        f"{r[0] if len(r) == 2 else tuple(r[:-1])!r} ({r[-1]} rows)" for r in found
                    )
                    what = "NULL" if code == NULL else "outside the domain"
                    raise DataError(
                        f"column {', '.join(attr.columns)} (attribute {attr.name!r}): {count} rows are "
                        f"{what}, e.g. {shown}; drop them with on_out_of_domain='drop' or fix the data"
                    )
                if on_out_of_domain == "clip":
                    clipped[attr.name] = clipped.get(attr.name, 0) + count
                    top = schema.shape[i] - 1
                    keys[i] = (
                        f"(CASE WHEN a{i} = {BELOW} THEN 0 WHEN a{i} = {ABOVE} THEN {top} ELSE a{i} END)"
                    )
                else:
                    dropped[attr.name] = dropped.get(attr.name, 0) + count
        binned = ", ".join(f"{k} AS b{i}" for i, k in enumerate(keys)) + (
            ", w" if weight is not None else ""
        )
        sets = ", ".join(
            "(" + ", ".join(f"b{i}" for i in geo.schema_axes(mask)) + ")"
            for mask in sorted(set(masks))
        )
        # GROUPING() accepts only columns of some grouping set: the axes a measured cuboid keeps.
        grouped = sorted({i for mask in set(masks) for i in geo.schema_axes(mask)})
        grouping = f"GROUPING({', '.join(f'b{i}' for i in grouped)})" if grouped else "0"
        good = " AND ".join(f"b{i} >= 0" for i in range(len(exprs))) + (
            " AND w IS NOT NULL" if weight is not None else ""
        )
        total = "coalesce(sum(w), 0)" if weight is not None else "count(*)"
        result = view.sql(
            f"SELECT {grouping} AS gid, {', '.join(f'coalesce(b{i}, 0) AS b{i}' if i in grouped else f'0 AS b{i}' for i in range(len(exprs)))}, "
            f"{total} AS n FROM (SELECT {binned} FROM (SELECT {codes} FROM src)) WHERE {good} "
            f"GROUP BY GROUPING SETS ({sets})"
        ).fetchnumpy()
        counted_rows = view.sql(
            f"SELECT count(*) FROM (SELECT {binned} FROM (SELECT {codes} FROM src)) WHERE {good}"
        ).fetchall()
    counted = int(counted_rows[0][0])
    gid = np.asarray(result["gid"], dtype=np.int64)
    values = np.stack(
        [np.asarray(result[f"b{i}"], dtype=np.int64) for i in range(len(exprs))], axis=1
    )
    n = np.asarray(result["n"], dtype=np.int64)
    width = len(grouped)
    out: dict[int, NDArray[np.int64]] = {}
    for mask in sorted(set(masks)):
        axes = geo.schema_axes(mask)
        aggregated = sum(1 << (width - 1 - j) for j, i in enumerate(grouped) if i not in axes)
        hit = gid == aggregated
        cuboid = np.zeros(lat.cells(mask), dtype=np.int64)
        if axes:
            flat = np.ravel_multi_index(tuple(values[hit][:, axes].T), geo.shape(mask))
            np.add.at(cuboid, flat, n[hit])
        else:
            cuboid[0] = int(n[hit].sum())
        out[mask] = cuboid.reshape(shape(lat, mask))
    report = policy_report(
        on_out_of_domain, rows=rows, counted=counted, dropped=dropped, clipped=clipped
    )
    report.update(measure_report)
    return out, report
