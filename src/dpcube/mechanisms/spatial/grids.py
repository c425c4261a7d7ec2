"""The flat baselines HTF is compared with (Shaham et al., SIGSPATIAL 2021), each a
spatial mechanism that releases the counts of one partition of the grid:

- :class:`UniformGrid` (UG) and :class:`AdaptiveGrid` (AG) of Qardaji, Yang and Li (ICDE 2013);
- :class:`Uniform`: the noisy total spread over the grid; :class:`Singular`: noise on every cell.

All noise is discrete Laplace on integer counts. UG and AG need |D| to size their grids and spend
``eps_height`` on a noisy total.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import BudgetError
from dpcube.histogram import Histogram
from dpcube.mechanisms.base import SensitivityClaim
from dpcube.mechanisms.params import ParamSpec
from dpcube.mechanisms.spatial._common import (
    EPS_HEIGHT,
    SPATIAL_CASE_QUERIES,
    SpatialMechanism,
    cells_claim,
    grid_shape,
    noisy_count,
    spatial_case_schema,
    total_claim,
)
from dpcube.mechanisms.spatial.release import LeafRelease
from dpcube.mechanisms.spatial.tree import (
    rect_sums,
)
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace
from dpcube.release.base import ReleaseMetadata
from dpcube.release.cells import CellRelease, prefix_sums
from dpcube.release.variance import UniformCellVariance
from dpcube.schema import Schema

IntArray = NDArray[np.int64]


def grid_edges(n: int, m: int) -> IntArray:
    """``m`` (at most n) near-equal bins of ``range(n)``: round(linspace(0, n, m + 1)).

    >>> grid_edges(10, 3).tolist()
    [0, 3, 7, 10]
    """
    m = max(1, min(int(m), n))
    return np.rint(np.linspace(0, n, m + 1)).astype(np.int64)


def grid_count(x: float, cap: int) -> int:
    """``ceil(x)`` cells per axis, between 1 and ``cap`` (an axis length): a tiny constant ``c``
    makes ``sqrt(N eps / c)`` overflow, and no grid is finer than the domain's cells.

    >>> grid_count(3.2, 8), grid_count(float("inf"), 8), grid_count(-1.0, 8)
    (4, 8, 1)
    """
    return max(1, math.ceil(min(x, float(cap)))) if x == x else 1


def aligned_edges(n: int, m: float, minimum: int = 1) -> IntArray:
    """About ``m`` bins of ``range(n)`` that all hold the same number of domain cells.

    The data are already binned on an ``n``-cell axis, so a grid whose cells straddle uneven
    numbers of domain cells (207 bins over 256 cells: widths 1 and 2) adds uniformity error even
    without noise. The grid size is the divisor d of n nearest to m in ratio (capped
    at n, the domain's own resolution), each bin n/d cells wide; where no divisor lies within a
    factor 2 of m (n prime, say) the near-equal bins of :func:`grid_edges` are kept. Only
    divisors of at least ``minimum`` (capped at n) are considered (AG's m1 >= 10).

    >>> aligned_edges(256, 207).tolist() == list(range(257))
    True
    >>> aligned_edges(256, 100)[:3].tolist(), len(aligned_edges(256, 100)) - 1
    ([0, 2, 4], 128)
    >>> aligned_edges(12, 5).tolist()
    [0, 2, 4, 6, 8, 10, 12]
    >>> len(aligned_edges(64, 10, minimum=10)) - 1
    16
    >>> aligned_edges(13, 5).tolist()
    [0, 3, 5, 8, 10, 13]
    """
    target = min(max(float(m), float(minimum), 1.0), float(n))
    divisors = [d for d in range(min(max(minimum, 1), n), n + 1) if n % d == 0]
    best = min(divisors, key=lambda d: (abs(math.log(d / target)), -d))
    if max(best / target, target / best) > 2.0:
        return grid_edges(n, math.ceil(target))
    return np.arange(0, n + 1, n // best, dtype=np.int64)


def grid_rects(row_edges: IntArray, col_edges: IntArray, r0: int = 0, c0: int = 0) -> IntArray:
    """The rectangles of the grid with these edges, row-major.

    >>> grid_rects(np.array([0, 1, 3]), np.array([0, 2])).tolist()
    [[0, 1, 0, 2], [1, 3, 0, 2]]
    """
    rows = np.stack([row_edges[:-1], row_edges[1:]], axis=1) + r0
    cols = np.stack([col_edges[:-1], col_edges[1:]], axis=1) + c0
    rr = np.repeat(rows, len(cols), axis=0)
    cc = np.tile(cols, (len(rows), 1))
    return np.concatenate([rr, cc], axis=1)


class UniformGrid(SpatialMechanism):
    """UG (Qardaji et al. 2013): an m x m grid, m = ceil(sqrt(|D| eps / c)), c = 10.

    On an already-binned domain the formula's m is aligned to the domain (:func:`aligned_edges`:
    the nearest divisor of each axis, so every grid cell holds whole, equal blocks of domain
    cells); an explicit ``grid_size`` is used as given.

    |D| is a noisy count from ``eps_height`` of the budget unless ``grid_size`` fixes m (Qardaji,
    Yang, Li, ICDE 2013, use the exact |D|, a small leak; here it is paid for).
    """

    name = "ug"
    #: Peak memory of a release per cell: 31 bytes measured (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 48.0
    #: The grid depends on the data only through the noisy total: a bootstrap re-run cuts the
    #: same cells (``LeafRelease.reruns_keep_the_leaves``).
    reruns_keep_the_leaves = True

    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("c", "float", "the constant of m = ceil(sqrt(N eps / c))", low=0, low_open=True),
        ParamSpec(
            "grid_size",
            "int",
            "fix m, the cells per axis (capped at the axis length); null: from the noisy total",
            low=1,
            optional=True,
        ),
        EPS_HEIGHT,
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        neighbour: str = "add_remove",
        c: float = 10.0,
        grid_size: int | None = None,
        eps_height: float = 1e-4,
        user_bound: int = 1,
    ) -> None:
        super().__init__(epsilon, delta, neighbour, user_bound)
        self.c = float(c)
        self.grid_size = None if grid_size is None else int(grid_size)
        self.eps_height = float(eps_height)
        if self.grid_size is None and not 0 < self.eps_height < self.epsilon:
            raise BudgetError(
                f"eps_height must be in (0, epsilon={self.epsilon}), got {eps_height}"
            )

    def validate(self, data: Histogram) -> None:
        """The total's and the grid counts' shares of epsilon are representable."""
        if self.grid_size is None:
            self.check_share(f"eps_height={self.eps_height:g}", self.eps_height)
            self.check_share("epsilon - eps_height", self.epsilon - self.eps_height)

    def point_claims(self, schema: Schema) -> list[SensitivityClaim]:
        return [cells_claim("grid counts")] + ([total_claim()] if self.grid_size is None else [])

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        schema = spatial_case_schema(2, 3)
        queries = SPATIAL_CASE_QUERIES[:3]
        return [
            Case("ug-fixed", schema, lambda n: cls(1.0, neighbour=n, grid_size=3), queries),
            # The grid follows the noisy total and the budget per point: these queries align with
            # add/remove's 2 x 3 grid; under replace (half the budget per point) the grid is 1 x 1
            # on the tiny inputs and only the total is exact without noise.
            Case(
                "ug-auto",
                schema,
                lambda n: cls(1.0, neighbour=n),
                [{}, {"p": {"bins": [[0, 0], [0, 2]]}}, {"p": {"bins": [[0, 1], [2, 2]]}}],
                neighbours=("add_remove",),
            ),
            Case(
                "ug-auto-replace",
                schema,
                lambda n: cls(1.0, neighbour=n),
                [{}],
                neighbours=("replace",),
            ),
        ]

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> LeafRelease:
        rows, cols = grid_shape(data.schema)
        u = self.points_per_unit
        spent = 0.0 if self.grid_size is not None else self.eps_height
        eps = self.epsilon - spent
        if self.grid_size is not None:
            m = self.grid_size
        else:
            n_hat = noisy_count(data.total, self.eps_height / u, source)
            m = grid_count(math.sqrt(max(n_hat, 0) * eps / u / self.c), max(rows, cols))
        if self.grid_size is not None:
            redges, cedges = grid_edges(rows, m), grid_edges(cols, m)
        else:
            redges, cedges = aligned_edges(rows, m), aligned_edges(cols, m)
        rects = grid_rects(redges, cedges)
        counts, draw = add_discrete_laplace(
            rect_sums(prefix_sums(data.counts), rects), u / eps, source
        )
        metadata.noise = {
            "distribution": "discrete_laplace",
            "grid": [len(redges) - 1, len(cedges) - 1],
        }
        variances = np.full(len(rects), float(draw.variance))
        return LeafRelease(
            data.schema, metadata, rects, counts, variances, np.full(len(rects), self.epsilon)
        )


class AdaptiveGrid(SpatialMechanism):
    """AG (Qardaji et al. 2013): a coarse m1 x m1 grid, then each cell cut into m2 x m2.

    m1 = max(10, ceil(sqrt(|D| eps / c) / 4)) with ``alpha`` eps; a level-1 cell with noisy count
    N' gets m2 = ceil(sqrt(N' (1 - alpha) eps / c2)) (1 if N' <= 0) with the rest; constrained
    inference makes every level-1 cell equal to the sum of its level-2 cells (Qardaji, Yang, Li,
    ICDE 2013). Both
    levels' sizes are aligned to the domain's cells (:func:`aligned_edges`; m1 the nearest divisor
    of at least 10, 16 on a 256-cell axis where the formula gives 10).
    """

    name = "ag"
    #: Peak memory of a release per cell: 38 to 53 bytes measured (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 80.0
    #: The level-2 grids are sized from noisy counts of the fixed level-1 cells, whose totals the
    #: bootstrap world keeps: a re-run cuts nearly the same leaves
    #: (``LeafRelease.reruns_keep_the_leaves``).
    reruns_keep_the_leaves = True

    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "alpha",
            "float",
            "share of the budget spent on the level-1 grid",
            low=0,
            high=1,
            low_open=True,
            high_open=True,
        ),
        ParamSpec("c", "float", "the level-1 constant of m1", low=0, low_open=True),
        ParamSpec("c2", "float", "the level-2 constant of m2", low=0, low_open=True),
        EPS_HEIGHT,
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        neighbour: str = "add_remove",
        alpha: float = 0.5,
        c: float = 10.0,
        c2: float = 5.0,
        eps_height: float = 1e-4,
        user_bound: int = 1,
    ) -> None:
        super().__init__(epsilon, delta, neighbour, user_bound)
        self.alpha, self.c, self.c2 = float(alpha), float(c), float(c2)
        self.eps_height = float(eps_height)
        if not 0 < self.eps_height < self.epsilon:
            raise BudgetError(
                f"eps_height must be in (0, epsilon={self.epsilon}), got {eps_height}"
            )

    def validate(self, data: Histogram) -> None:
        """The total's and each level's shares of epsilon are representable."""
        rest = self.epsilon - self.eps_height
        self.check_share(f"eps_height={self.eps_height:g}", self.eps_height)
        self.check_share(f"alpha={self.alpha:g}", self.alpha * rest)
        self.check_share(f"1 - alpha={1 - self.alpha:g}", (1 - self.alpha) * rest)

    def point_claims(self, schema: Schema) -> list[SensitivityClaim]:
        return [
            total_claim(),
            cells_claim("level-1 counts (any tiling)"),
            cells_claim("level-2 counts (any tiling)"),
        ]

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        schema = spatial_case_schema(2, 3)
        queries = SPATIAL_CASE_QUERIES[:3]
        return [Case("ag", schema, lambda n: cls(1.0, neighbour=n), queries)]

    def level1_size(self, n_hat: float, eps: float, cap: int = 2**31) -> int:
        """m1 = max(10, ceil(sqrt(N eps / c) / 4)), at most ``cap`` (the longer axis, or 10).

        >>> AdaptiveGrid(0.1).level1_size(3_500_000, 0.1)
        47
        """
        return max(10, grid_count(math.sqrt(max(n_hat, 0) * eps / self.c) / 4, cap))

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> LeafRelease:
        rows, cols = grid_shape(data.schema)
        u = self.points_per_unit
        eps = self.epsilon - self.eps_height
        n_hat = noisy_count(data.total, self.eps_height / u, source)
        m1 = self.level1_size(n_hat / u, eps, max(rows, cols))
        prefix = prefix_sums(data.counts)
        redges, cedges = aligned_edges(rows, m1, 10), aligned_edges(cols, m1, 10)
        level1 = grid_rects(redges, cedges)
        e1, e2 = self.alpha * eps / u, (1 - self.alpha) * eps / u
        noisy1, draw1 = add_discrete_laplace(rect_sums(prefix, level1), 1.0 / e1, source)
        var1 = float(draw1.variance)
        sizes = [
            grid_count(math.sqrt(max(float(y), 0.0) * (1 - self.alpha) * eps / u / self.c2), n)
            for y, n in zip(
                noisy1,
                np.maximum(level1[:, 1] - level1[:, 0], level1[:, 3] - level1[:, 2]),
                strict=True,
            )
        ]
        cells = [
            grid_rects(
                aligned_edges(int(r1 - r0), m), aligned_edges(int(c1 - c0), m), int(r0), int(c0)
            )
            for (r0, r1, c0, c1), m in zip(level1, sizes, strict=True)
        ]
        owner = np.repeat(np.arange(len(level1)), [len(x) for x in cells])
        rects = np.concatenate(cells)
        noisy2, draw2 = add_discrete_laplace(rect_sums(prefix, rects), 1.0 / e2, source)
        var2 = float(draw2.variance)
        n2 = np.bincount(owner, minlength=len(level1)).astype(np.float64)
        total2 = np.bincount(owner, weights=noisy2.astype(np.float64), minlength=len(level1))
        combined = (noisy1 / var1 + total2 / (n2 * var2)) / (1 / var1 + 1 / (n2 * var2))
        values = noisy2 + ((combined - total2) / n2)[owner]
        metadata.noise = {
            "distribution": "discrete_laplace",
            "m1": [len(redges) - 1, len(cedges) - 1],
            "alpha": self.alpha,
            "leaves": len(rects),
        }
        return LeafRelease(
            data.schema,
            metadata,
            rects,
            values,
            None,
            np.full(len(rects), self.epsilon),
            raw_counts=noisy2,
            raw_variances=np.full(len(rects), var2),
        )


class Uniform(SpatialMechanism):
    """The noisy total spread evenly over the grid (Fig. 6's "Uniform")."""

    name = "uniform"
    #: Peak memory of a release per cell: under 1 byte measured (the input only; 24 for the count) (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 24.0

    def point_claims(self, schema: Schema) -> list[SensitivityClaim]:
        return [total_claim()]

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        return [Case("uniform", spatial_case_schema(2, 3), lambda n: cls(1.0, neighbour=n), [{}])]

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> LeafRelease:
        rows, cols = grid_shape(data.schema)
        counts, draw = add_discrete_laplace(
            np.array([data.total]), self.points_per_unit / self.epsilon, source
        )
        metadata.noise = {"distribution": "discrete_laplace", "scale": float(draw.scale)}
        rects = np.array([[0, rows, 0, cols]])
        return LeafRelease(
            data.schema,
            metadata,
            rects,
            counts,
            np.array([float(draw.variance)]),
            np.array([self.epsilon]),
        )


class Singular(SpatialMechanism):
    """Laplace noise on every cell of the frequency matrix (Fig. 6's "Singular")."""

    name = "singular"
    #: Peak memory of a release per cell: 32 bytes measured (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 48.0

    def point_claims(self, schema: Schema) -> list[SensitivityClaim]:
        return [cells_claim("cells")]

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        queries = [SPATIAL_CASE_QUERIES[i] for i in (0, 1, 3)]
        return [
            Case("singular", spatial_case_schema(2, 3), lambda n: cls(1.0, neighbour=n), queries)
        ]

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> CellRelease:
        counts, draw = add_discrete_laplace(
            data.counts, self.points_per_unit / self.epsilon, source
        )
        metadata.noise = {
            "distribution": "discrete_laplace",
            "scale": float(draw.scale),
            "cell_variance": float(draw.variance),
        }
        return CellRelease(data.schema, metadata, counts, UniformCellVariance(float(draw.variance)))
