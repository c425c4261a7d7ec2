"""User-level contribution bounding in the engine (issue part 4).

Location data sets hold many points per user. :func:`bound_contributions` keeps at most
``max_points`` points of every user, chosen uniformly at random in DuckDB
(``row_number()`` over each user's points ordered by ``random()``), before the ordinary binning and
counting of :class:`dpcube.engine.duckdb_engine.DuckDBEngine`. Adding or removing one user then
changes the histogram by at most ``max_points`` points, so a spatial mechanism built with
``user_bound=max_points`` (which divides every internal budget by it: group privacy) is
epsilon-DP for users. The choice of points need not be secret: the bound holds for any choice.

The histogram's report records ``contribution_bound`` (c), ``users`` and ``points_dropped``.
"""

from __future__ import annotations

from typing import Any

from dpcube.engine.base import OutOfDomainPolicy
from dpcube.engine.duckdb_engine import DuckDBEngine, open_source
from dpcube.errors import DataError
from dpcube.histogram import Histogram, data_set_identity
from dpcube.schema import Schema


def bound_contributions(
    source: Any,
    schema: Schema,
    user_column: str,
    max_points: int,
    *,
    on_out_of_domain: OutOfDomainPolicy = "error",
    seed: float | None = None,
    dataset: str | None = None,
    show_values: bool = False,
) -> Histogram:
    """The histogram of ``source`` with at most ``max_points`` points per value of ``user_column``.

    ``seed`` (in [-1, 1]) makes DuckDB's choice of points reproducible (tests); by default it is
    seeded by DuckDB. A NULL user id is refused (it would merge unrelated people into one user).
    ``dataset`` names the data set for its budget ledger (default: the fingerprint of ``source``).
    ``show_values`` puts the commonest out-of-domain values (private data) in the error message.
    """
    if isinstance(max_points, bool) or int(max_points) != max_points or int(max_points) < 1:
        raise DataError(f"max_points must be a positive integer, got {max_points!r}")
    c = int(max_points)
    with open_source(source) as view:
        if user_column not in view.columns:
            raise DataError(
                f"user column {user_column!r} is not in the data (columns: {', '.join(view.columns)}); "
                "pass the column that identifies users"
            )
        uid = '"' + user_column.replace('"', '""') + '"'
        row = view.sql(f"SELECT count(*), count({uid}), count(DISTINCT {uid}) FROM src").fetchall()[
            0
        ]
        assert row is not None
        rows, with_id, users = (int(x) for x in row)
        if with_id < rows:
            raise DataError(
                f"column {user_column!r} has {rows - with_id} NULL user ids; drop those rows or give them ids"
            )
        if seed is not None:
            view.con.execute("SET threads = 1").fetchall()
            view.con.execute(f"SELECT setseed({float(seed)!r})").fetchall()
        bounded = view.sql(
            "SELECT * EXCLUDE (dpcube_key, dpcube_rank) FROM (SELECT *, row_number() OVER "
            f"(PARTITION BY {uid} ORDER BY dpcube_key) AS dpcube_rank FROM "
            f"(SELECT *, random() AS dpcube_key FROM src)) WHERE dpcube_rank <= {c}"
        )
        counts, report = DuckDBEngine().histogram(
            bounded, schema, on_out_of_domain=on_out_of_domain, show_values=show_values
        )
    report.update(
        contribution_bound=c,
        users=users,
        rows_before_bounding=rows,
        points_dropped=rows - int(report["rows"]),
    )
    return Histogram(schema, counts, report, dataset=data_set_identity(source, dataset))
