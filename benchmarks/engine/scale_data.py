"""Synthetic data on disk for the scale benchmark, written by DuckDB.

Two Parquet tables, generated inside DuckDB (``COPY (SELECT ... FROM range(H)) TO ...``) so no row
is ever a Python object:

* ``persons_<N>.parquet``: a person table of exactly N rows. Households ``h = 0, 1, ...`` get a
  size from the census household-size shares (:func:`experiments.census_generator.size_shares`,
  sizes 1..16) and a county of the synthetic census hierarchy (3,144 counties, skewed towards low
  county numbers: ``floor(3144 * u^2.5)``); each household expands to its persons, stored
  household by household (as a census file is). Every value is a deterministic function of
  ``hash(h, p, column)`` (DuckDB's hash): age (heads 18..90, others 0..90), sex F/M, race (6
  categories, unequal shares), income in dollars (0 under 16, else log-uniform 1k..400k), county
  name, state name, and lat/lon (the county's centre plus up to 0.25 degrees of jitter).
* ``census_persons_<scale>.parquet``: the persons of the synthetic census group-size table
  (:func:`experiments.census_generator.census_table`, 298.3M persons at scale 1), one row
  per person with its unit id and leaf region, as :func:`~experiments.census_generator.persons_sql`
  generates them.

Both are written once and reused (the file name carries the size); writing is atomic (a temporary
name, then a rename).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from dpcube.schema import Schema

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # experiments/ beside src/
from experiments.census_generator import (
    census_hierarchy,
    census_table,
    leaf_groups,
    persons_sql,
    size_shares,
)

#: Household sizes 1..MAX_HOUSEHOLD (the census shares continued geometrically).
MAX_HOUSEHOLD = 16
RACES = ("white", "black", "asian", "native", "pacific", "other")
RACE_SHARES = (0.60, 0.13, 0.06, 0.02, 0.01, 0.18)
#: Bins of the income attribute (dollars).
INCOME_EDGES = [0, 1, 10_000, 25_000, 50_000, 75_000, 100_000, 200_000, 400_001]


def counties() -> tuple[list[str], list[str]]:
    """Leaf (county) names of the synthetic census hierarchy and the state of each.

    >>> names, states = counties()
    >>> len(names), names[0], states[0], len(set(states))
    (3144, 'S00C0000', 'S00', 52)
    """
    h = census_hierarchy(0)
    names = [str(n) for n in np.asarray(h.names)[h.leaves]]
    return names, [n[:3] for n in names]


def _uniform(*key: object) -> str:
    """SQL for a deterministic uniform number in [0, 1) from ``hash(key...)``."""
    return f"(CAST(hash({', '.join(str(k) for k in key)}) % 1000000007 AS DOUBLE) / 1000000007)"


def _thresholds(column: str, shares: Any, values: list[str]) -> str:
    """SQL CASE mapping a uniform ``column`` to ``values`` with the given ``shares``."""
    cum = np.cumsum(np.asarray(shares, dtype=np.float64))
    whens = " ".join(
        f"WHEN {column} < {float(c)!r} THEN {v}" for c, v in zip(cum[:-1], values[:-1], strict=True)
    )
    return f"CASE {whens} ELSE {values[-1]} END"


def persons_query(rows: int) -> str:
    """The SELECT producing exactly ``rows`` persons (see the module docstring)."""
    shares = size_shares(MAX_HOUSEHOLD)
    mean_size = float((shares * np.arange(1, MAX_HOUSEHOLD + 1)).sum())
    households = int(rows / mean_size * 1.01) + 100
    names, states = counties()
    n = len(names)
    state_of = "[" + ", ".join(str(int(s[1:])) for s in states) + "]"
    size = _thresholds("us", shares, [str(s) for s in range(1, MAX_HOUSEHOLD + 1)])
    race = _thresholds("ur", RACE_SHARES, [f"'{r}'" for r in RACES])
    return f"""
    WITH hh AS (
        SELECT h, {size} AS size,
               CAST(floor({n} * pow(uc, 2.5)) AS INTEGER) AS c
        FROM (SELECT range AS h, {_uniform("range", 1)} AS us, {_uniform("range", 2)} AS uc
              FROM range({households}))
    ), p AS (
        SELECT h, c, p, {_uniform("h", "p", 3)} AS ua, {_uniform("h", "p", 4)} AS ux,
               {_uniform("h", "p", 5)} AS ur, {_uniform("h", "p", 6)} AS ui,
               {_uniform("h", "p", 7)} AS uy, {_uniform("h", "p", 8)} AS uz
        FROM hh, range(hh.size) AS t(p)
    ), q AS (
        SELECT *, CAST(CASE WHEN p = 0 THEN 18 + floor(ua * 73) ELSE floor(ua * 91) END AS SMALLINT) AS age,
               {state_of}[c + 1] AS s
        FROM p
    )
    SELECT CAST(h * 32 + p AS BIGINT) AS person_id,
           CAST(h AS BIGINT) AS household,
           CASE WHEN ux < 0.5 THEN 'F' ELSE 'M' END AS sex,
           age,
           {race} AS race,
           CAST(CASE WHEN age < 16 THEN 0 ELSE floor(1000 * pow(400, ui)) END AS INTEGER) AS income,
           'S' || lpad(CAST(s AS VARCHAR), 2, '0') AS state,
           'S' || lpad(CAST(s AS VARCHAR), 2, '0') || 'C' || lpad(CAST(c AS VARCHAR), 4, '0') AS county,
           25 + 24 * ((c * 0.6180339887) - floor(c * 0.6180339887)) + 0.5 * (uy - 0.5) AS lat,
           -124 + 57 * ((c * 0.7548776662) - floor(c * 0.7548776662)) + 0.5 * (uz - 0.5) AS lon
    FROM q
    LIMIT {int(rows)}
    """


def _connect(memory_limit: str, threads: int, work_dir: Path, ordered: bool = True) -> Any:
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute(f"SET threads = {int(threads)}")
    con.execute(f"SET temp_directory = '{work_dir / 'duckdb-tmp'}'")
    con.execute(f"SET preserve_insertion_order = {str(ordered).lower()}")
    con.execute("SET enable_progress_bar = false")
    return con


def _copy(con: Any, query: str, target: Path, row_group: int) -> None:
    tmp = target.with_name(target.name + ".partial")
    con.execute(
        f"COPY ({query}) TO '{tmp}' (FORMAT parquet, ROW_GROUP_SIZE {int(row_group)}, COMPRESSION snappy)"
    )
    os.replace(tmp, target)


def write_persons(
    work_dir: Path, rows: int, *, memory_limit: str = "4GB", threads: int = 2
) -> Path:
    """``work_dir/persons_<rows>.parquet`` (written once; reused when present)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    target = work_dir / f"persons_{int(rows)}.parquet"
    if not target.exists():
        con = _connect(memory_limit, threads, work_dir)
        _copy(con, persons_query(rows), target, 1_000_000)
        con.close()
    return target


def write_census_persons(
    work_dir: Path,
    scale: float,
    max_size: int = 1000,
    *,
    memory_limit: str = "4GB",
    threads: int = 2,
) -> Path:
    """``work_dir/census_persons_<scale>.parquet``: the persons of ``census_table(scale, max_size,
    seed=0)`` (columns ``unit`` BIGINT, ``region`` VARCHAR)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    target = work_dir / f"census_persons_{scale:g}_{max_size}.parquet"
    if not target.exists():
        # Unordered: keeping the order of a lateral join that emits up to count x size rows per
        # input row made DuckDB buffer batches (7.6 GB resident at scale 1); without it each
        # thread still writes a unit's persons together, in its own 2,048-row chunks.
        con = _connect(memory_limit, threads, work_dir, ordered=False)
        con.register("groups_frame", leaf_groups(census_table(scale, max_size, seed=0)))
        con.execute("CREATE TABLE groups AS SELECT row_number() OVER () AS id, * FROM groups_frame")
        _copy(con, persons_sql(), target, 1_000_000)
        con.close()
    return target


def histogram_schema() -> Schema:
    """Histogram workload: age (5-year bins) x sex x race x state, 12,480 cells."""
    _, states = counties()
    return Schema.from_dict(
        {
            "attributes": [
                {"name": "age", "kind": "ordinal", "range": [0, 99], "width": 5},
                {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
                {"name": "race", "kind": "nominal", "categories": list(RACES)},
                {"name": "state", "kind": "nominal", "categories": sorted(set(states))},
            ]
        }
    )


def cube_schema() -> Schema:
    """Data-cube workload: age (10-year bins) x sex x race x income (8 bins), 960 base cells."""
    return Schema.from_dict(
        {
            "attributes": [
                {"name": "age", "kind": "ordinal", "range": [0, 99], "width": 10},
                {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
                {"name": "race", "kind": "nominal", "categories": list(RACES)},
                {"name": "income", "kind": "ordinal", "edges": INCOME_EDGES},
            ]
        }
    )
