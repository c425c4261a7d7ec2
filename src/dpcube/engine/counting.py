"""Every counting path, written once in SQL over a :class:`~dpcube.engine.sql.Table`.

DuckDB and Spark run the same statements (their dialects differ only in what
:class:`~dpcube.engine.sql.Dialect` adapts), so the two engines give identical counts:

- :func:`histogram_counts`: the dense frequency matrix of a schema (one ``GROUP BY`` of bin codes);
- :func:`cuboid_counts`: the cuboids of a data cube for a list of grouping sets, in one
  ``GROUP BY GROUPING SETS`` query that never builds the base cuboid unless it is asked for;
- :func:`group_size_counts`: a census group-size table (unit -> size, then region x size);
- :func:`bound_units`: any of these over the rows that remain when each privacy unit
  keeps at most K rows (and C cells, R rows a cell), chosen by a keyed hash that both engines
  compute the same way (:func:`bounded_rows_sql`).

Each returns only aggregates (at most one row per cell) to the driver. The out-of-domain policies
and their report are those of :mod:`dpcube.engine.sql` (:func:`~dpcube.engine.sql.fill_counts`).
Entry points take any source: :func:`dpcube.engine.open_table` opens it in the right engine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dpcube.engine.base import POLICIES, OutOfDomainPolicy, policy_report
from dpcube.engine.contribution import ContributionBound
from dpcube.engine.sql import (
    ABOVE,
    BELOW,
    NULL,
    Dialect,
    Problem,
    Table,
    axis_expressions,
    fill_counts,
    offending_values_sql,
    out_of_domain_error,
)
from dpcube.errors import DataError
from dpcube.schema import Nominal, Schema


def check_policy(on_out_of_domain: str) -> None:
    if on_out_of_domain not in POLICIES:
        raise DataError(
            f"on_out_of_domain must be one of {', '.join(POLICIES)}, got {on_out_of_domain!r}"
        )


def _codes(table: Table, schema: Schema) -> list[str]:
    return axis_expressions(schema, table.columns, table.dialect, lambda q: table.rows(q)[0])


def _examples(table: Table, schema: Schema, exprs: list[str]) -> Any:
    """The commonest offending values of an axis (private: only for ``show_values``)."""

    def examples(axis: int, code: int) -> list[tuple[Any, int]]:
        columns = schema[schema.axes[axis][0]].columns
        types = table.columns
        plain = (*table.dialect.numeric_types, "VARCHAR", "STRING", "TEXT")
        as_text = tuple(
            c for c in columns if str(types.get(c, "")).split("(")[0].upper() not in plain
        )
        found = table.rows(offending_values_sql(columns, exprs[axis], code, table.dialect, as_text))
        return [(r[0] if len(columns) == 1 else tuple(r[:-1]), int(r[-1])) for r in found]

    return examples


def _grouped_codes(
    table: Table, query: str, axes: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    result = table.arrays(query)
    codes = np.stack(
        [np.asarray(result[f"a{i}"], dtype=np.int64).reshape(-1) for i in range(axes)], axis=1
    ).reshape(-1, axes)
    return codes, np.asarray(result["n"], dtype=np.int64).reshape(-1)


def histogram_counts(
    table: Table,
    schema: Schema,
    on_out_of_domain: OutOfDomainPolicy = "error",
    show_values: bool = False,
    bound: ContributionBound | None = None,
) -> tuple[NDArray[np.int64], dict[str, Any]]:
    """Counts in the schema's shape and the data report (:meth:`dpcube.engine.Engine.histogram`).

    With ``bound`` each unit's rows are bounded first (:func:`bound_units`); the report
    then adds the bounding's exact figures (:func:`bounding_report`: the curator's only)."""
    before: dict[str, Any] | None = None
    if bound is not None:
        check_policy(on_out_of_domain)
        table, before = bound_units(table, schema, bound, on_out_of_domain)
    exprs = _codes(table, schema)
    select = ", ".join(f"{e} AS a{i}" for i, e in enumerate(exprs))
    keys = ", ".join(f"a{i}" for i in range(len(exprs)))
    codes, n = _grouped_codes(
        table, f"SELECT {select}, count(*) AS n FROM src GROUP BY {keys}", len(exprs)
    )
    examples = _examples(table, schema, exprs) if show_values else None
    counts, report = fill_counts(schema, codes, n, on_out_of_domain, examples)
    if bound is not None and before is not None:
        report.update(bounding_report(before, bound, int(n.sum())))
    return counts, report


class Weight(Protocol):
    """A summed measure: each row adds its ``column`` rounded and clipped to [low, high]."""

    @property
    def column(self) -> str: ...
    @property
    def low(self) -> int: ...
    @property
    def high(self) -> int: ...


def cuboid_counts(
    table: Table,
    schema: Schema,
    grouping_sets: Sequence[tuple[int, ...]],
    on_out_of_domain: str = "error",
    weight: Weight | None = None,
    show_values: bool = False,
    bound: ContributionBound | None = None,
) -> tuple[dict[tuple[int, ...], NDArray[np.int64]], dict[str, Any]]:
    """The cuboid of each grouping set (a tuple of schema axes), in one GROUPING SETS query.

    With ``bound`` each privacy unit's rows are bounded first (:func:`bound_units`; a
    row's cell is its bin codes and, with ``weight``, its clipped measure), and the report adds
    the bounding's exact figures (:func:`bounding_report`, the curator's only).

    Each cuboid is dense, in the shape of its axes (a 0-d array for ``()``). Rows with a NULL or
    out-of-domain value follow ``on_out_of_domain`` the same way in every cuboid (a dropped row is
    dropped from all; ``dropped`` counts, per attribute, the rows with a bad value there). With
    ``weight`` a cell holds the sum of its rows' measure (rounded, clipped to the bounds; a NULL
    measure is refused, or dropped under ``"drop"``). Raises
    :func:`~dpcube.engine.sql.out_of_domain_error` for rows the policy does not cover.
    """
    check_policy(on_out_of_domain)
    if bound is not None:
        extra = [] if weight is None else [_clipped_measure(table.dialect, weight)]
        bounded, before = bound_units(table, schema, bound, on_out_of_domain, extra)
        cuboids, counted_report = cuboid_counts(
            bounded, schema, grouping_sets, on_out_of_domain, weight, show_values
        )
        counted_report.update(bounding_report(before, bound, int(counted_report["rows"])))
        return cuboids, counted_report
    d = table.dialect
    exprs = _codes(table, schema)
    axis_attr = [schema[name] for name, _ in schema.axes]
    if weight is None and _code_space(schema) <= ROLL_UP_MAX_GROUPS:
        return _rolled_up_cuboids(
            table, schema, exprs, grouping_sets, on_out_of_domain, show_values
        )
    codes = ", ".join(f"{e} AS a{i}" for i, e in enumerate(exprs))
    measure_report: dict[str, Any] = {}
    if weight is not None:
        if weight.column not in table.columns:
            raise DataError(
                f"measure column {weight.column!r} is not in the data; columns: "
                f"{', '.join(table.columns)}"
            )
        raw = f"TRY_CAST({d.ident(weight.column)} AS DOUBLE)"
        nulls, clipped_values = table.rows(
            f"SELECT count(*) FILTER (WHERE {raw} IS NULL), "
            f"count(*) FILTER (WHERE round({raw}) < {weight.low} OR round({raw}) > {weight.high}) "
            "FROM src"
        )[0]
        if nulls and on_out_of_domain != "drop":
            raise DataError(
                f"measure column {weight.column!r}: {int(nulls)} rows are NULL or not numbers; "
                "drop them with on_out_of_domain='drop' or fill them"
            )
        measure_report = {
            "measure": {"column": weight.column, "null": int(nulls), "clipped": int(clipped_values)}
        }
        # greatest/least skip NULLs, so a NULL measure must stay NULL explicitly
        clip = f"least(greatest(round({raw}), {weight.low}), {weight.high})"
        codes += f", CASE WHEN {raw} IS NULL THEN NULL ELSE CAST({clip} AS BIGINT) END AS w"
    coded = f"(SELECT {codes} FROM src) AS coded"
    summary = ", ".join(
        f"count(*) FILTER (WHERE a{i} = {code})"
        for i in range(len(exprs))
        for code in (BELOW, NULL, ABOVE)
    )
    row = table.rows(f"SELECT count(*), {summary} FROM {coded}")[0]
    rows = int(row[0])
    bad = np.array(row[1:], dtype=np.int64).reshape(len(exprs), 3)
    clipped: dict[str, int] = {}
    dropped: dict[str, int] = {}
    keys = [f"a{i}" for i in range(len(exprs))]
    problems: list[Problem] = []
    for i, attr in enumerate(axis_attr):
        by_code: dict[int, int] = {}
        for j, code in enumerate((BELOW, NULL, ABOVE)):
            count = int(bad[i, j])
            if not count:
                continue
            can_clip = code in (BELOW, ABOVE) and not isinstance(attr, Nominal)
            if on_out_of_domain == "error" or (on_out_of_domain == "clip" and not can_clip):
                by_code[code] = count
            elif on_out_of_domain == "clip":
                clipped[attr.name] = clipped.get(attr.name, 0) + count
                top = schema.shape[i] - 1
                keys[i] = (
                    f"(CASE WHEN a{i} = {BELOW} THEN 0 WHEN a{i} = {ABOVE} THEN {top} ELSE a{i} END)"
                )
            else:
                dropped[attr.name] = dropped.get(attr.name, 0) + count
        if by_code:
            problems.append((i, attr, schema.axes[i][1], by_code))
    if problems:
        uncovered = " OR ".join(
            f"a{i} IN ({', '.join(str(c) for c in by_code)})" for i, _, _, by_code in problems
        )
        affected = table.rows(f"SELECT count(*) FROM {coded} WHERE {uncovered}")[0][0]
        raise out_of_domain_error(
            problems,
            rows=rows,
            affected=int(affected),
            examples=_examples(table, schema, exprs) if show_values else None,
        )
    binned = ", ".join(f"{k} AS b{i}" for i, k in enumerate(keys)) + (
        ", w" if weight is not None else ""
    )
    good = " AND ".join(f"b{i} >= 0" for i in range(len(exprs))) + (
        " AND w IS NOT NULL" if weight is not None else ""
    )
    kept = f"(SELECT {binned} FROM {coded}) AS binned WHERE {good}"
    unique = sorted({tuple(sorted(s)) for s in grouping_sets})
    sets = ", ".join("(" + ", ".join(f"b{i}" for i in s) + ")" for s in unique)
    # GROUPING() accepts only columns of some grouping set: the axes a measured cuboid keeps.
    grouped = sorted({i for s in unique for i in s})
    total = "coalesce(sum(w), 0)" if weight is not None else "count(*)"
    columns = ", ".join(
        f"coalesce(b{i}, 0) AS b{i}" if i in grouped else f"0 AS b{i}" for i in range(len(exprs))
    )
    result = table.arrays(
        f"SELECT {d.grouping_id([f'b{i}' for i in grouped])} AS gid, {columns}, {total} AS n "
        f"FROM {kept} GROUP BY GROUPING SETS ({sets})"
    )
    counted = int(table.rows(f"SELECT count(*) FROM {kept}")[0][0])
    gid = np.asarray(result["gid"], dtype=np.int64)
    values = np.stack(
        [np.asarray(result[f"b{i}"], dtype=np.int64) for i in range(len(exprs))], axis=1
    ).reshape(-1, len(exprs))
    n = np.asarray(result["n"], dtype=np.int64)
    width = len(grouped)
    out: dict[tuple[int, ...], NDArray[np.int64]] = {}
    for axes in unique:
        aggregated = sum(1 << (width - 1 - j) for j, i in enumerate(grouped) if i not in axes)
        hit = gid == aggregated
        shape = tuple(schema.shape[i] for i in axes)
        cuboid = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        if axes:
            flat = np.ravel_multi_index(tuple(values[hit][:, list(axes)].T), shape)
            np.add.at(cuboid, flat, n[hit])
        else:
            cuboid[0] = int(n[hit].sum())
        out[axes] = cuboid.reshape(shape)
    report = policy_report(
        on_out_of_domain, rows=rows, counted=counted, dropped=dropped, clipped=clipped
    )
    report.update(measure_report)
    return out, report


def _clipped_measure(d: Dialect, weight: Weight) -> str:
    """SQL of a row's measure as :func:`cuboid_counts` sums it: rounded, clipped, BIGINT."""
    raw = f"TRY_CAST({d.ident(weight.column)} AS DOUBLE)"
    return f"CAST(least(greatest(round({raw}), {weight.low}), {weight.high}) AS BIGINT)"


#: Most groups (product over the axes of bins + 3 negative codes) for which :func:`cuboid_counts`
#: groups the rows once by every axis and sums the cuboids on the driver, instead of one
#: ``GROUPING SETS`` query over the data plus two counting scans.
ROLL_UP_MAX_GROUPS = 1 << 20


def _code_space(schema: Schema) -> int:
    """How many distinct code tuples rows can have: each axis's bins and 3 negative codes.

    >>> _code_space(Schema.from_dict({"attributes": [
    ...     {"name": "a", "kind": "ordinal", "range": [0, 9], "width": 1}]}))
    13
    """
    return int(np.prod([size + 3 for size in schema.shape], dtype=object))


def _rolled_up_cuboids(
    table: Table,
    schema: Schema,
    exprs: list[str],
    grouping_sets: Sequence[tuple[int, ...]],
    on_out_of_domain: str,
    show_values: bool,
) -> tuple[dict[tuple[int, ...], NDArray[np.int64]], dict[str, Any]]:
    """:func:`cuboid_counts` (no measure) from ONE scan: the rows grouped by the codes of every
    axis (at most :data:`ROLL_UP_MAX_GROUPS` groups come back), then the policy and each cuboid
    (a marginal of the kept groups) on the driver; the same counts and report as the
    ``GROUPING SETS`` plan, which scans the data three times."""
    axes = len(exprs)
    select = ", ".join(f"{e} AS a{i}" for i, e in enumerate(exprs))
    keys = ", ".join(f"a{i}" for i in range(axes))
    codes, n = _grouped_codes(
        table, f"SELECT {select}, count(*) AS n FROM src GROUP BY {keys}", axes
    )
    codes = codes.copy()
    rows = int(n.sum())
    clipped: dict[str, int] = {}
    dropped: dict[str, int] = {}
    problems: list[Problem] = []
    uncovered = np.zeros(len(n), dtype=bool)
    for i, (name, part) in enumerate(schema.axes):
        attr = schema[name]
        by_code: dict[int, int] = {}
        for code in (BELOW, NULL, ABOVE):
            hit = codes[:, i] == code
            count = int(n[hit].sum())
            if not count:
                continue
            can_clip = code in (BELOW, ABOVE) and not isinstance(attr, Nominal)
            if on_out_of_domain == "error" or (on_out_of_domain == "clip" and not can_clip):
                by_code[code] = count
                uncovered |= hit
            elif on_out_of_domain == "clip":
                clipped[attr.name] = clipped.get(attr.name, 0) + count
                codes[hit, i] = 0 if code == BELOW else schema.shape[i] - 1
            else:
                dropped[attr.name] = dropped.get(attr.name, 0) + count
        if by_code:
            problems.append((i, attr, part, by_code))
    if problems:
        raise out_of_domain_error(
            problems,
            rows=rows,
            affected=int(n[uncovered].sum()),
            examples=_examples(table, schema, exprs) if show_values else None,
        )
    kept = (codes >= 0).all(axis=1)
    base = np.zeros(schema.size, dtype=np.int64)
    np.add.at(base, np.ravel_multi_index(tuple(codes[kept].T), schema.shape), n[kept])
    base = base.reshape(schema.shape)
    out: dict[tuple[int, ...], NDArray[np.int64]] = {}
    for cuboid_axes in sorted({tuple(sorted(s)) for s in grouping_sets}):
        summed = tuple(i for i in range(axes) if i not in cuboid_axes)
        out[cuboid_axes] = np.asarray(base.sum(axis=summed), dtype=np.int64)
    report = policy_report(
        on_out_of_domain, rows=rows, counted=int(n[kept].sum()), dropped=dropped, clipped=clipped
    )
    return out, report


#: How :func:`group_size_counts` assigns one region to a unit seen in several.
REGION_OF_UNIT = ("first", "most")


def group_size_counts(
    table: Table,
    unit: str,
    region: str,
    show_values: bool = False,
    *,
    on_out_of_domain: str = "error",
    region_of_unit: str | None = None,
    leaves: Sequence[str] | None = None,
    report: dict[str, Any] | None = None,
) -> dict[str, NDArray[Any]]:
    """Census group sizes of person rows: each unit's size and leaf region, then the number of
    units (``count``) and of persons (``persons``) per (``region`` text, ``size``).

    Refuses a missing column and a unit in two regions (counted; a unit id and its regions,
    private data, are named only with ``show_values``). Rows with a NULL unit or region follow
    ``on_out_of_domain``: refused under ``"error"`` and ``"clip"`` (a NULL has no nearest
    value), not counted under ``"drop"``; under ``"drop"`` with ``leaves`` (the hierarchy's leaf
    regions), so are rows whose region is not one of them. Both are filters of single rows,
    applied before the units are formed, so one person added or removed still changes one unit
    by one person (or nothing).

    ``region_of_unit`` gives a unit seen in several regions one region, whatever the order of
    the rows: ``"first"`` the first of its regions in byte order of the region text (the
    smallest code), ``"most"`` the region of most of its rows (a tie goes to the first of the
    tied regions in that order). ``report`` (a dict) receives ``null_rows_dropped``,
    ``rows_outside_leaves_dropped`` and ``units_reassigned``.

    Without ``region_of_unit``, two scans. The first groups the rows by region text (a few
    thousand groups) and counts the NULLs. The second, the heavy one, groups by unit keeping
    only fixed-width aggregates of a 64-bit hash of the region text (``count``, ``min``,
    ``max``), so both engines run it as a hash aggregate with map-side partial aggregation (a
    ``min``/``max`` of text makes Spark sort all rows instead); units whose hashes differ span
    two regions. The hashes are mapped back to the texts of the first scan; if two region texts
    share a hash (never seen; 64 bits), the exact text plan (:func:`_group_size_counts_by_text`)
    runs instead.
    """
    d = table.dialect
    check_policy(on_out_of_domain)
    if region_of_unit is not None and region_of_unit not in REGION_OF_UNIT:
        raise DataError(
            f"region_of_unit must be one of {', '.join(REGION_OF_UNIT)}, got {region_of_unit!r}"
        )
    for col in (unit, region):
        if col not in table.columns:
            raise DataError(f"column {col!r} not in the data (columns: {list(table.columns)})")
    u, text = d.ident(unit), d.text(d.ident(region))
    regions = table.rows(
        f"SELECT region, {d.hash64('region')} AS k, persons, null_units FROM ("
        f"SELECT {text} AS region, count(*) AS persons, count(*) FILTER (WHERE {u} IS NULL) "
        f"AS null_units FROM src GROUP BY {text}) AS regions"
    )
    nulls = sum(
        int(persons if name is None else null_units) for name, _, persons, null_units in regions
    )
    if nulls and on_out_of_domain != "drop":
        why = " (clip does not apply to a NULL: it has no nearest value)" * (
            on_out_of_domain == "clip"
        )
        raise DataError(
            f"{nulls} rows have a NULL {unit!r} or {region!r}{why}; drop or fill them, or leave "
            "them out with --on-out-of-domain drop (on_out_of_domain='drop')"
        )
    outside: list[str] = []
    if leaves is not None and on_out_of_domain == "drop":
        known = set(leaves)
        outside = sorted(
            str(row[0]) for row in regions if row[0] is not None and row[0] not in known
        )
    outside_rows = sum(int(p) - int(n) for r, _, p, n in regions if r is not None and r in outside)
    if report is not None:
        report["null_rows_dropped"] = nulls
        report["rows_outside_leaves_dropped"] = outside_rows
        report["units_reassigned"] = 0
    keep = [f"{u} IS NOT NULL", f"{d.ident(region)} IS NOT NULL"]
    if outside:
        keep.append(f"{text} NOT IN ({', '.join(d.literal(x) for x in outside)})")
    source = (
        f"(SELECT * FROM src WHERE {' AND '.join(keep)}) AS kept" if nulls or outside else "src"
    )
    if region_of_unit is not None:
        return _assigned_group_size_counts(table, unit, region, source, region_of_unit, report)
    regions = [row for row in regions if row[0] is not None and row[0] not in outside]
    key_to_region = {int(k): str(name) for name, k, _, _ in regions}
    if len(key_to_region) < len(regions):
        return _group_size_counts_by_text(table, unit, region, show_values, source)
    units = (
        "(SELECT CASE WHEN k0 = k1 THEN k0 ELSE 0 END AS k, "
        "CASE WHEN k0 = k1 THEN 0 ELSE 1 END AS spread, size FROM ("
        "SELECT count(*) AS size, min(k) AS k0, max(k) AS k1 "
        f"FROM (SELECT {u} AS unit, {d.hash64(text)} AS k FROM {source}) AS keyed GROUP BY unit"
        ") AS grouped) AS units"
    )
    result = table.arrays(
        f"SELECT k, spread, size, count(*) AS count, sum(size) AS persons FROM {units} "
        "GROUP BY k, spread, size"
    )
    count = np.asarray(result["count"], dtype=np.int64)
    spread = np.asarray(result["spread"]) == 1
    if spread.any():
        _raise_spread(table, unit, region, int(count[spread].sum()), show_values, source)
    keys = [int(k) for k in np.asarray(result["k"]).tolist()]
    return {
        "region": np.array([key_to_region[int(k)] for k in keys], dtype=object),
        "size": np.asarray(result["size"], dtype=np.int64),
        "count": count,
        "persons": np.asarray(result["persons"], dtype=np.int64),
    }


def _assigned_group_size_counts(
    table: Table,
    unit: str,
    region: str,
    source: str,
    rule: str,
    report: dict[str, Any] | None,
) -> dict[str, NDArray[Any]]:
    """:func:`group_size_counts` with each unit in one region chosen by ``rule`` (exact, on the
    region texts; independent of the order of the rows)."""
    d = table.dialect
    u, text = d.ident(unit), d.text(d.ident(region))
    order = "region" if rule == "first" else "n DESC, region"
    per = f"SELECT {u} AS unit, {text} AS region, count(*) AS n FROM {source} GROUP BY {u}, {text}"
    ranked = (
        "SELECT region, sum(n) OVER (PARTITION BY unit) AS size, "
        "count(*) OVER (PARTITION BY unit) AS regions, "
        f"row_number() OVER (PARTITION BY unit ORDER BY {order}) AS rk FROM ({per}) AS per"
    )
    result = table.arrays(
        "SELECT region, size, count(*) AS count, sum(size) AS persons, "
        "sum(CASE WHEN regions > 1 THEN 1 ELSE 0 END) AS reassigned "
        f"FROM ({ranked}) AS ranked WHERE rk = 1 GROUP BY region, size"
    )
    if report is not None:
        report["units_reassigned"] = int(np.asarray(result["reassigned"], dtype=np.int64).sum())
    return {
        "region": np.asarray(result["region"], dtype=object),
        **{k: np.asarray(result[k], dtype=np.int64) for k in ("size", "count", "persons")},
    }


def _text_units(table: Table, unit: str, region: str, source: str = "src") -> str:
    d = table.dialect
    u, r = d.ident(unit), d.ident(region)
    return (
        f"(SELECT {u} AS unit, min({d.text(r)}) AS region, max({d.text(r)}) AS region2, "
        f"count(*) AS size FROM {source} GROUP BY {u}) AS units"
    )


def _raise_spread(
    table: Table, unit: str, region: str, units: int, show_values: bool, source: str = "src"
) -> None:
    """The error for ``units`` units in several leaf regions (one named with ``show_values``)."""
    example = " (ids not shown: they are private; show_values=True or --show-values names one)"
    if show_values:
        plain = (*table.dialect.numeric_types, "VARCHAR", "STRING", "TEXT")
        kind = str(table.columns.get(unit, "")).split("(")[0].upper()
        shown = "unit" if kind in plain else table.dialect.text("unit")  # no Python conversion
        bad = table.rows(
            f"SELECT {shown}, region, region2 FROM {_text_units(table, unit, region, source)} "
            "WHERE region <> region2 LIMIT 1"
        )[0]
        example = f", e.g. unit {bad[0]!r} in {bad[1]!r} and {bad[2]!r}"
    raise DataError(
        f"{units:,} units (column {unit!r}) span several leaf regions of column "
        f"{region!r}{example}; each group must lie in exactly one leaf region: fix the data, or "
        "give each such unit one region with --region-of-unit first|most "
        "(region_of_unit='first' or 'most')"
    )


def _group_size_counts_by_text(
    table: Table, unit: str, region: str, show_values: bool, source: str = "src"
) -> dict[str, NDArray[Any]]:
    """:func:`group_size_counts` comparing the region texts themselves (``min``/``max`` of text
    per unit): exact whatever the hashes, and slow on Spark (three full scans, two sorting)."""
    units = _text_units(table, unit, region, source)
    rows = table.rows(f"SELECT count(*) FROM {units} WHERE region <> region2")
    if int(rows[0][0]):
        _raise_spread(table, unit, region, int(rows[0][0]), show_values, source)
    result = table.arrays(
        "SELECT region, size, count(*) AS count, sum(size) AS persons "
        f"FROM {units} GROUP BY region, size"
    )
    return {
        "region": np.asarray(result["region"], dtype=object),
        **{k: np.asarray(result[k], dtype=np.int64) for k in ("size", "count", "persons")},
    }


def bounded_rows_sql(
    dialect: Dialect,
    columns: Sequence[str],
    unit: str,
    cells: Sequence[str],
    bound: ContributionBound,
    details: Sequence[str] = (),
) -> str:
    """SQL of the rows of ``src`` (its ``columns``) that remain when each unit keeps at most
    ``bound.max_rows`` of them, a uniformly random choice computed alike on every engine.

    ``cells`` are SQL expressions over ``src`` naming the cell a row falls in (its bin codes,
    clipped as they will be counted); ``details`` are further expressions that tell rows of one
    cell apart for some count (the raw code of a clipped value, a measure). Rows of one unit
    equal in cells and details are interchangeable for every count made of them, so the choice
    depends only on these values, never on the order of the rows: the k-th such row (k = 1, 2,
    ...) is keyed by ``md5(key|unit|cells|details|k)``. With ``max_rows_per_cell`` R a unit keeps
    the R rows of smallest keys in each cell; with ``max_cells`` C, its C cells of smallest
    ``md5(key|cell|unit|cells)`` (a uniformly random choice of its distinct cells); then the K
    rows of smallest keys among those left: a uniformly random subset of its rows. The keys use
    only values both engines render alike (the key, the unit id's text, integer codes).

    The choice need not be secret: the bounds hold for any choice, and a unit's choice depends on
    that unit's rows only (so removing one unit changes no other unit's rows).
    """
    d = dialect
    cell = [f"dpcube_c{i}" for i in range(len(cells))]
    detail = [f"dpcube_d{i}" for i in range(len(details))]
    listed = ", ".join(cell)
    identity = ", ".join(cell + detail)
    text = [d.text("dpcube_unit")] + [d.text(c) for c in cell]
    coded = (
        f"SELECT *, {unit} AS dpcube_unit, "
        + ", ".join(
            f"{e} AS {c}" for e, c in zip([*cells, *details], [*cell, *detail], strict=True)
        )
        + " FROM src"
    )
    numbered = (
        f"SELECT *, row_number() OVER (PARTITION BY dpcube_unit, {identity} ORDER BY "
        f"{identity}) AS dpcube_k FROM ({coded}) AS coded"
    )
    parts = ", ".join(
        [d.literal(bound.key), *text, *(d.text(c) for c in detail), d.text("dpcube_k")]
    )
    keyed = f"SELECT *, md5(concat_ws('|', {parts})) AS dpcube_key FROM ({numbered}) AS numbered"
    windows: list[str] = []
    keep: list[str] = []
    if bound.max_rows_per_cell is not None:
        windows.append(
            f"row_number() OVER (PARTITION BY dpcube_unit, {listed} ORDER BY dpcube_key, "
            f"{identity}) AS dpcube_in_cell"
        )
        keep.append(f"dpcube_in_cell <= {int(bound.max_rows_per_cell)}")
    if bound.max_cells is not None:
        cell_key = f"md5(concat_ws('|', {', '.join([d.literal(bound.key + '|cell'), *text])}))"
        windows.append(
            f"dense_rank() OVER (PARTITION BY dpcube_unit ORDER BY {cell_key}, {listed}) "
            "AS dpcube_cell_rank"
        )
        keep.append(f"dpcube_cell_rank <= {int(bound.max_cells)}")
    if windows:
        keyed = (
            f"SELECT * FROM (SELECT *, {', '.join(windows)} FROM ({keyed}) AS keyed) AS celled "
            f"WHERE {' AND '.join(keep)}"
        )
    ranked = (
        "SELECT *, row_number() OVER (PARTITION BY dpcube_unit ORDER BY dpcube_key, "
        f"{identity}) AS dpcube_rank FROM ({keyed}) AS keyed"
    )
    out = ", ".join(d.ident(c) for c in columns)
    return f"SELECT {out} FROM ({ranked}) AS ranked WHERE dpcube_rank <= {int(bound.max_rows)}"


_FROM_SRC = re.compile(r"\bFROM src\b")


class BoundedTable:
    """A :class:`~dpcube.engine.sql.Table` whose ``src`` is another table's rows after the
    contribution bound (:func:`bounded_rows_sql`): every query runs over the bounded rows, as a
    common table expression of the same statement (the engine plans it with the counting)."""

    def __init__(self, table: Table, rows_sql: str) -> None:
        self.inner = table
        self.dialect = table.dialect
        self.rows_sql = rows_sql

    @property
    def columns(self) -> dict[str, str]:
        return self.inner.columns

    def _query(self, query: str) -> str:
        body = _FROM_SRC.sub("FROM dpcube_bounded", query)
        head = f"WITH dpcube_bounded AS ({self.rows_sql})"
        if body.lstrip().upper().startswith("WITH "):
            return f"{head}, {body.lstrip()[5:]}"
        return f"{head} {body}"

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        return self.inner.rows(self._query(query))

    def arrays(self, query: str) -> dict[str, NDArray[Any]]:
        return self.inner.arrays(self._query(query))


def bound_units(
    table: Table,
    schema: Schema,
    bound: ContributionBound,
    on_out_of_domain: str = "error",
    extra_cells: Sequence[str] = (),
) -> tuple[Table, dict[str, Any]]:
    """``table`` with each unit's rows bounded (:class:`BoundedTable`), and the curator's report
    of the bounding (exact: never published): ``rows_before_bounding`` and ``units``.

    The cells are the schema's bin codes, clipped to the edge bins under ``"clip"`` (so that the
    per-cell bound holds after clipping), and ``extra_cells`` (a measure). A NULL unit id is
    refused: it would merge unrelated rows into one unit.
    """
    if bound.column not in table.columns:
        raise DataError(
            f"privacy unit column {bound.column!r} is not in the data (columns: "
            f"{', '.join(table.columns)}); pass the column that identifies the unit "
            "(--privacy-unit COLUMN)"
        )
    uid = table.dialect.ident(bound.column)
    rows, with_id, units = (
        int(x)
        for x in table.rows(f"SELECT count(*), count({uid}), count(DISTINCT {uid}) FROM src")[0]
    )
    if with_id < rows:
        raise DataError(
            f"privacy unit column {bound.column!r} has {rows - with_id:,} NULL ids; a NULL would "
            "merge unrelated rows into one unit: drop those rows or give each its own id"
        )
    cells: list[str] = []
    details: list[str] = []
    for i, expr in enumerate(_codes(table, schema)):
        attr = schema[schema.axes[i][0]]
        if on_out_of_domain == "clip" and not isinstance(attr, Nominal):
            top = schema.shape[i] - 1
            details.append(expr)  # the raw code: the report counts the clipped rows
            expr = (
                f"(CASE WHEN ({expr}) = {BELOW} THEN 0 WHEN ({expr}) = {ABOVE} THEN {top} "
                f"ELSE ({expr}) END)"
            )
        cells.append(expr)
    details.extend(extra_cells)
    if not cells:
        cells = ["0"]
    sql = bounded_rows_sql(table.dialect, list(table.columns), uid, cells, bound, details)
    return BoundedTable(table, sql), {"rows_before_bounding": rows, "units": units}


def bounding_report(
    before: dict[str, Any], bound: ContributionBound, rows_kept: int
) -> dict[str, Any]:
    """The curator's exact figures of a bounding (never in a release): the bound, the units,
    the rows before and the rows dropped."""
    return {
        "contribution_bound": bound.max_rows,
        "units": before["units"],
        "rows_before_bounding": before["rows_before_bounding"],
        "rows_dropped_by_bound": before["rows_before_bounding"] - rows_kept,
    }


def unit_size_bins(
    table: Table, column: str, bits: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per bin ``b = 0..bits`` of ``floor(log2 n)`` (``n`` the rows of one unit of ``column``;
    the last bin holds every unit of at least ``2**bits`` rows): the units and their rows, each
    unit's counted up to ``2**(bits+1)``. Exact figures (the curator's; see
    :mod:`dpcube.privacy.unit_choice`), computed in the engine by two groupings, so that only
    ``2 (bits + 1)`` numbers leave it. A NULL unit id is refused."""
    if column not in table.columns:
        raise DataError(
            f"privacy unit column {column!r} is not in the data (columns: "
            f"{', '.join(table.columns)}); pass the column that identifies the unit "
            "(--privacy-unit COLUMN)"
        )
    uid = table.dialect.ident(column)
    nulls = int(table.rows(f"SELECT count(*) - count({uid}) FROM src")[0][0])
    if nulls:
        raise DataError(
            f"privacy unit column {column!r} has {nulls:,} NULL ids; a NULL would merge "
            "unrelated rows into one unit: drop those rows or give each its own id"
        )
    cap = 2 ** (bits + 1)
    cases = " ".join(f"WHEN n < {2 ** (b + 1)} THEN {b}" for b in range(bits))
    binned = f"CASE {cases} ELSE {bits} END" if bits else "0"
    sized = f"SELECT count(*) AS n FROM src GROUP BY {uid}"
    query = (
        f"SELECT {binned} AS bin, count(*) AS units, sum(CASE WHEN n > {cap} THEN {cap} "
        f"ELSE n END) AS kept FROM ({sized}) AS sized GROUP BY {binned}"
    )
    counts = np.zeros(bits + 1, dtype=np.int64)
    rows = np.zeros(bits + 1, dtype=np.int64)
    for b, units, kept in table.rows(query):
        counts[int(b)] = int(units)
        rows[int(b)] = int(kept)
    return counts, rows
