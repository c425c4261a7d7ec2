"""True counts of the measured cuboids (exactly, at scale).

From a :class:`dpcube.Histogram` the base cuboid is in memory and every cuboid is a roll-up. From a
data source the cuboids are counted by the engine (DuckDB, or Spark: the same SQL) in one pass,
``GROUP BY GROUPING SETS`` over the bin codes of :func:`dpcube.engine.sql.axis_expressions`
(:func:`dpcube.engine.counting.cuboid_counts`), so only the measured cuboids are
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

from dpcube.engine import Engine, get_engine
from dpcube.engine.counting import ContributionBound, check_policy, cuboid_counts
from dpcube.histogram import Histogram
from dpcube.mechanisms.datacube.geometry import CubeGeometry
from dpcube.mechanisms.datacube.lattice import is_subset, rollup, shape
from dpcube.mechanisms.datacube.measures import SumMeasure


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
    show_values: bool = False,
    engine: str | Engine | None = None,
    bound: ContributionBound | None = None,
) -> tuple[dict[int, NDArray[np.int64]], dict[str, Any]]:
    """Count the cuboids ``masks`` of ``source`` with one GROUPING SETS query in ``engine``
    (:func:`dpcube.engine.counting.cuboid_counts`; DuckDB, or Spark for a Spark DataFrame).

    With ``weight`` each cell holds the sum of the rows' measure values (rounded to integers and
    clipped to the measure's bounds, Ding et al., SIGMOD 2011, Sec. 7.3) instead of their number; a
    row whose measure is NULL is refused (``on_out_of_domain="error"``) or dropped from every
    cuboid. Rows the policy does not cover raise :func:`dpcube.engine.sql.out_of_domain_error`
    (every cause counted; offending values only with ``show_values``).

    With ``bound`` each privacy unit keeps at most K rows first (in the engine,
    :func:`dpcube.engine.counting.bound_units`).

    Returns the cuboids (lattice layout) and the data report of :func:`dpcube.engine.base.policy_report`.
    """
    check_policy(on_out_of_domain)
    lat = geo.lattice
    unique = sorted(set(masks))
    sets = {mask: tuple(geo.schema_axes(mask)) for mask in unique}
    with get_engine(engine, source).open(source) as table:
        cuboids, report = cuboid_counts(
            table, geo.schema, list(sets.values()), on_out_of_domain, weight, show_values, bound
        )
    out: dict[int, NDArray[np.int64]] = {}
    for mask, axes in sets.items():
        # cuboid_counts lays each cuboid out in ascending axis order
        cuboid = np.transpose(cuboids[tuple(sorted(axes))], np.argsort(np.argsort(axes)))
        out[mask] = cuboid.reshape(shape(lat, mask))
    return out, report
