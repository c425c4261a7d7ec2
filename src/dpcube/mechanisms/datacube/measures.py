"""Measures other than the count (Ding, Winslett, Han, Li, SIGMOD 2011, Sec. 7.3): sums of a clipped
numeric column, and averages.

**Sum.** Each record carries a value v, rounded to an integer and clipped to ``[low, high]``; a
cell of a cuboid holds the sum of its records' values. Adding or removing one record changes one
cell of each cuboid by ``|v| <= Delta = max(|low|, |high|)``, so s measured cuboids have L1
sensitivity ``s * Delta`` (``2 s Delta`` under ``replace``: one cell loses v, another gains v'),
the count's sensitivity times Delta; the noise is the discrete Laplace of scale ``s Delta / eps``
and every variance is the count's times about Delta^2. Selection, aggregation and consistency are
unchanged (they read only the noisy cells).

**Average.** Publish a sum cube and a count cube of the same cuboids (two releases, each charged:
split the budget, e.g. eps/2 each; the paper leaves the split open); a cell's average is the noisy
sum over the noisy count, post-processing of the two. :func:`average_cuboid` gives it with a
first-order (delta-method) variance, an approximation that is only meaningful where the count is
large against its noise; cells whose noisy count is below 1 are NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import BudgetError, QueryError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from dpcube.mechanisms.datacube.release import CuboidRelease

MEASURES = ("count", "sum")


@dataclass(frozen=True)
class SumMeasure:
    """The measure column and its clipping bounds (integers, ``low <= high``).

    >>> SumMeasure("income", -10, 250).delta
    250
    """

    column: str
    low: int
    high: int

    def __post_init__(self) -> None:
        if not self.column or not isinstance(self.column, str):
            raise BudgetError("measure='sum' needs value=COLUMN, the numeric column to sum")
        for name, x in (("low", self.low), ("high", self.high)):
            if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
                raise BudgetError(f"bounds: {name} must be a finite integer, got {x!r}")
            if int(x) != x:
                raise BudgetError(
                    f"bounds: {name} = {x!r} is not a whole number; values are rounded to "
                    "integers, so give integer bounds (rescale the column for finer units)"
                )
        if self.low > self.high:
            raise BudgetError(f"bounds: low {self.low} is above high {self.high}")
        if self.delta == 0:
            raise BudgetError("bounds [0, 0] sum to nothing; widen them")
        object.__setattr__(self, "low", int(self.low))
        object.__setattr__(self, "high", int(self.high))

    @property
    def delta(self) -> int:
        """The most one record can change one cell: ``max(|low|, |high|)``."""
        return max(abs(self.low), abs(self.high))

    @classmethod
    def build(
        cls, measure: str, value: str | None, bounds: Sequence[Any] | None
    ) -> SumMeasure | None:
        """``None`` for the count; a :class:`SumMeasure` for ``measure="sum"`` (validated)."""
        if measure not in MEASURES:
            raise BudgetError(f"measure must be one of {', '.join(MEASURES)}, got {measure!r}")
        if measure == "count":
            if value is not None or bounds is not None:
                raise BudgetError("value= and bounds= apply to measure='sum' only")
            return None
        if value is None or bounds is None:
            raise BudgetError(
                "measure='sum' needs value=COLUMN and bounds=[low, high] (the clipping range; "
                "the sensitivity is max(|low|, |high|) per cuboid)"
            )
        if isinstance(bounds, str) or len(bounds) != 2:
            raise BudgetError(f"bounds must be [low, high], got {bounds!r}")
        return cls(str(value), bounds[0], bounds[1])


@dataclass(frozen=True)
class AverageCuboid:
    """A cuboid of averages: ``values[i] = sums[i] / counts[i]`` with approximate variances."""

    attributes: tuple[str, ...]
    values: NDArray[np.float64]
    variance: NDArray[np.float64]
    #: the published cuboids the sum and the count were taken from
    computed_from: tuple[tuple[str, ...], tuple[str, ...]]


def ratio_variance(
    s: NDArray[np.float64], c: NDArray[np.float64], var_s: float, var_c: float
) -> NDArray[np.float64]:
    """First-order variance of S/C for independent S and C: ``Var S / C^2 + S^2 Var C / C^4``.

    >>> ratio_variance(np.array([100.0]), np.array([10.0]), 4.0, 1.0).tolist()
    [1.04]
    """
    return np.asarray(var_s / c**2 + s**2 * var_c / c**4, dtype=np.float64)


def average_cuboid(
    sums: CuboidRelease, counts: CuboidRelease, attributes: Sequence[str] | str
) -> AverageCuboid:
    """Averages of a measure per cell of a cuboid, from a sum release and a count release (Sec.
    7.3). Both must be DataCube releases of the same schema, the first with ``measure="sum"``
    and the second a count, of the same rows (a row with a NULL measure that the sum drops but
    the count keeps biases the average: drop such rows from the data for both); the cuboid may
    be derived (:meth:`CuboidRelease.derive_cuboid`).
    """
    meta_s = sums.metadata.params.get("measure", "count")
    meta_c = counts.metadata.params.get("measure", "count")
    if meta_s != "sum" or meta_c != "count":
        raise QueryError(
            "average_cuboid(sums, counts, ...) needs a measure='sum' release first and a count "
            f"release second; got {meta_s!r} and {meta_c!r}"
        )
    if sums.schema is None or counts.schema is None or sums.schema != counts.schema:
        raise QueryError("the sum and the count releases must share their schema")
    s = sums.derive_cuboid(attributes)
    c = counts.derive_cuboid(attributes)
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = c.values >= 1
        values = np.where(ok, s.values / np.where(ok, c.values, 1.0), np.nan)
        variance = np.where(
            ok,
            ratio_variance(s.values, np.where(ok, c.values, 1.0), s.cell_variance, c.cell_variance),
            np.nan,
        )
    return AverageCuboid(s.attributes, values, variance, (s.computed_from, c.computed_from))


__all__ = ["MEASURES", "AverageCuboid", "SumMeasure", "average_cuboid", "ratio_variance"]
