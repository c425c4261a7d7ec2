"""The hierarchical baselines HTF is compared with (Shaham et al., SIGSPATIAL 2021),
each a spatial mechanism that releases every node count of a tree over the grid:

- :class:`QuadTree` (Cormode et al., ICDE 2012): midpoint quadtree of height k, every node's count
  released with a geometric (Eq. 17) or uniform share of epsilon, then least-squares consistency;
- :class:`KDTree` (Cormode et al. 2012): binary tree with alternating axes whose cuts are private
  medians (an exact exponential mechanism, :mod:`.em`) with 15 % of epsilon, counts as above.

All noise is discrete Laplace on integer counts. A node that cannot be split (1x1) before the
tree's last level releases its count with every share left on its path, so every root-to-leaf
path spends exactly epsilon. A tree whose height is not given spends ``eps_height`` on a noisy
total |D| to size itself.
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
    MAX_FORCED_HEIGHT,
    ROW,
    SPATIAL_CASE_QUERIES,
    SpatialMechanism,
    cells_claim,
    geometric_shares,
    grid_shape,
    noisy_count,
    spatial_case_schema,
    total_claim,
    tree_height,
)
from dpcube.mechanisms.spatial.em import exponential_cuts
from dpcube.mechanisms.spatial.release import LeafRelease
from dpcube.mechanisms.spatial.tree import (
    Tree,
    binary_tree,
    consistent_leaves,
    quad_tree,
    rect_sums,
)
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace
from dpcube.release.base import ReleaseMetadata
from dpcube.release.cells import prefix_sums
from dpcube.schema import Schema

IntArray = NDArray[np.int64]


def level_budgets(height: int, epsilon: float, allocation: str) -> NDArray[np.float64]:
    """Budget of a node of height i (index i = 0..height): geometric (Eq. 17) or uniform.

    >>> level_budgets(3, 1.0, "uniform").tolist()
    [0.25, 0.25, 0.25, 0.25]
    """
    if allocation == "geometric":
        return geometric_shares(height, epsilon)
    if allocation == "uniform":
        return np.full(height + 1, epsilon / (height + 1))
    raise BudgetError(f"budget allocation must be 'geometric' or 'uniform', got {allocation!r}")


def release_tree_counts(
    tree: Tree, shares: NDArray[np.float64], source: RandomSource
) -> tuple[list[NDArray[np.float64]], list[NDArray[np.float64]], list[NDArray[np.float64]]]:
    """Noisy count of every node: ``shares[height]``, or for a childless node above the last level
    every share from its height down (the rest of its path). Returns (noisy, variances, path eps)."""
    h = tree.height
    cumulative = np.cumsum(shares)
    noisy, variances, spent = [], [], []
    for d, level in enumerate(tree.levels):
        i = h - d
        eps = np.where(tree.child_counts(d) > 0, shares[i], cumulative[i])
        y = np.zeros(len(level.rects))
        v = np.zeros(len(level.rects))
        for e in np.unique(eps):
            sel = eps == e
            counts, draw = add_discrete_laplace(level.counts[sel], 1.0 / float(e), source)
            y[sel] = counts
            v[sel] = float(draw.variance)
        noisy.append(y)
        variances.append(v)
        above = cumulative[-1] - cumulative[i]
        spent.append(above + eps)
    return noisy, variances, spent


class _CountTree(SpatialMechanism):
    """A tree whose every node count is released, then made consistent (Cormode et al. 2012)."""

    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "height",
            "int",
            "force the tree height (no height budget spent); null: chosen from a noisy total",
            low=0,
            high=MAX_FORCED_HEIGHT,
            optional=True,
        ),
        ParamSpec(
            "allocation",
            "choice",
            "how the count budget is split over the levels",
            choices=("geometric", "uniform"),
        ),
        ParamSpec("consistency", "bool", "least-squares consistency of the node counts"),
        EPS_HEIGHT,
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        neighbour: str = "add_remove",
        height: int | None = None,
        allocation: str = "geometric",
        consistency: bool = True,
        eps_height: float = 1e-4,
        user_bound: int = 1,
    ) -> None:
        super().__init__(epsilon, delta, neighbour, user_bound)
        self.height = None if height is None else int(height)
        self.allocation = allocation
        self.consistency = bool(consistency)
        self.eps_height = float(eps_height)
        if self.height is None and not 0 < self.eps_height < self.epsilon:
            raise BudgetError(
                f"eps_height must be in (0, epsilon={self.epsilon}), got {eps_height}"
            )

    def validate(self, data: Histogram) -> None:
        """The height's and the counts' shares of epsilon are representable (before the charge)."""
        if self.height is None:
            self.check_share(f"eps_height={self.eps_height:g}", self.eps_height)
        # The counts' budget over at most MAX_FORCED_HEIGHT + 1 levels (the least share of any).
        self.check_share("the count budget", self._count_budget() / (MAX_FORCED_HEIGHT + 1) / 4)

    def _count_budget(self) -> float:
        """The epsilon left to the node counts (the kd-tree's medians take a share first)."""
        return self.epsilon - self._spent_on_height()

    def _spent_on_height(self) -> float:
        return 0.0 if self.height is not None else self.eps_height

    def _estimated_height(self, hist: Histogram, source: RandomSource) -> int:
        """HTF's height rule from a noisy total (Shaham et al., SIGSPATIAL 2021, Eq. 10, floored);
        overridden by ``height``."""
        n_hat = noisy_count(hist.total, self.eps_height / self.points_per_unit, source)
        return tree_height(n_hat, self.unit_epsilon)

    def _finish(
        self,
        hist: Histogram,
        tree: Tree,
        eps_counts: float,
        spent_before: float,
        source: RandomSource,
        metadata: ReleaseMetadata,
    ) -> LeafRelease:
        c = self.points_per_unit
        shares = level_budgets(tree.height, eps_counts / c, self.allocation)
        noisy, variances, spent = release_tree_counts(tree, shares, source)
        depths, idx = tree.leaves()
        paths = (
            spent_before
            + np.concatenate([spent[d][idx[depths == d]] for d in range(len(tree.levels))]) * c
        )
        # each leaf's own noisy count and its noise variance (the leaves in consistent_leaves'
        # order): the release itself without consistency, kept beside the consistent one with it
        raw = np.concatenate([noisy[d][idx[depths == d]] for d in range(len(tree.levels))])
        raw_var = np.concatenate([variances[d][idx[depths == d]] for d in range(len(tree.levels))])
        raw_counts: NDArray[Any] | None = None
        if self.consistency:
            rects, values = consistent_leaves(tree, noisy, variances)
            leaf_var = None
            raw_counts = raw
        else:
            rects = np.concatenate(
                [tree.levels[d].rects[idx[depths == d]] for d in range(len(tree.levels))]
            )
            values, leaf_var = raw, raw_var
        metadata.noise = {
            "distribution": "discrete_laplace",
            "height": tree.height,
            "allocation": self.allocation,
            "consistency": self.consistency,
            "leaves": len(rects),
        }
        return LeafRelease(
            hist.schema,
            metadata,
            rects,
            values,
            leaf_var,
            paths,
            raw_counts=raw_counts,
            raw_variances=raw_var if raw_counts is not None else None,
        )


#: ``QuadTree(height_rule=...)``: how the default height follows HTF's h (see :class:`QuadTree`).
HEIGHT_RULES = ("tuned", "spec")


def quadtree_height(h: int, rows: int, cols: int, rule: str = "tuned") -> int:
    """The quadtree height k from HTF's binary height h, capped at one cell per leaf.

    >>> [quadtree_height(h, 256, 256) for h in (4, 7, 12, 15)]
    [3, 5, 7, 8]
    >>> [quadtree_height(h, 256, 256, "spec") for h in (4, 7, 12, 15)]
    [2, 3, 6, 7]
    """
    full = math.ceil(math.log2(max(rows, cols, 2)))
    k = math.ceil(h / 2) + 1 if rule == "tuned" else h // 2
    return max(0, min(k, full))


class QuadTree(_CountTree):
    """Data-independent quadtree (Cormode et al. 2012): height k, all of epsilon on counts.

    ``height=None`` sizes the tree from a noisy total N~ with HTF's h = floor(log2(N~ eps / 10))
    (Eq. 10) and ``height_rule``:

    - ``"tuned"`` (default): k = ceil(h/2) + 1, capped at the full height (one cell per leaf).
      Chosen on the ten DPBench 256 x 256 grids at eps 0.01, 0.1 and 1 (1,000 random rectangles,
      3 seeds; docs/location.md): mean absolute error within 1.06x of the best fixed height
      (geometric mean; worst 1.76x), against 2.34x (worst 13.7x) for ``"spec"`` and 1.57x (worst
      15.4x) for the full-height tree ektelo and Cormode et al. use.
    - ``"spec"``: k = floor(h/2), HTF's height (Eq. 10) mapped to the quadtree (the setting of
      Shaham et al.'s Fig. 6; the paper leaves the baselines' height open).

    The choice depends on the data only through the noisy total, whose budget ``eps_height`` is
    charged as part of epsilon.

    >>> from dpcube import Histogram
    >>> from dpcube.privacy import NO_NOISE
    >>> r = QuadTree(1.0, height=2).release(Histogram(spatial_case_schema(4, 4), np.ones((4, 4))), random_state=NO_NOISE)
    >>> len(r.leaves), round(r.answer({"p": {"bins": [[0, 2], [0, 0]]}}), 9)
    (16, 3.0)
    """

    name = "quadtree"
    #: Peak memory of a release per cell: 211 to 228 bytes measured (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 320.0
    #: The leaves depend on the data only through the noisy total: a bootstrap re-run cuts the
    #: same leaves (``LeafRelease.reruns_keep_the_leaves``).
    reruns_keep_the_leaves = True

    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "height_rule",
            "choice",
            "the height chosen from the noisy total: tuned, or HTF's Eq. 10 halved",
            choices=HEIGHT_RULES,
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        neighbour: str = "add_remove",
        height: int | None = None,
        allocation: str = "geometric",
        consistency: bool = True,
        eps_height: float = 1e-4,
        user_bound: int = 1,
        height_rule: str = "tuned",
    ) -> None:
        super().__init__(
            epsilon, delta, neighbour, height, allocation, consistency, eps_height, user_bound
        )
        self.height_rule = height_rule

    def point_claims(self, schema: Schema) -> list[SensitivityClaim]:
        rows, cols = grid_shape(schema)
        depth = self.height if self.height is not None else math.ceil(math.log2(max(rows, cols, 2)))
        claims = [] if self.height is not None else [total_claim()]
        empty = quad_tree(np.zeros((rows, cols), dtype=np.int64), depth)
        for d, level in enumerate(empty.levels):
            rects = level.rects

            def counts(x: np.ndarray, rects: IntArray = rects) -> np.ndarray:
                return rect_sums(prefix_sums(np.asarray(x, dtype=np.int64)), rects).astype(
                    np.float64
                )

            claims.append(SensitivityClaim(f"level {d} counts", counts, "l1", 1.0))
        return claims

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        schema = spatial_case_schema(2, 3)
        queries = SPATIAL_CASE_QUERIES
        return [
            Case("quadtree-geo", schema, lambda n: cls(1.0, neighbour=n, height=2), queries),
            Case(
                "quadtree-uniform-raw",
                schema,
                lambda n: cls(1.0, neighbour=n, height=2, allocation="uniform", consistency=False),
                queries,
            ),
            Case("quadtree-auto", schema, lambda n: cls(1.0, neighbour=n), [{}]),
        ]

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> LeafRelease:
        rows, cols = grid_shape(data.schema)
        if self.height is not None:
            k = self.height
        else:
            k = quadtree_height(self._estimated_height(data, source), rows, cols, self.height_rule)
        tree = quad_tree(data.counts, k)
        spent = self._spent_on_height()
        return self._finish(data, tree, self.epsilon - spent, spent, source, metadata)


def median_chooser(F: IntArray, eps_median: float, source: RandomSource) -> Any:
    prefix = prefix_sums(np.asarray(F, dtype=np.int64))

    def choose(rects: IntArray, axes: IntArray, lengths: IntArray, widths: IntArray) -> IntArray:
        n = rect_sums(prefix, rects)

        def first(nodes: IntArray, ks: IntArray) -> IntArray:
            sub = rects[nodes].copy()
            by_row = axes[nodes] == ROW
            sub[by_row, 1] = sub[by_row, 0] + ks[by_row]
            sub[~by_row, 3] = sub[~by_row, 2] + ks[~by_row]
            return rect_sums(prefix, sub)

        def score(nodes: IntArray, ks: IntArray) -> IntArray:
            return np.abs(2 * first(nodes, ks) - n[nodes])

        nodes = np.arange(len(rects))
        lo, hi = np.ones_like(lengths), lengths - 1
        while np.any(lo < hi):
            mid = (lo + hi) // 2
            above = 2 * first(nodes, mid) >= n
            hi = np.where(above, mid, hi)
            lo = np.where(above, lo, mid + 1)
        best = np.minimum(score(nodes, lo), score(nodes, np.maximum(lo - 1, 1)))
        return exponential_cuts(score, best, lengths, eps_median, source)

    return choose


def _score_claim(rows: int, cols: int, axis: int, k: int) -> SensitivityClaim:
    def f(x: np.ndarray) -> np.ndarray:
        a = np.asarray(x, dtype=np.int64)
        first = a[:k].sum() if axis == ROW else a[:, :k].sum()
        return np.array([abs(2 * int(first) - int(a.sum()))], dtype=np.float64)

    return SensitivityClaim(f"median score[{'row' if axis == ROW else 'col'} k={k}]", f, "l1", 1.0)


class KDTree(_CountTree):
    """kd-tree with private medians (Cormode, Procopiuc, Srivastava, Shen, Yu, ICDE 2012).

    ``median_share`` (15 %) of epsilon chooses the cuts, ``median_share / h`` per level, through
    the exponential mechanism with score ``|2 cnt_k - n|``; the rest is spent on the node counts
    (``allocation`` geometric or uniform) followed by least-squares consistency.
    """

    name = "kdtree"
    #: Peak memory of a release per cell: 207 to 213 bytes measured (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 320.0
    #: Private medians: sibling leaves hold (nearly) equal counts by construction, so the release's
    #: leaf pairs cannot tell how clustered the points are (``LeafRelease.splits_equalise_counts``).
    splits_equalise_counts = True

    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "height",
            "int",
            "force the tree height (no height budget spent); null: chosen from a noisy total",
            low=1,
            high=MAX_FORCED_HEIGHT,
            optional=True,
        ),
        ParamSpec(
            "median_share",
            "float",
            "share of epsilon spent choosing the private medians",
            low=0,
            high=1,
            low_open=True,
            high_open=True,
        ),
        ParamSpec(
            "even_axis", "choice", "the axis that nodes of even depth split", choices=("row", "col")
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        neighbour: str = "add_remove",
        height: int | None = None,
        allocation: str = "geometric",
        consistency: bool = True,
        eps_height: float = 1e-4,
        median_share: float = 0.15,
        even_axis: str = "row",
        user_bound: int = 1,
    ) -> None:
        super().__init__(
            epsilon, delta, neighbour, height, allocation, consistency, eps_height, user_bound
        )
        self.median_share = float(median_share)
        self.even_axis = even_axis

    def _count_budget(self) -> float:
        return (1 - self.median_share) * (self.epsilon - self._spent_on_height())

    def validate(self, data: Histogram) -> None:
        """The counts' shares and each level's median share are representable."""
        super().validate(data)
        levels = self.height if self.height is not None else MAX_FORCED_HEIGHT
        self.check_share(
            f"median_share={self.median_share:g} over {levels} levels",
            self.median_share * (self.epsilon - self._spent_on_height()) / levels,
            2.0,
        )

    def point_claims(self, schema: Schema) -> list[SensitivityClaim]:
        rows, cols = grid_shape(schema)
        claims = [cells_claim("node counts (any tiling)")]
        if self.height is None:
            claims.append(total_claim())
        for axis, length in ((ROW, rows), (1 - ROW, cols)):
            for k in sorted({1, length // 2, length - 1} - {0}) if length >= 2 else []:
                claims.append(_score_claim(rows, cols, axis, k))
        return claims

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        schema = spatial_case_schema(2, 3)
        queries = SPATIAL_CASE_QUERIES
        return [
            Case("kdtree-geo", schema, lambda n: cls(1.0, neighbour=n, height=4), queries),
            Case(
                "kdtree-uniform",
                schema,
                lambda n: cls(1.0, neighbour=n, height=4, allocation="uniform"),
                queries,
            ),
            Case("kdtree-auto", schema, lambda n: cls(1.0, neighbour=n), [{}]),
        ]

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> LeafRelease:
        h = self.height if self.height is not None else self._estimated_height(data, source)
        spent = self._spent_on_height()
        rest = self.epsilon - spent
        eps_median = self.median_share * rest / h
        c = self.points_per_unit
        tree = binary_tree(
            data.counts,
            h,
            median_chooser(data.counts, eps_median / c, source),
            0 if self.even_axis == "row" else 1,
        )
        return self._finish(
            data, tree, (1 - self.median_share) * rest, spent + h * eps_median, source, metadata
        )
