"""A census-like synthetic stand-in for the US Census data of Fioretto et al. (AI 2021, Sec. 11),
which is not public: the project's own, seeded generator.

52 states and 3,144 counties; county household totals heavy-tailed (log-normal); household-size
shares (0.27, 0.33, 0.16, 0.13, 0.06, 0.03, 0.01, ...) continued by a geometric tail with the
ratio rho = n_7 / n_6 up to k; plus sparse outliers (a few per state, sizes uniform
in [8, k]). At ``scale=1`` about 117.6M groups and ~305M persons. Results on it are labelled
"synthetic stand-in". The person-level form is produced inside DuckDB (:func:`persons_sql`), so
the persons never reach Python.

>>> t = census_table(scale=1e-4, max_size=20, seed=1)
>>> t.hierarchy.level_sizes, t.max_size
((1, 52, 3144), 20)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.table import GroupSizeTable

STATES, COUNTIES, GROUPS = 52, 3144, 117_630_445
SHARES = (0.27, 0.33, 0.16, 0.13, 0.06, 0.03, 0.01)


def census_hierarchy(seed: int = 0) -> RegionHierarchy:
    """Nation -> 52 states -> 3,144 counties (state sizes uneven, as in the US)."""
    rng = np.random.default_rng(seed)
    weights = rng.lognormal(0, 0.8, STATES)
    per_state = 1 + np.floor(weights / weights.sum() * (COUNTIES - STATES)).astype(int)
    per_state[np.argmax(per_state)] += COUNTIES - per_state.sum()
    parents: dict[str, str | None] = {"US": None}
    c = 0
    for s, n in enumerate(per_state):
        parents[f"S{s:02d}"] = "US"
        for _ in range(n):
            parents[f"S{s:02d}C{c:04d}"] = f"S{s:02d}"
            c += 1
    return RegionHierarchy.from_parents(parents)


def size_shares(max_size: int) -> NDArray[np.float64]:
    """Shares of sizes 1..k: the fixed head, then n_{s+1} = rho n_s with rho = n_7 / n_6."""
    head = np.array(SHARES[:max_size], dtype=np.float64)
    rho = SHARES[6] / SHARES[5]
    tail = SHARES[6] * rho ** np.arange(1, max(0, max_size - len(head)) + 1)
    p = np.concatenate([head, tail])[:max_size]
    return p / p.sum()


def census_table(
    scale: float = 1.0, max_size: int = 1000, seed: int = 0, outliers_per_state: int = 3
) -> GroupSizeTable:
    """The group-size table of the synthetic census (multinomial per county)."""
    rng = np.random.default_rng(seed)
    h = census_hierarchy(seed)
    pop = rng.lognormal(0, 1.3, COUNTIES)
    totals = rng.multinomial(max(1, round(GROUPS * scale)), pop / pop.sum())
    p = size_shares(max_size)
    leaf = np.stack([rng.multinomial(n, p) for n in totals]).astype(np.int64)
    if max_size > 8 and outliers_per_state:
        state_of = h.parent[h.leaves] - h.level_start[1]
        for s in range(STATES):
            counties = np.flatnonzero(state_of == s)
            for c in rng.choice(counties, size=outliers_per_state):
                leaf[c, rng.integers(8, max_size + 1) - 1] += 1
    # Synthetic: its G is a parameter of the generator, public by construction.
    return GroupSizeTable(h, h.aggregate(leaf)).declare_public_groups(
        declared_by="generator", how="a synthetic table"
    )


def persons_sql(relation: str = "groups", chunk: int = 65536) -> str:
    """SQL expanding an (id, region, size, count) relation of leaf regions into one row per
    person with an integer unit id: DuckDB generates the rows; Python only holds the group-size table.

    The units of a row are generated ``chunk`` at a time with ``unnest(range(n))``, row by row.
    (A lateral join ``FROM groups, range(count)`` is decorrelated by DuckDB into a join with
    ``range`` over every distinct count, materialised whole: 6-7 GB resident at scale 1 before
    the first person was written.)

    >>> import duckdb
    >>> con = duckdb.connect()
    >>> _ = con.execute("CREATE TABLE groups AS SELECT 1 AS id, 'r' AS region, 3 AS size, 5 AS count")
    >>> con.sql(f"SELECT count(*), count(DISTINCT unit) FROM ({persons_sql(chunk=2)})").fetchall()
    [(15, 5)]
    """
    chunks = (
        f"SELECT id, region, size, c.start, least(count - c.start, {int(chunk)}) AS n "
        f"FROM {relation}, range(0, count, {int(chunk)}) AS c(start)"
    )
    units = (
        f"SELECT id * 4294967296 + start + unnest(range(n)) AS unit, region, size FROM ({chunks})"
    )
    return (
        f"SELECT unit, region FROM (SELECT unit, region, unnest(range(size)) AS p FROM ({units}))"
    )


def leaf_groups(table: GroupSizeTable) -> Any:
    """The (region, size, count) rows of the leaf regions with groups: the input of
    :func:`persons_sql` (a pandas DataFrame).

    >>> leaf_groups(census_table(scale=1e-5, max_size=3, seed=0)).columns.tolist()
    ['region', 'size', 'count']
    """
    import pandas as pd

    h = table.hierarchy
    leaf = table.counts[h.leaves]
    r, s = np.nonzero(leaf)
    return pd.DataFrame(
        {
            "region": np.asarray(h.names[h.leaves], dtype=object)[r],
            "size": s + 1,
            "count": leaf[r, s],
        }
    )


def regroup_through_duckdb(table: GroupSizeTable, threads: int | None = None) -> GroupSizeTable:
    """Rebuild ``table`` from its persons, generated and grouped inside DuckDB.

    The leaf (region, size, count) rows go to DuckDB; :func:`persons_sql` expands them into
    persons; :func:`dpcube.group_sizes` groups by unit and then by (region, size). At full scale
    (~300M persons) the persons exist only inside DuckDB (which spills to disk as needed).

    >>> t = census_table(scale=2e-5, max_size=12, seed=3)
    >>> bool((regroup_through_duckdb(t).counts == t.counts).all())
    True
    """
    import duckdb

    from dpcube.engine.duckdb_engine import SQL
    from dpcube.mechanisms.census.table import group_sizes

    h = table.hierarchy
    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    con.register("groups_frame", leaf_groups(table))
    con.execute("CREATE TABLE groups AS SELECT row_number() OVER () AS id, * FROM groups_frame")
    parents = {n: (None if p < 0 else h.names[p]) for n, p in zip(h.names, h.parent, strict=True)}
    return group_sizes(
        SQL(persons_sql(), con),
        unit="unit",
        region="region",
        hierarchy=parents,
        max_size=table.max_size,
        public_groups=table.groups,
    )
