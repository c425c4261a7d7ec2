"""The homogeneity split objective and Algorithm 1 (Shaham, Ghinita, Ahuja,
Krumm, Shahabi, SIGSPATIAL 2021, Sec. 4.1).

For a node sub-matrix and a split index k along an axis, Eq. 5 gives

    o_k = sum_{child 1} |c - mu1| + sum_{child 2} |c - mu2|

(child 1 = the first k rows or columns). Its sensitivity under adding or removing one point is
at most 2 (n-1)/n < 2 (Theorem 1), n being the cells of the child that holds the point.

Exactness. ``n |c - mu| = |n c - S|`` is an integer, so each child's term is computed as an
exact int64 sum ``D = sum |n c - S|`` (below 2 n S < 2^63) divided once by n; o_k is then
``D1/n1 + D2/n2`` within 2 ulps of its exact value. The noise scale adds
:func:`rounding_margin` (4 ulps of the largest possible objective, about 6e-9 for 3.5M points) to
the sensitivity 2, so the guarantee holds for the computed floats, not only for exact reals.

Noise: each evaluation gets Laplace noise of scale ``(2 + margin) / eps''`` through
:func:`dpcube.privacy.samplers.snapped_laplace` (support 1: a point changes one node's objective
per level, the nodes of a level being disjoint). The noisy values are compared (report noisy
min), which is post-processing.

:func:`split_points` runs Algorithm 1 for many nodes at once, corrected here (the listing's
midpoints lack their offsets, line 15 is a simultaneous assignment, the centre's noisy value is
reused and the loop runs exactly T times):
every node of a tree level evaluates its candidates in the same pass over the grid.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import DataError
from dpcube.mechanisms.spatial._common import ROW
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import snapped_laplace

#: Sensitivity of o_k under adding or removing one point (Theorem 1).
OBJECTIVE_SENSITIVITY = 2.0


def objective(F: NDArray[np.int64], k: int, axis: int) -> float:
    """Eq. 5 for one node (reference implementation): k rows (axis 0) or columns (axis 1) first.

    ``k`` may equal the length ("no division": child 2 empty, its term 0).

    >>> F = np.array([[3, 3], [3, 3], [0, 0]])
    >>> [objective(F, k, 0) for k in (1, 2, 3)]
    [6.0, 0.0, 8.0]
    >>> [round(objective(np.array([[0, 0, 4, 4]]), k, 1), 6) for k in (1, 2, 3, 4)]
    [5.333333, 0.0, 5.333333, 8.0]
    """
    a = np.asarray(F, dtype=np.int64)
    a = a if axis == ROW else a.T
    total = 0.0
    for part in (a[:k], a[k:]):
        if part.size:
            n, s = part.size, int(part.sum())
            total += int(np.abs(n * part - s).sum()) / n
    return total


class LevelObjective:
    """o_k for every node of one tree level in one pass over the grid.

    ``rects``: the nodes (half-open ``r0, r1, c0, c1``), ``axes``: the split axis of each. The
    cells of each node are laid out in one block, slice by slice along its split axis, so child 1
    of a split at k is the first ``k * width`` cells of the block: both children are contiguous
    segments, their sums come from one int64 cumulative sum and their deviations from one exact
    ``np.add.reduceat``.
    """

    def __init__(
        self, F: NDArray[np.int64], rects: NDArray[np.int64], axes: NDArray[np.int64]
    ) -> None:
        F = np.asarray(F, dtype=np.int64)
        if F.size * max(int(F.sum()), 1) >= 2**62:
            raise DataError(
                f"HTF's exact split objective needs cells x points < 2^62 (got {F.size} x {int(F.sum())}); "
                "use a coarser grid"
            )
        rects = np.asarray(rects, dtype=np.int64)
        axes = np.asarray(axes, dtype=np.int64)
        heights, widths = rects[:, 1] - rects[:, 0], rects[:, 3] - rects[:, 2]
        self.lengths = np.where(axes == ROW, heights, widths)
        self.widths = np.where(axes == ROW, widths, heights)
        areas = self.lengths * self.widths
        self.starts = np.cumsum(areas) - areas
        self.ends = self.starts + areas
        node = np.repeat(np.arange(len(rects)), areas)
        offset = np.arange(int(areas.sum())) - self.starts[node]
        along, across = offset // self.widths[node], offset % self.widths[node]
        by_row = axes[node] == ROW
        rows = rects[node, 0] + np.where(by_row, along, across)
        cols = rects[node, 2] + np.where(by_row, across, along)
        self.values = F[rows, cols]
        self.cumulative = np.concatenate([[0], np.cumsum(self.values)])
        self.calls = 0

    def __call__(self, k: NDArray[np.int64]) -> NDArray[np.float64]:
        self.calls += 1
        k = np.asarray(k, dtype=np.int64)
        if np.any((k < 1) | (k > self.lengths - 1)):
            raise ValueError("split indices must lie in [1, L-1]")
        cut = self.starts + k * self.widths
        cum = self.cumulative
        bounds = np.stack([self.starts, cut], axis=1).ravel()
        sizes = np.stack([cut - self.starts, self.ends - cut], axis=1).ravel()
        sums = np.stack([cum[cut] - cum[self.starts], cum[self.ends] - cum[cut]], axis=1).ravel()
        dev = np.abs(np.repeat(sizes, sizes) * self.values - np.repeat(sums, sizes))
        d = np.add.reduceat(dev, bounds).astype(np.float64)
        terms = d / sizes.astype(np.float64)
        return np.asarray(terms[0::2] + terms[1::2])


def split_noise_scale(eps_level: float, T: int) -> float:
    """Laplace scale of one noisy evaluation: 2 / (eps_level / (2T + 1)) (Sec. 4.1.2).

    >>> round(split_noise_scale(5e-4, 3))
    28000
    """
    return OBJECTIVE_SENSITIVITY / (eps_level / (2 * T + 1))


def rounding_margin(total: int) -> float:
    """An upper bound on the float error of a difference of two computed objectives.

    ``o = D1/n1 + D2/n2`` (exact integers D, n) is computed with three roundings, so it is within
    2 ulp(o) of the exact value, and o <= 2 |D| (each child's deviation is at most twice its
    count). Adding this margin to the sensitivity makes the guarantee hold for the computed
    values whatever the grid size (the exact bound 2(n-1)/n usually leaves room anyway).

    >>> 0 < rounding_margin(3_500_000) < 1e-8
    True
    """
    return 4.0 * float(np.finfo(np.float64).eps) * (2.0 * total + 1.0)


def laplace_perturber(
    eps_level: float, T: int, source: RandomSource, total: int = 0
) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    """Adds snapped Laplace noise of scale ``(2 + margin) / eps''`` to a vector of objectives
    (one per node); ``total`` (the number of points) sizes the float margin."""
    epp = eps_level / (2 * T + 1)
    scale = (OBJECTIVE_SENSITIVITY + rounding_margin(total)) / epp

    def perturb(values: NDArray[np.float64]) -> NDArray[np.float64]:
        noisy, _ = snapped_laplace(values, scale, epsilon=epp, support=1, source=source)
        return noisy

    return perturb


def split_points(
    evaluate: Callable[[NDArray[np.int64]], NDArray[np.float64]],
    lengths: NDArray[np.int64],
    T: int,
    perturb: Callable[[NDArray[np.float64]], NDArray[np.float64]],
) -> NDArray[np.int64]:
    """Algorithm 1 (as corrected above) for many nodes at once; returns k in [1, L-1].

    Exactly 2T+1 calls of ``evaluate`` and of ``perturb`` (one noisy value per node each), so the
    budget per node is (2T+1) eps'' = eps_level whatever the data. Ties: centre, then k1, then k2.

    >>> F = np.array([[5] * 8] * 300 + [[1] * 8] * 724)
    >>> ev = lambda k: np.array([objective(F, int(k[0]), 0)])
    >>> int(split_points(ev, np.array([1024]), 3, lambda v: v)[0])
    320
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and lengths.min() < 2:
        raise ValueError("split_points needs every length >= 2")
    l = np.ones_like(lengths)
    r = lengths.copy()
    k = l + (r - l) // 2
    ok = perturb(evaluate(k))
    for _ in range(T):
        k1 = l + (k - l) // 2
        k2 = k + (r - k) // 2
        o1 = perturb(evaluate(k1))
        o2 = perturb(evaluate(k2))
        low = np.minimum(np.minimum(o1, ok), o2)
        centre = low == ok
        left = ~centre & (low == o1)
        right = ~centre & ~left
        l, r, k = (
            np.where(centre, k1, np.where(right, k, l)),
            np.where(centre, k2, np.where(left, k, r)),
            np.where(left, k1, np.where(right, k2, k)),
        )
        ok = np.where(left, o1, np.where(right, o2, ok))
    return k


def get_split_point(
    F: NDArray[np.int64], eps_level: float, axis: int, T: int, source: RandomSource
) -> int:
    """Algorithm 1 for a single node ``F`` (a sub-matrix) along ``axis``; k in [1, L-1]."""
    F = np.asarray(F, dtype=np.int64)
    L = F.shape[axis]
    if L < 2:
        raise ValueError(f"a node of length {L} along axis {axis} cannot be split")
    level = LevelObjective(F, np.array([[0, F.shape[0], 0, F.shape[1]]]), np.array([axis]))
    perturb = laplace_perturber(eps_level, T, source, int(F.sum()))
    return int(split_points(level, np.array([L]), T, perturb)[0])


def exhaustive_split_point(
    F: NDArray[np.int64], eps_level: float, axis: int, source: RandomSource
) -> int:
    """The baseline split selection of Sec. 4.1.1 (an ablation): all k in 1..L-1, each with
    eps_level/(L-1).

    Report noisy min over ``o_k + Lap(2 (L-1) / eps_level)``; with noise off it is the exact
    global argmin (the first one on ties).
    """
    F = np.asarray(F, dtype=np.int64)
    L = F.shape[axis]
    if L < 2:
        raise ValueError(f"a node of length {L} along axis {axis} cannot be split")
    values = np.array([objective(F, k, axis) for k in range(1, L)])
    epp = eps_level / (L - 1)
    noisy, _ = snapped_laplace(
        values,
        (OBJECTIVE_SENSITIVITY + rounding_margin(int(F.sum()))) / epp,
        epsilon=eps_level,
        support=L - 1,
        source=source,
    )
    return int(np.argmin(noisy)) + 1
