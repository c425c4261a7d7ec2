"""PrivTree (Zhang, Xiao, Xie, SIGMOD 2016): a quadtree whose depth adapts to the data, with a
privacy cost that does not grow with the depth.

A node v at depth d has the biased count ``b(v) = max(c(v) - d delta, theta - delta)``; it is split
(at its midpoints, as the quadtree) when ``b(v) + DLap(lambda) > theta``. The leaves' counts are
then released with ``DLap(1 / eps_leaves)`` (they are disjoint). The tree gets ``tree_share`` of
epsilon (half by default), the leaf counts the rest.

Exact noise. The paper uses continuous Laplace noise; here every quantity is an integer and the
noise is the discrete Laplace ``P(z) ~ p^|z|``, ``p = exp(-1/lambda)``, with ``lambda`` the realised
(rounded-up) scale, ``theta`` an integer and ``delta = ceil(lambda ln beta)``, beta = 4 (the
largest fanout). The paper's bound carries over unchanged: with x the biased count and
``rho(x) = ln Pr[x + 1 + Z > theta] / Pr[x + Z > theta]``, one has rho(x) = 1/lambda for
x < theta, and for y = x - theta >= 1, ``rho = ln(1 + p^y (1 - p) / (1 + p - p^y)) <= p^y / lambda``.
Along the path of the added point, the split nodes with x >= theta have biased counts at least
delta apart (counts shrink and the bias grows by delta per level), so their terms are at most
``(1/lambda)(1 + 1/beta + 1/beta^2 + ...)``; at most one split node lies in [theta - delta, theta)
(including a node clamped at theta - delta whose clamp the added point lifts), adding 1/lambda;
nodes clamped in both data sets contribute nothing. The total is
``(1/lambda)(2 + 1/(beta - 1)) = (2 beta - 1) / ((beta - 1) lambda)`` = eps_tree for
``lambda = (2 beta - 1) / ((beta - 1) eps_tree)``; removing the point costs at most 1/lambda (only
the path's leaf, a non-split, loses probability). The unit test
``tests/spatial/test_privtree.py`` checks this bound by exact enumeration on small grids.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from dpcube.histogram import Histogram
from dpcube.mechanisms.base import SensitivityClaim, check_share_scale
from dpcube.mechanisms.params import ParamSpec
from dpcube.mechanisms.spatial._common import SpatialMechanism, grid_shape, spatial_case_schema
from dpcube.mechanisms.spatial.release import LeafRelease
from dpcube.mechanisms.spatial.tree import Level, Tree, quad_children, rect_sums
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace, laplace_scale_rational
from dpcube.release.base import ReleaseMetadata
from dpcube.release.cells import prefix_sums
from dpcube.schema import Schema

BETA = 4


#: Largest ``theta``: far above any count, and ``theta - delta`` stays exact in int64.
MAX_THETA = 2**40


def privtree_parameters(eps_tree: float, beta: int = BETA) -> tuple[float, int]:
    """(lambda, delta): the realised discrete Laplace scale and the integer depth bias.

    >>> lam, delta = privtree_parameters(0.5)
    >>> round(lam, 4), delta
    (4.6667, 7)
    """
    t, s = laplace_scale_rational((2 * beta - 1) / ((beta - 1) * eps_tree))
    lam = t / s
    return lam, math.ceil(lam * math.log(beta) * (1 + 1e-12))


def privtree_structure(
    F: np.ndarray, eps_tree: float, theta: int, source: RandomSource, max_depth: int | None = None
) -> Tree:
    """The PrivTree decomposition (Algorithm 2 of Zhang et al. with discrete noise)."""
    rows, cols = F.shape
    depth_limit = (
        max_depth if max_depth is not None else 2 * math.ceil(math.log2(max(rows, cols, 2))) + 1
    )
    lam, delta = privtree_parameters(eps_tree)
    prefix = prefix_sums(np.asarray(F, dtype=np.int64))
    root = np.array([[0, rows, 0, cols]], dtype=np.int64)
    tree = Tree([Level(root, rect_sums(prefix, root), np.array([-1]))], depth_limit)
    for depth in range(depth_limit):
        level = tree.levels[-1]
        r = level.rects
        splittable = ((r[:, 1] - r[:, 0]) >= 2) | ((r[:, 3] - r[:, 2]) >= 2)
        idx = np.flatnonzero(splittable)
        if idx.size == 0:
            break
        biased = np.maximum(level.counts[idx] - depth * delta, theta - delta)
        noisy, _ = add_discrete_laplace(biased, lam, source)
        split = idx[noisy > theta]
        if split.size == 0:
            break
        children, parent = quad_children(r[split])
        tree.levels.append(Level(children, rect_sums(prefix, children), split[parent]))
    return tree


class PrivTree(SpatialMechanism):
    """PrivTree with discrete Laplace noise (see the module docstring for the privacy proof).

    >>> from dpcube import Histogram
    >>> from dpcube.privacy import NO_NOISE
    >>> F = np.zeros((8, 8), dtype=np.int64); F[0, 0] = 1000
    >>> r = PrivTree(1.0).release(Histogram(spatial_case_schema(8, 8), F), random_state=NO_NOISE)
    >>> r.answer({"p": {"bins": [[0, 0], [0, 0]]}})
    1000.0
    """

    name = "privtree"
    #: Peak memory of a release per cell: 21 to 45 bytes measured (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 72.0
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "tree_share",
            "float",
            "share of epsilon spent on the tree; the rest goes to the leaf counts",
            low=0,
            high=1,
            low_open=True,
            high_open=True,
        ),
        ParamSpec(
            "theta",
            "int",
            "split a node while its biased noisy count exceeds this threshold",
            low=0,
            high=MAX_THETA,
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        neighbour: str = "add_remove",
        tree_share: float = 0.5,
        theta: int = 0,
        user_bound: int = 1,
    ) -> None:
        super().__init__(epsilon, delta, neighbour, user_bound)
        self.tree_share = float(tree_share)
        self.theta = int(theta)

    def validate(self, data: Histogram) -> None:
        """Both shares of epsilon keep their noise within the exact samplers (before the charge)."""
        u = self.points_per_unit
        check_share_scale(
            self.name,
            f"tree_share={self.tree_share:g}",
            (2 * BETA - 1) / (BETA - 1),
            self.tree_share * self.epsilon / u,
        )
        check_share_scale(
            self.name,
            f"1 - tree_share={1 - self.tree_share:g}",
            1.0,
            (1 - self.tree_share) * self.epsilon / u,
        )

    def point_claims(self, schema: Schema) -> list[SensitivityClaim]:
        grid_shape(schema)
        return [
            SensitivityClaim(
                "node counts (biased counts move by at most 1)",
                lambda x: np.asarray(x, dtype=np.float64).ravel(),
                "l1",
                1.0,
            ),
        ]

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        return [Case("privtree", spatial_case_schema(2, 3), lambda n: cls(1.0, neighbour=n), [{}])]

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> LeafRelease:
        u = self.points_per_unit
        eps_tree = self.tree_share * self.epsilon / u
        eps_leaves = (1 - self.tree_share) * self.epsilon / u
        tree = privtree_structure(data.counts, eps_tree, self.theta, source)
        depths, idx = tree.leaves()
        rects = np.concatenate(
            [tree.levels[d].rects[idx[depths == d]] for d in range(len(tree.levels))]
        )
        exact = np.concatenate(
            [tree.levels[d].counts[idx[depths == d]] for d in range(len(tree.levels))]
        )
        counts, draw = add_discrete_laplace(exact, 1.0 / eps_leaves, source)
        lam, delta = privtree_parameters(eps_tree)
        metadata.noise = {
            "distribution": "discrete_laplace",
            "lambda": lam,
            "delta": delta,
            "leaves": len(rects),
        }
        return LeafRelease(
            data.schema,
            metadata,
            rects,
            counts,
            np.full(len(rects), float(draw.variance)),
            np.full(len(rects), self.epsilon),
        )
