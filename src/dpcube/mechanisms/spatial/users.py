"""User-level contribution bounding for location data: the privacy unit of the spatial mechanisms.

Location data sets hold many points per user. :func:`bound_contributions` is
:func:`dpcube.histogram` with ``privacy_unit=user_column, max_rows_per_unit=max_points``: each
user keeps at most ``max_points`` points, a uniformly random subset chosen inside the engine
(DuckDB or Spark) by the keyed hash of :func:`dpcube.engine.counting.bounded_rows_sql`, before the
ordinary binning and counting. Adding or removing one user then changes the histogram by at most
``max_points`` points, so a spatial mechanism releasing it divides every internal budget by
``max_points`` (group privacy) and is epsilon-DP for users. The choice of points need not be
secret: the bound holds for any choice, and the choice of each user depends on that user's rows
only.

The histogram's report (the curator's log, never a release) records ``contribution_bound``,
``units`` and ``rows_dropped_by_bound``.
"""

from __future__ import annotations

from typing import Any

from dpcube.engine import Engine
from dpcube.engine.base import OutOfDomainPolicy
from dpcube.histogram import Histogram, histogram
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
    """The histogram of ``source`` with at most ``max_points`` points per value of ``user_column``
    (:func:`dpcube.histogram` with ``privacy_unit=user_column, max_rows_per_unit=max_points``).

    ``seed`` (any number or text) makes the choice of points reproducible, and the same on DuckDB
    and Spark (tests); by default it is a fresh random 128-bit value. A NULL user id is refused (it
    would merge unrelated people into one user). ``dataset`` names the data set for its budget
    ledger (default: the fingerprint of ``source``). ``show_values`` puts the commonest
    out-of-domain values (private data) in the error message. ``engine``: ``"duckdb"`` or
    ``"spark"`` (default: Spark for a Spark DataFrame, else DuckDB).
    """
    return histogram(
        source,
        schema,
        on_out_of_domain=on_out_of_domain,
        engine=engine,
        dataset=dataset,
        show_values=show_values,
        privacy_unit=user_column,
        max_rows_per_unit=max_points,
        bounding_seed=seed,
    )
