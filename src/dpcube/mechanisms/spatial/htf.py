"""HTF: the Homogeneous Tree Framework (Shaham, Ghinita, Ahuja, Krumm, Shahabi, "HTF: Homogeneous
Tree Framework for Differentially-Private Release of Location Data", SIGSPATIAL 2021), with the
paper's Algorithms 1-3 corrected here where their listings are defective (missing offsets, nodes
that cannot be split, a budget accumulator that must be per path).

Budget (Eq. 4): ``eps_tot = eps_height + h eps_level + eps_data``, spent as

1. (C, Eqs. 9-10) ``|D| + DLap(1/eps_height)`` fixes ``h = floor(log2(|D~| eps_tot / 10))``;
2. (A, Algorithms 1-2) a binary partition of height h; each node's split costs ``eps_level``
   (2T+1 noisy objective evaluations of eps_level/(2T+1) each); nodes of a level are disjoint, so
   a path spends ``h eps_level``;
3. (B, Algorithm 3) decision counts with the geometric shares of ``eps_data`` (Eq. 17), pruning
   when the noisy count is <= theta_count or the node has < theta_cells cells, and a fresh count of
   every released leaf with the rest of its path's budget: every path spends exactly eps_data.

Neighbours: add or remove one point (HTF, Sec. 2.1); with ``user_bound=c``, one user of at most c
points (every budget above is divided by c); ``replace`` divides them by 2c (group privacy, see
:class:`~dpcube.mechanisms.spatial._common.SpatialMechanism`). The data-dependent steps compose adaptively along
each root-to-leaf path and in parallel across the disjoint nodes of a level.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from dpcube.errors import BudgetError
from dpcube.histogram import Histogram
from dpcube.mechanisms.base import SensitivityClaim, check_share_scale
from dpcube.mechanisms.params import ParamSpec
from dpcube.mechanisms.spatial._common import (
    COL,
    EPS_HEIGHT,
    MAX_FORCED_HEIGHT,
    ROW,
    SPATIAL_CASE_QUERIES,
    SpatialMechanism,
    geometric_shares,
    grid_shape,
    noisy_count,
    spatial_case_schema,
    tree_height,
)
from dpcube.mechanisms.spatial.homogeneity import (
    OBJECTIVE_SENSITIVITY,
    LevelObjective,
    laplace_perturber,
    objective,
    rounding_margin,
    split_points,
)
from dpcube.mechanisms.spatial.release import LeafRelease
from dpcube.mechanisms.spatial.tree import Perturbed, Tree, binary_tree, htf_perturb
from dpcube.privacy.random import RandomSource
from dpcube.release.base import ReleaseMetadata
from dpcube.schema import Schema

#: Most steps of the split search (``T``): each halves the candidate interval, so 63 steps reach a
#: single split point on any int64 length; more would only spend budget.
MAX_SEARCH_STEPS = 63


def htf_partition(
    F: np.ndarray, h: int, eps_level: float, T: int, source: RandomSource, even_axis: int = ROW
) -> Tree:
    """Algorithm 2 with Algorithm 1 as the split chooser, one vectorised pass per level."""
    counts = np.asarray(F, dtype=np.int64)
    perturb = laplace_perturber(eps_level, T, source, int(counts.sum()))

    def choose(
        rects: np.ndarray, axes: np.ndarray, lengths: np.ndarray, widths: np.ndarray
    ) -> np.ndarray:
        return split_points(LevelObjective(counts, rects, axes), lengths, T, perturb)

    return binary_tree(counts, h, choose, even_axis)


def _objective_claim(r0: int, r1: int, c0: int, c1: int, axis: int, k: int) -> SensitivityClaim:
    def f(x: np.ndarray) -> np.ndarray:
        return np.array([objective(np.asarray(x)[r0:r1, c0:c1], k, axis)])

    name = f"objective[{'row' if axis == ROW else 'col'} k={k}]"
    return SensitivityClaim(name, f, "l1", OBJECTIVE_SENSITIVITY, tight=False)


class HTF(SpatialMechanism):
    """The Homogeneous Tree Framework.

        Parameters (defaults as in the paper, Sec. 5.1): ``eps_level`` (eps'_prt per tree level,
        5e-4), ``eps_height`` (1e-4), ``T`` (3 search steps), ``c0`` (10), ``theta_count`` (prune
        when the noisy count <= 100), ``theta_cells`` (prune below 5 cells), ``even_axis`` ("row":
        nodes of even height split rows, the paper's prose; "col" is its listing). ``height`` forces h
        (an ablation; no height budget is then spent). ``extent_first`` skips the decision draw
        of nodes that fail the public extent test. All budgets are in units of ``epsilon``. A height
    chosen from the noisy total is lowered to the tallest tree whose data budget is positive and
    representable (:meth:`capped_height`; raising there would come after the charge).

        >>> from dpcube import Histogram
        >>> from dpcube.privacy import NO_NOISE
        >>> s = spatial_case_schema(4, 4)
        >>> r = HTF(1.0, height=4, theta_count=0, theta_cells=0).release(
        ...     Histogram(s, np.arange(16).reshape(4, 4)), random_state=NO_NOISE)
        >>> len(r.leaves), r.answer({"p": {"bins": [[0, 1], [0, 3]]}})
        (16, 28.0)
    """

    name = "htf"
    #: Peak memory of a release per cell: 102 to 106 bytes measured (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 160.0
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "eps_level",
            "float",
            "budget of the split search at each tree level (absolute; h eps_level < epsilon)",
            low=0,
            low_open=True,
        ),
        EPS_HEIGHT,
        ParamSpec(
            "T",
            "int",
            "steps of the private split search per node (2T+1 noisy objectives)",
            low=1,
            high=MAX_SEARCH_STEPS,
        ),
        ParamSpec("c0", "float", "the constant of h = log2(N eps / c0)", low=0, low_open=True),
        ParamSpec("theta_count", "float", "prune a node whose noisy count is at most this", low=0),
        ParamSpec("theta_cells", "float", "prune a node of fewer grid cells than this", low=0),
        ParamSpec(
            "even_axis",
            "choice",
            "the axis that nodes of even height split",
            choices=("row", "col"),
        ),
        ParamSpec(
            "height",
            "int",
            "force the tree height (no height budget spent); null: chosen from a noisy total",
            low=1,
            high=MAX_FORCED_HEIGHT,
            optional=True,
        ),
        ParamSpec(
            "extent_first",
            "bool",
            "skip the decision draw of nodes that fail the public extent test",
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        neighbour: str = "add_remove",
        eps_level: float = 5e-4,
        eps_height: float = 1e-4,
        T: int = 3,
        c0: float = 10.0,
        theta_count: float = 100.0,
        theta_cells: float = 5.0,
        even_axis: str = "row",
        height: int | None = None,
        extent_first: bool = False,
        user_bound: int = 1,
    ) -> None:
        super().__init__(epsilon, delta, neighbour, user_bound)
        self.eps_level = float(eps_level)
        self.eps_height = float(eps_height)
        self.T = int(T)
        self.c0 = float(c0)
        self.theta_count = float(theta_count)
        self.theta_cells = float(theta_cells)
        self.even_axis = even_axis
        self.height = None if height is None else int(height)
        self.extent_first = bool(extent_first)
        if self.height is None and not 0 < self.eps_height < self.epsilon:
            raise BudgetError(
                f"eps_height must be in (0, epsilon={self.epsilon}), got {eps_height}"
            )

    def budget_spent_before_data(self, h: int) -> float:
        """eps_height (unless the height is forced) + h eps_level."""
        return (0.0 if self.height is not None else self.eps_height) + h * self.eps_level

    def budget(self, h: int) -> tuple[float, float, float]:
        """(eps_height, eps_partition = h eps_level, eps_data) in units of epsilon (Eq. 4)."""
        eps_height = 0.0 if self.height is not None else self.eps_height
        eps_prt = h * self.eps_level
        eps_data = self.epsilon - eps_height - eps_prt
        if not eps_data > 0:
            raise BudgetError(
                f"HTF: epsilon={self.epsilon} leaves no data budget for a tree of height {h} after "
                f"eps_height={eps_height} and h*eps_level={h}*{self.eps_level}={eps_prt:.6g}; "
                "raise epsilon, lower eps_level or force a lower --param height"
            )
        return eps_height, eps_prt, eps_data

    def point_claims(self, schema: Schema) -> list[SensitivityClaim]:
        rows, cols = grid_shape(schema)
        claims = [
            SensitivityClaim(
                "total", lambda x: np.array([np.asarray(x).sum()], dtype=np.float64), "l1", 1.0
            ),
            SensitivityClaim(
                "node counts (any tiling)",
                lambda x: np.asarray(x, dtype=np.float64).ravel(),
                "l1",
                1.0,
            ),
        ]
        for axis, length in ((ROW, rows), (COL, cols)):
            for k in sorted({1, length // 2, length - 1} - {0}) if length >= 2 else []:
                claims.append(_objective_claim(0, rows, 0, cols, axis, k))
        return claims

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        schema = spatial_case_schema(2, 3)
        queries = SPATIAL_CASE_QUERIES
        return [
            Case(
                "htf-fine",
                schema,
                lambda n: cls(1.0, neighbour=n, height=4, theta_count=0, theta_cells=0),
                queries,
            ),
            Case("htf-default", schema, lambda n: cls(1.0, neighbour=n), [{}]),
        ]

    def run(
        self, hist: Histogram, source: RandomSource
    ) -> tuple[int, Tree, Perturbed, tuple[float, float, float]]:
        """The three steps; returns (h, the partition tree, the perturbed leaves, the budget)."""
        c = self.points_per_unit
        F = hist.counts
        if self.height is None:
            n_hat = noisy_count(int(F.sum()), self.eps_height / c, source)
            h = self.capped_height(tree_height(n_hat, self.unit_epsilon, self.c0))
        else:
            h = self.height
        eps_height, eps_prt, eps_data = self.budget(h)
        even = ROW if self.even_axis == "row" else COL
        tree = htf_partition(F, h, self.eps_level / c, self.T, source, even)
        shares = geometric_shares(h, eps_data / c)
        perturbed = htf_perturb(
            tree,
            shares,
            eps_data / c,
            self.theta_count,
            self.theta_cells,
            source,
            self.extent_first,
        )
        return h, tree, perturbed, (eps_height, eps_prt, eps_data)

    def usable_height(self, h: int) -> bool:
        """Whether a tree of height ``h`` leaves a data budget whose every level's noise the exact
        samplers represent."""
        eps_data = self.epsilon - self.budget_spent_before_data(h)
        if not eps_data > 0:
            return False
        least = float(geometric_shares(h, eps_data / self.points_per_unit).min())
        try:
            check_share_scale(self.name, "the data budget", 1.0, least)
        except BudgetError:
            return False
        return True

    def capped_height(self, h: int) -> int:
        """``h`` lowered to the tallest usable tree (:meth:`usable_height`, at least 1).

        Raising when a height chosen from the noisy total (Eq. 10) leaves no data budget would
        come after the charge, so the height is lowered instead (post-processing of
        the noisy total and public parameters), and :meth:`validate` refuses, before the charge,
        budgets that leave no usable tree at all."""
        h = min(h, MAX_FORCED_HEIGHT)
        while h > 1 and not self.usable_height(h):
            h -= 1
        return h

    def validate(self, data: Histogram) -> None:
        """Every budget share is representable before the charge: the split search's
        (``eps_level / (2T+1)`` per noisy objective), the height's, and the data budget of the
        forced height (or of a tree of height 1, when the height is chosen from the data)."""
        u = self.points_per_unit
        margin = rounding_margin(int(data.total))
        check_share_scale(
            self.name,
            f"eps_level={self.eps_level:g} over 2T+1={2 * self.T + 1} split evaluations",
            OBJECTIVE_SENSITIVITY + margin,
            self.eps_level / (2 * self.T + 1) / u,
        )
        if self.height is None:
            check_share_scale(
                self.name, f"eps_height={self.eps_height:g}", 1.0, self.eps_height / u
            )
        h = 1 if self.height is None else self.height
        _, _, eps_data = self.budget(h)
        least = float(geometric_shares(h, eps_data / u).min())
        check_share_scale(self.name, f"the data budget of a tree of height {h}", 1.0, least)

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> LeafRelease:
        h, _, perturbed, (eps_height, eps_prt, eps_data) = self.run(data, source)
        c = self.points_per_unit
        paths = (eps_height + eps_prt) + perturbed.path_data_epsilon * c
        metadata.noise = {
            "distribution": "discrete_laplace (counts), snapped_laplace (split objectives)",
            "height": h,
            "eps_height": eps_height,
            "eps_partition": eps_prt,
            "eps_data": eps_data,
            "leaves": len(perturbed.rects),
        }
        return LeafRelease(
            data.schema, metadata, perturbed.rects, perturbed.counts, perturbed.variances, paths
        )
