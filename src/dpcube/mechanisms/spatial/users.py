"""User-level contribution bounding in the engine (issue part 4).

Location data sets hold many points per user. :func:`bound_contributions` keeps at most
``max_points`` points of every user, a uniformly random subset chosen inside the engine (DuckDB or
Spark) by a seeded hash rule that both engines compute alike
(:func:`dpcube.engine.counting.user_sample_sql`: the k-th point of a user in a cell is keyed by
``md5(seed|user|cell|k)`` and each user keeps the smallest keys), before the ordinary binning and
counting. Adding or removing one user then changes the histogram by at most ``max_points``
points, so a spatial mechanism built with ``user_bound=max_points`` (which divides every internal
budget by it: group privacy) is epsilon-DP for users. The choice of points need not be secret: the
bound holds for any choice, and the choice of each user depends on that user's rows only.

The histogram's report records ``contribution_bound`` (c), ``users`` and ``points_dropped``.
"""

from __future__ import annotations

import secrets
from typing import Any

from dpcube.engine import Engine, get_engine
from dpcube.engine.base import OutOfDomainPolicy
from dpcube.engine.counting import bounded_counts
from dpcube.engine.sql import schema_column_kinds
from dpcube.histogram import Histogram, data_set_identity
from dpcube.schema import Schema


def bound_contributions(
    source: Any,
    schema: Schema,
    user_column: str,
    max_points: int,
    *,
    on_out_of_domain: OutOfDomainPolicy = "error",
    seed: int | float | str | None = None,
    dataset: str | None = None,
    show_values: bool = False,
    engine: str | Engine | None = None,
) -> Histogram:
    """The histogram of ``source`` with at most ``max_points`` points per value of ``user_column``.

    ``seed`` (any number or text) makes the choice of points reproducible, and the same on DuckDB
    and Spark (tests); by default it is a fresh random 128-bit value. A NULL user id is refused (it
    would merge unrelated people into one user). ``dataset`` names the data set for its budget
    ledger (default: the fingerprint of ``source``). ``show_values`` puts the commonest
    out-of-domain values (private data) in the error message. ``engine``: ``"duckdb"`` or
    ``"spark"`` (default: Spark for a Spark DataFrame, else DuckDB).
    """
    key = secrets.token_hex(16) if seed is None else str(seed)
    with get_engine(engine, source).open(source, *schema_column_kinds(schema)) as table:
        counts, report = bounded_counts(
            table, schema, user_column, max_points, key, on_out_of_domain, show_values
        )
    return Histogram(schema, counts, report, dataset=data_set_identity(source, dataset))
