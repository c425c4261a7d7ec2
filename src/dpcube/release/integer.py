"""Whole-number, non-negative, consistent tables from a release: post-processing, no budget.

Every release kind has ``to_integer()`` (its own method, built from the pieces here); it returns
a new release of the same kind whose released figures are non-negative whole numbers, every
released aggregate the sum of its parts. It reads the released (noisy) figures only, never the
data, so it is post-processing (Dwork and Roth, "The Algorithmic Foundations of Differential
Privacy", 2014, Prop. 2.1): nothing is charged and the guarantee is the release's own.

The method is the US Census Bureau's TopDown post-processing (Abowd et al., "The 2020 Census
Disclosure Avoidance System TopDown Algorithm", Harvard Data Science Review, 2022, Sec. 5), in
two steps per level of a hierarchy:

1. **Non-negative L2 fit.** The children of a parent whose (whole) figure is fixed are
   projected in L2 onto ``{x >= 0, sum x = parent}`` (:func:`simplex_projection`: the exact
   Euclidean projection onto a scaled simplex, Held, Wolfe and Crowder, Math. Programming 1974;
   Duchi, Shalev-Shwartz, Singer and Chandra, ICML 2008, Fig. 1). Census regions are their own
   hierarchy (:func:`topdown_hierarchy`); cells and spatial leaves get a tree of blocks of 4
   neighbours (:func:`topdown_blocks`), so that mass moves only inside blocks. The cuboids of a
   data cube form a lattice, not a tree: the finest table is fitted by non-negative least
   squares against every published cuboid at once (:func:`nonnegative_least_squares`,
   accelerated projected gradient) and every cuboid is then summed from it.
2. **Controlled rounding.** Each fitted value ``x*`` becomes ``floor(x*)`` or ``ceil(x*)``
   keeping its parent's whole figure (TopDown's L1 rounding problem; Cox, "A constructive
   procedure for unbiased controlled rounding", JASA 82, 1987, for the two-way case). Under one
   sum constraint per parent, ``min sum |x - x*|`` over the roundings is a linear programme
   whose constraint matrix (one interval of ones per parent) is totally unimodular, so its
   optimum is integral; it is the largest-remainder rounding, computed exactly without a
   solver (:func:`controlled_round`). A data cube is rounded down the chain of cuboids
   () < (a1) < (a1, a2) < ... (:func:`topdown_chain`), each a parent of the next.

**What the rounding changes** (the error stated): every finest cell moves by less than 1 from
its fitted value (projected under its parent's whole figure), so an answer summing ``n`` finest
cells moves by less than ``n``, and every figure of the hierarchy (a parent, a block, a chain
cuboid's cell, the grand total) by less than 1 from its own projection. The
non-negative fit moves a figure by a data-dependent amount (a negative child is raised to 0 and
its siblings lowered), so exact noise variances no longer describe the answers. What stays
valid: an interval computed from the noisy measurements *before* post-processing that covers
the truth with probability ``level`` still does when widened to hold the integer answer (census
and spatial ``bound`` intervals are built that way, and the integer release keeps those
measurements); a parametric bootstrap stays a ``model`` interval when each replicate is made
whole the same way. Everything else gets no interval, with the reason.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import ReleaseError
from dpcube.release.base import ReleaseMetadata

#: The key of :attr:`ReleaseMetadata.report` recording that a release was made whole and how.
INTEGER_KEY = "integer"
#: The citation every integer release records.
TOPDOWN = (
    "Abowd et al., The 2020 Census Disclosure Avoidance System TopDown Algorithm, HDSR 2022: "
    "non-negative L2 fit, then L1 controlled rounding"
)
#: The most cells of the finest table of a data cube made whole (TopDown down a chain holds a
#: few arrays of this size).
MAX_FINEST_CELLS = 20_000_000
#: The most cells of a finest table that is not published, fitted by non-negative least squares
#: against every published cuboid (one product with every cuboid per step).
MAX_FITTED_CELLS = 500_000


def integer_metadata(metadata: ReleaseMetadata, **how: Any) -> ReleaseMetadata:
    """A copy of ``metadata`` recording, under ``report["integer"]``, that the release was made
    non-negative, whole and consistent, and how (``how``: the method's steps and solver). The
    release id stays: the integer release is the same release (the one the ledger charged),
    post-processed."""
    record = {
        "whole": True,
        "non_negative": True,
        "consistent": True,
        "method": TOPDOWN,
        "budget": "post-processing of the released figures: nothing charged",
        **how,
    }
    copied = copy.deepcopy(metadata)  # the new release shares nothing mutable with the old
    return replace(copied, report={**copied.report, INTEGER_KEY: record})


def is_integer(metadata: ReleaseMetadata) -> bool:
    """Whether a release's metadata records the integer post-processing."""
    return isinstance(metadata.report.get(INTEGER_KEY), dict)


def simplex_projection(
    values: NDArray[Any], groups: NDArray[np.int64], totals: NDArray[Any]
) -> NDArray[np.float64]:
    """The L2 projection of each group of ``values`` onto ``{x >= 0, sum x = totals[g]}``.

    Held, Wolfe and Crowder (1974); Duchi et al. (ICML 2008, Fig. 1): with the group's values
    sorted decreasing, ``u_1 >= u_2 >= ...``, ``rho = max{j : u_j - (sum_{i<=j} u_i - t) / j > 0}``
    and ``theta = (sum_{i<=rho} u_i - t) / rho``, the projection is ``max(v - theta, 0)``. A group
    whose total is 0 (or less) projects to zeros. Vectorised over the groups: one sort.

    >>> simplex_projection(np.array([3.0, -1.0, 1.0]), np.zeros(3, np.int64), np.array([3.0])).tolist()
    [2.5, 0.0, 0.5]
    >>> simplex_projection(np.array([1.0, 2.0, 5.0, -2.0]), np.array([0, 0, 1, 1]), np.array([4.0, 0.0])).tolist()
    [1.5, 2.5, 0.0, 0.0]
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    g = np.asarray(groups, dtype=np.int64).ravel()
    t = np.asarray(totals, dtype=np.float64).ravel()
    if v.size == 0:
        return v.copy()
    order = np.lexsort((-v, g))
    vs, gs = v[order], g[order]
    starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, len(gs)]))
    running = np.cumsum(vs)
    before = np.where(first > 0, running[np.maximum(first - 1, 0)], 0.0)
    cs = running - before
    rank = np.arange(len(vs)) - first + 1
    positive = vs - (cs - t[gs]) / rank > 0
    rho = np.bincount(gs, weights=positive, minlength=len(t)).astype(np.int64)
    # the condition holds on a prefix of each sorted group: its last true rank is rho
    at = np.zeros(len(t), dtype=np.float64)
    last = positive & (rank == rho[gs])
    at[gs[last]] = cs[last]
    theta = np.where(rho > 0, (at - t) / np.maximum(rho, 1), np.inf)
    out = np.maximum(v - theta[g], 0.0)
    out[t[g] <= 0] = 0.0
    return out


def controlled_round(
    values: NDArray[Any], groups: NDArray[np.int64], totals: NDArray[Any]
) -> NDArray[np.int64]:
    """Round each non-negative value down or up so that each group sums to its whole total.

    The L1 rounding problem under one sum constraint per group, ``min sum |x - v|`` over
    ``x in {floor v, ceil v}`` with ``sum_g x = totals[g]``, is solved exactly by the largest
    remainders: the floors, plus one for the ``totals[g] - sum floor`` cells of largest
    fractional part (ties by position). Each cell moves by less than 1. A total outside
    ``[sum floor, sum ceil]`` is refused.

    >>> controlled_round(np.array([0.4, 0.4, 1.2]), np.zeros(3, np.int64), np.array([2])).tolist()
    [1, 0, 1]
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    g = np.asarray(groups, dtype=np.int64).ravel()
    t = np.rint(np.asarray(totals, dtype=np.float64).ravel()).astype(np.int64)
    floor = np.floor(v + 1e-9).astype(np.int64)
    frac = np.clip(v - floor, 0.0, None)
    need = t - np.bincount(g, weights=floor, minlength=len(t)).astype(np.int64)
    size = np.bincount(g, minlength=len(t))
    if np.any(need < 0) or np.any(need > size):
        raise ReleaseError(
            "controlled rounding: a group's whole total is outside the sums of its floors and "
            "ceilings (the fitted values do not sum to their totals)"
        )
    order = np.lexsort((np.arange(len(v)), -frac, g))
    gs = g[order]
    starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]]) if len(gs) else np.zeros(0, np.int64)
    first = np.repeat(starts, np.diff(np.r_[starts, len(gs)]))
    rank = np.arange(len(gs)) - first
    up = np.zeros(len(v), dtype=np.int64)
    up[order] = rank < need[gs]
    return floor + up


def topdown_hierarchy(
    values: NDArray[Any],
    parent: NDArray[np.int64],
    level: NDArray[np.int64],
    root_total: float | None = None,
) -> NDArray[np.int64]:
    """TopDown on a tree of rows (each row a vector of figures, one column per category): the
    root's row is fitted (non-negative; summing to ``root_total`` when given, else to its own
    sum made whole) and rounded, then level by level each parent's children are projected per
    column onto ``{x >= 0, sum x = parent's whole figure}`` (:func:`simplex_projection`) and
    rounded under that sum (:func:`controlled_round`). Rows are ordered parents first (``level``
    1 is the root, ``parent`` -1 there). Every parent is the sum of its children, exactly.

    >>> topdown_hierarchy(np.array([[4.2], [3.6], [-0.4]]), np.array([-1, 0, 0]), np.array([1, 2, 2])).tolist()
    [[4], [4], [0]]
    """
    y = np.asarray(values, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    rows, cols = y.shape
    out = np.zeros((rows, cols), dtype=np.int64)
    roots = np.flatnonzero(np.asarray(level) == 1)
    if len(roots) != 1:
        raise ReleaseError(f"a hierarchy has one root; these rows have {len(roots)}")
    root = int(roots[0])
    total = float(np.sum(y[root])) if root_total is None else float(root_total)
    whole = max(0, int(np.rint(total)))
    fitted = simplex_projection(y[root], np.zeros(cols, np.int64), np.array([whole]))
    out[root] = controlled_round(fitted, np.zeros(cols, np.int64), np.array([whole]))
    for lv in range(2, int(np.max(level)) + 1):
        rows_at = np.flatnonzero(np.asarray(level) == lv)
        if not len(rows_at):
            continue
        parents = np.asarray(parent)[rows_at]
        # one group per (parent, column): the children's figures in that column
        group = (parents[:, None] * cols + np.arange(cols)[None, :]).ravel()
        ids, group = np.unique(group, return_inverse=True)
        totals = out.ravel()[ids]
        fit = simplex_projection(y[rows_at].ravel(), group, totals)
        out[rows_at] = controlled_round(fit, group, totals).reshape(len(rows_at), cols)
    return out


def topdown_blocks(values: NDArray[Any], branching: int = 4) -> NDArray[np.int64]:
    """TopDown on a tree of blocks over a sequence: the values (in the order given, which should
    keep neighbours near each other) are the leaves; each node above sums ``branching``
    consecutive nodes of the level below (the last block of a level may hold fewer), up to the
    total. Every node's figure is the sum of the released values under it (an unbiased estimate
    of its true count). The total is made the nearest whole number >= 0; then level by level
    each node's children are projected in L2 onto the non-negative figures summing to the
    node's whole figure (:func:`simplex_projection`) and rounded under it
    (:func:`controlled_round`).

    Why a tree and not one sum over all the values: the projection raises negative figures to
    0 and lowers their siblings by a common shift, so it moves mass between siblings only. Under
    one total, the positive noise of every empty cell would be kept and paid for by every
    populated cell (on a quadtree of Gowalla check-ins, 65,536 leaves, that multiplied the
    error of rectangle counts by 27); in a tree an empty block's figure is its noise summed,
    whose positive part is of the order of its square root, and mass moves only inside blocks.
    The total moves by at most 1/2, each node by its projection's shift plus less than 1.

    >>> topdown_blocks(np.array([2.6, -1.0, 0.7, 3.4, -0.5, 0.2]), branching=2).tolist()
    [1, 0, 1, 3, 0, 0]
    """
    v = np.asarray(values, dtype=np.float64)
    flat = v.ravel()
    sums = [flat]
    while len(sums[-1]) > 1:
        below = sums[-1]
        sums.append(np.add.reduceat(below, np.arange(0, len(below), branching)))
    whole = np.array([max(0, int(np.rint(float(np.sum(flat)))))], dtype=np.int64)
    for level in reversed(sums[:-1]):
        group = np.arange(len(level), dtype=np.int64) // branching
        fitted = simplex_projection(level, group, whole)
        whole = controlled_round(fitted, group, whole)
    return whole.reshape(v.shape)


def morton_order(rows: NDArray[Any], cols: NDArray[Any]) -> NDArray[np.int64]:
    """The order of points (row, col) along the Z-order curve (bits of the two interleaved), so
    that consecutive blocks of 4, 16, ... points are the quadrants of a quadtree.

    >>> morton_order(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])).tolist()
    [0, 1, 2, 3]
    """
    r = np.asarray(rows, dtype=np.int64)
    c = np.asarray(cols, dtype=np.int64)
    key = np.zeros(len(r), dtype=np.int64)
    for bit in range(31):
        key |= ((c >> bit) & 1) << (2 * bit)
        key |= ((r >> bit) & 1) << (2 * bit + 1)
    return np.argsort(key, kind="stable")


def nonnegative_least_squares(
    matvec: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    rmatvec: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    target: NDArray[np.float64],
    start: NDArray[np.float64],
    max_iterations: int = 5000,
    tolerance: float = 1e-4,
) -> tuple[NDArray[np.float64], str]:
    """``argmin_{x >= 0} ||A x - target||^2 / 2`` for an operator ``A`` given by its products,
    by accelerated projected gradient (FISTA: Beck and Teboulle, SIAM J. Imaging Sci. 2, 2009,
    with the adaptive restart of O'Donoghue and Candes, Found. Comput. Math. 15, 2015), from
    ``start`` clipped at 0, with the step ``1 / L``, ``L`` bounding ``||A^T A||`` by power
    iteration. One product each way per step, so a cube of 10^5 cells and 32 cuboids takes
    seconds. The problem is convex; the iteration stops when the projected gradient's largest
    entry is below ``tolerance`` times the target's scale (a point within that of the
    optimality conditions), or after ``max_iterations``. Returns the fit and a status line.

    >>> a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> x, _ = nonnegative_least_squares(a.dot, a.T.dot, np.array([3.0, -1.0, 2.0]), np.zeros(2))
    >>> np.round(x, 4).tolist()
    [2.5, 0.0]
    """
    b = np.asarray(target, dtype=np.float64)
    x = np.clip(np.asarray(start, dtype=np.float64), 0.0, None)
    # The power iteration starts from all ones: A's entries are non-negative (sums of cells), so
    # A^T A's top eigenvector is non-negative (Perron-Frobenius) and not orthogonal to the start.
    v = np.ones(x.shape)
    for _ in range(30):
        v = rmatvec(matvec(v))
        v /= max(float(np.linalg.norm(v)), 1e-300)
    lipschitz = 1.05 * float(np.linalg.norm(rmatvec(matvec(v)))) + 1e-12
    step = 1.0 / lipschitz
    scale = max(1.0, float(np.abs(rmatvec(b)).max(initial=0.0)))
    y, t = x.copy(), 1.0
    status = f"stopped after {max_iterations} iterations"
    for iteration in range(1, max_iterations + 1):
        gradient = rmatvec(matvec(y) - b)
        moved = np.maximum(y - step * gradient, 0.0)
        # optimality: the projected gradient (zero where x = 0 and the gradient pushes below 0)
        g = rmatvec(matvec(moved) - b) if iteration % 25 == 0 else None
        if g is not None:
            projected = np.where(moved > 0, g, np.minimum(g, 0.0))
            if float(np.abs(projected).max(initial=0.0)) <= tolerance * scale:
                x = moved
                status = f"converged in {iteration} iterations"
                break
        if float(np.dot(moved - x, y - moved)) > 0:  # the momentum points uphill: restart
            t = 1.0
            y = moved.copy()
        else:
            t_next = (1.0 + np.sqrt(1.0 + 4.0 * t * t)) / 2.0
            y = moved + ((t - 1.0) / t_next) * (moved - x)
            t = t_next
        x = moved
    return x, "FISTA projected gradient with adaptive restart, " + status


def rake(
    table: NDArray[Any], margins: dict[int, NDArray[Any]], sweeps: int = 50
) -> NDArray[np.float64]:
    """Iterative proportional fitting (Deming and Stephan, Ann. Math. Stat. 11, 1940): the
    non-negative ``table`` scaled, axis by axis, so that its one-way sums approach ``margins``
    (``{axis: target sums}``, negative targets taken as 0); zeros stay zeros and every cell
    stays non-negative. Where the margins agree on their total and a table with them exists
    among those with the same zeros, the sweeps converge to it (Csiszar, Ann. Probab. 3, 1975);
    else they stop after ``sweeps``, near a compromise.

    >>> rake(np.array([[1.0, 1.0], [1.0, 1.0]]), {0: np.array([3.0, 1.0]), 1: np.array([2.0, 2.0])}).tolist()
    [[1.5, 1.5], [0.5, 0.5]]
    """
    out = np.clip(np.asarray(table, dtype=np.float64), 0.0, None).copy()
    for _ in range(sweeps):
        for axis, target in margins.items():
            others = tuple(k for k in range(out.ndim) if k != axis)
            current = out.sum(axis=others)
            wanted = np.clip(np.asarray(target, dtype=np.float64), 0.0, None)
            factor = np.divide(wanted, current, out=np.zeros_like(current), where=current > 0)
            shape = [1] * out.ndim
            shape[axis] = -1
            out *= factor.reshape(shape)
    return out


def topdown_chain(levels: Sequence[NDArray[Any]]) -> NDArray[np.int64]:
    """TopDown down a chain of nested tables: ``levels[k]`` is a table over the first ``k`` axes
    of the finest one (``levels[0]`` the grand total, ``levels[-1]`` the finest table), each
    cell of level ``k`` the parent of the cells of level ``k + 1`` that share its first ``k``
    indices (the chain of cuboids () < (a) < (a, b) < ... of a data cube is such a hierarchy).
    The total is made the nearest whole number >= 0; then level by level each parent's children
    are projected onto the non-negative figures summing to the parent's whole figure
    (:func:`simplex_projection`) and rounded under it (:func:`controlled_round`). Returns the
    whole finest table: every level is its roll-up, and each cell of every level lies within 1
    of its projection.

    >>> topdown_chain([np.array(5.2), np.array([3.6, 1.6]), np.array([[2.5, 1.1], [-0.5, 2.1]])]).tolist()
    [[3, 1], [0, 1]]
    """
    parent = np.array([max(0, int(np.rint(float(np.sum(levels[0])))))], dtype=np.int64)
    for table in levels[1:]:
        values = np.asarray(table, dtype=np.float64)
        group = np.repeat(np.arange(parent.size), values.size // max(parent.size, 1))
        fitted = simplex_projection(values.ravel(), group, parent)
        parent = controlled_round(fitted, group, parent)
    return parent.reshape(np.shape(levels[-1]))
