"""Trees over the grid, stored level by level, and what is done with them.

- :func:`binary_tree`: a binary partition with alternating axes (HTF Algorithm 2, corrected here to
  count every node and to handle nodes that cannot be split, and the kd-tree); the split index of
  every node of a level comes from one call of a ``choose`` function, so the whole level is
  vectorised;
- :func:`quad_tree`: the data-independent quadtree (midpoint splits, fanout up to 4);
- :func:`htf_perturb`: HTF Algorithm 3 (corrected here: childless nodes, a per-path budget, both
  stop tests), with a ledger of every draw;
- :func:`consistent_leaves`: least-squares consistency of noisy node counts (Hay et al. 2010,
  generalised by Cormode et al. 2012), in the exact two-pass form for any fanout and budgets.

A node is a half-open rectangle ``(r0, r1, c0, c1)``; ``Level.parent`` indexes the previous level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from dpcube.mechanisms.spatial._common import COL, ROW
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace
from dpcube.release.cells import prefix_sums

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


def rect_sums(prefix: IntArray, rects: IntArray) -> IntArray:
    """Exact counts of half-open rectangles from zero-padded 2-D prefix sums."""
    r0, r1, c0, c1 = (rects[:, i] for i in range(4))
    return np.asarray(
        prefix[r1, c1] - prefix[r0, c1] - prefix[r1, c0] + prefix[r0, c0], dtype=np.int64
    )


@dataclass
class Level:
    rects: IntArray
    counts: IntArray
    parent: IntArray


@dataclass
class Tree:
    """Levels of nodes, root first; ``height`` is the nominal height h of the root."""

    levels: list[Level]
    height: int
    splits: list[IntArray] = field(default_factory=list)

    def child_counts(self, depth: int) -> IntArray:
        """Number of children of each node at ``depth``."""
        m = len(self.levels[depth].rects)
        if depth + 1 >= len(self.levels):
            return np.zeros(m, dtype=np.int64)
        return np.bincount(self.levels[depth + 1].parent, minlength=m).astype(np.int64)

    def leaves(self) -> tuple[IntArray, IntArray]:
        """(depth, index) of every childless node."""
        depths, idx = [], []
        for d in range(len(self.levels)):
            i = np.flatnonzero(self.child_counts(d) == 0)
            depths.append(np.full(i.size, d))
            idx.append(i)
        return np.concatenate(depths), np.concatenate(idx)


Chooser = Callable[[IntArray, IntArray, IntArray, IntArray], IntArray]


def axis_for_height(height: int, even_axis: int = ROW) -> int:
    """The split axis of a node of this height: ``even_axis`` when even (default rows, as in HTF's
    prose; its Algorithm 2 listing says columns)."""
    return even_axis if height % 2 == 0 else 1 - even_axis


def binary_tree(F: IntArray, h: int, choose: Chooser, even_axis: int = ROW) -> Tree:
    """HTF Algorithm 2 (corrected): split every node down to height 0 with alternating axes.

    ``choose(rects, axes, lengths, widths)`` returns the split index k in [1, L-1] of each node.
    A node of length 1 along its axis is split along the other one; a 1x1 node has no children
    (the listing leaves such nodes undefined). Every node's exact count is kept (never released;
    the listing computes it only after its height-0 return).

    >>> F = np.arange(16).reshape(4, 4)
    >>> t = binary_tree(F, 2, lambda r, a, L, w: L // 2)
    >>> [len(l.rects) for l in t.levels], t.levels[1].rects.tolist()
    ([1, 2, 4], [[0, 2, 0, 4], [2, 4, 0, 4]])
    """
    N, M = F.shape
    prefix = prefix_sums(np.asarray(F, dtype=np.int64))
    root = np.array([[0, N, 0, M]], dtype=np.int64)
    tree = Tree([Level(root, rect_sums(prefix, root), np.array([-1]))], h)
    for d in range(h):
        rects = tree.levels[-1].rects
        ext = np.stack([rects[:, 1] - rects[:, 0], rects[:, 3] - rects[:, 2]], axis=1)
        axes = np.full(len(rects), axis_for_height(h - d, even_axis), dtype=np.int64)
        short = ext[np.arange(len(rects)), axes] < 2
        axes[short] = 1 - axes[short]
        lengths = ext[np.arange(len(rects)), axes]
        act = np.flatnonzero(lengths >= 2)
        if act.size == 0:
            break
        a, L = axes[act], lengths[act]
        widths = ext[act, 1 - a]
        k = np.asarray(choose(rects[act], a, L, widths), dtype=np.int64)
        if np.any((k < 1) | (k > L - 1)):
            raise AssertionError("a split index left [1, L-1]")
        tree.splits.append(k)
        first, second = rects[act].copy(), rects[act].copy()
        cut_rows = a == ROW
        first[cut_rows, 1] = rects[act][cut_rows, 0] + k[cut_rows]
        second[cut_rows, 0] = first[cut_rows, 1]
        cut_cols = a == COL
        first[cut_cols, 3] = rects[act][cut_cols, 2] + k[cut_cols]
        second[cut_cols, 2] = first[cut_cols, 3]
        children = np.stack([first, second], axis=1).reshape(-1, 4)
        tree.levels.append(Level(children, rect_sums(prefix, children), np.repeat(act, 2)))
    return tree


def quad_tree(F: IntArray, k: int) -> Tree:
    """A quadtree of height k: each node split at its midpoints into up to 4 children.

    >>> t = quad_tree(np.ones((4, 2), dtype=np.int64), 2)
    >>> [len(l.rects) for l in t.levels], t.levels[2].counts.tolist()
    ([1, 4, 8], [1, 1, 1, 1, 1, 1, 1, 1])
    """
    N, M = F.shape
    prefix = prefix_sums(np.asarray(F, dtype=np.int64))
    root = np.array([[0, N, 0, M]], dtype=np.int64)
    tree = Tree([Level(root, rect_sums(prefix, root), np.array([-1]))], k)
    for _ in range(k):
        rects = tree.levels[-1].rects
        splittable = np.flatnonzero(
            (rects[:, 1] - rects[:, 0] >= 2) | (rects[:, 3] - rects[:, 2] >= 2)
        )
        children, parent = quad_children(rects[splittable])
        if children.size == 0:
            break
        tree.levels.append(Level(children, rect_sums(prefix, children), splittable[parent]))
    return tree


def quad_children(rects: IntArray) -> tuple[IntArray, IntArray]:
    """The midpoint children of each rectangle (up to 4: an axis of length 1 is not cut) and the
    index of each child's parent in ``rects``, children in parent order.

    >>> children, parent = quad_children(np.array([[0, 4, 0, 1]]))
    >>> children.tolist(), parent.tolist()
    ([[0, 2, 0, 1], [2, 4, 0, 1]], [0, 0])
    """
    r0, r1, c0, c1 = (rects[:, i] for i in range(4))
    rm = np.where(r1 - r0 >= 2, r0 + (r1 - r0) // 2, r1)
    cm = np.where(c1 - c0 >= 2, c0 + (c1 - c0) // 2, c1)
    quads = np.stack(
        [
            np.stack([r0, rm, c0, cm], axis=1),
            np.stack([r0, rm, cm, c1], axis=1),
            np.stack([rm, r1, c0, cm], axis=1),
            np.stack([rm, r1, cm, c1], axis=1),
        ],
        axis=1,
    )
    keep = (quads[:, :, 1] > quads[:, :, 0]) & (quads[:, :, 3] > quads[:, :, 2])
    parent = np.repeat(np.arange(len(rects)), 4).reshape(-1, 4)[keep]
    return quads[keep], parent


@dataclass
class Draw:
    """One group of count draws of Algorithm 3: nodes at one depth, one epsilon each."""

    depth: int
    kind: str  # "decision", "pruned" or "childless"
    nodes: IntArray
    epsilon: float
    values: IntArray


@dataclass
class Perturbed:
    """Released leaves of Algorithm 3 and the ledger of every draw."""

    rects: IntArray
    counts: IntArray
    variances: FloatArray
    path_data_epsilon: FloatArray
    draws: list[Draw]


def htf_perturb(
    tree: Tree,
    shares: FloatArray,
    eps_data: float,
    theta_count: float,
    theta_cells: float,
    source: RandomSource,
    extent_first: bool = False,
) -> Perturbed:
    """HTF Algorithm 3 (corrected): geometric decision counts, pruning, re-draw with the rest.

    ``shares[i]`` is the budget of a node of height i (Eq. 17 over ``eps_data``). At depth d every
    live node has spent the same ``accu`` on its path, so each group is one sampler call.

    - a childless node releases ``count + DLap(1 / (eps_data - accu))`` (the listing would draw
      ``Lap(1/0)`` at height 0);
    - an internal node draws its decision count with ``shares[h - d]``; if the noisy count is
      <= theta_count or it has < theta_cells cells (both tests), it is pruned and releases
      ``count + DLap(1 / (eps_data - accu - share))`` (a fresh draw; the decision is discarded);
      else its children are visited with the larger ``accu`` (per path: siblings compose in
      parallel, so the listing's global accumulator would overcharge).

    With ``extent_first`` a node with < theta_cells cells skips the decision draw (the extent is
    public) and releases with all it has left.
    """
    h = tree.height
    rects: list[IntArray] = []
    counts: list[IntArray] = []
    variances: list[FloatArray] = []
    spent: list[FloatArray] = []
    draws: list[Draw] = []

    def release(depth: int, idx: IntArray, eps: float, accu: float, kind: str) -> None:
        if idx.size == 0:
            return
        level = tree.levels[depth]
        noisy, draw = add_discrete_laplace(level.counts[idx], 1.0 / eps, source)
        rects.append(level.rects[idx])
        counts.append(noisy)
        variances.append(np.broadcast_to(draw.variance, idx.shape).astype(np.float64))
        spent.append(np.full(idx.size, accu + eps))
        draws.append(Draw(depth, kind, idx, eps, noisy))

    live = np.array([0])
    accu = 0.0
    for depth in range(len(tree.levels)):
        if live.size == 0:
            break
        level = tree.levels[depth]
        kids = tree.child_counts(depth)[live]
        release(depth, live[kids == 0], eps_data - accu, accu, "childless")
        internal = live[kids > 0]
        cells = (level.rects[internal, 1] - level.rects[internal, 0]) * (
            level.rects[internal, 3] - level.rects[internal, 2]
        )
        if extent_first:
            release(depth, internal[cells < theta_cells], eps_data - accu, accu, "childless")
            internal = internal[cells >= theta_cells]
            cells = cells[cells >= theta_cells]
        share = float(shares[h - depth])
        decision = np.zeros(0, dtype=np.int64)
        if internal.size:
            decision, _ = add_discrete_laplace(level.counts[internal], 1.0 / share, source)
            draws.append(Draw(depth, "decision", internal, share, decision))
        accu_next = accu + share
        prune = (decision <= theta_count) | (cells < theta_cells)
        release(depth, internal[prune], eps_data - accu_next, accu_next, "pruned")
        keep = internal[~prune]
        if depth + 1 < len(tree.levels):
            live = np.flatnonzero(np.isin(tree.levels[depth + 1].parent, keep))
        else:
            live = np.zeros(0, dtype=np.int64)
        accu = accu_next
    return Perturbed(
        np.concatenate(rects),
        np.concatenate(counts),
        np.concatenate(variances),
        np.concatenate(spent),
        draws,
    )


def consistent_tree(
    tree: Tree, noisy: list[FloatArray], variances: list[FloatArray]
) -> list[FloatArray]:
    """Least-squares consistent estimates of every node, level by level.

    Every node v has an independent noisy count y_v with variance s_v. Bottom-up, the best
    estimate of v from its subtree is the inverse-variance mean of y_v and the sum of its
    children's estimates (variance: the sum of theirs); top-down, the difference between a
    parent's final estimate and the sum of its children's subtree estimates is shared in
    proportion to their variances. This is the exact GLS solution on a tree (the two passes of
    Hay et al. 2010 / Cormode et al. 2012, who write it for a fixed fanout f, where the shares
    are 1/f); parents then equal the sum of their children exactly (up to float rounding).
    """
    depth_count = len(tree.levels)
    z = [np.asarray(y, dtype=np.float64).copy() for y in noisy]
    var = [np.asarray(s, dtype=np.float64).copy() for s in variances]
    for d in range(depth_count - 2, -1, -1):
        m = len(tree.levels[d].rects)
        parent = tree.levels[d + 1].parent
        has = tree.child_counts(d) > 0
        sz = np.bincount(parent, weights=z[d + 1], minlength=m)
        sv = np.bincount(parent, weights=var[d + 1], minlength=m)
        w_own = 1.0 / var[d][has]
        w_kids = 1.0 / sv[has]
        z[d][has] = (z[d][has] * w_own + sz[has] * w_kids) / (w_own + w_kids)
        var[d][has] = 1.0 / (w_own + w_kids)
    beta = [z[0].copy()]
    for d in range(1, depth_count):
        m = len(tree.levels[d - 1].rects)
        parent = tree.levels[d].parent
        sz = np.bincount(parent, weights=z[d], minlength=m)
        sv = np.bincount(parent, weights=var[d], minlength=m)
        beta.append(z[d] + var[d] / sv[parent] * (beta[d - 1][parent] - sz[parent]))
    return beta


def consistent_leaves(
    tree: Tree, noisy: list[FloatArray], variances: list[FloatArray]
) -> tuple[IntArray, FloatArray]:
    """The childless nodes (the released leaves) and their consistent estimates."""
    beta = consistent_tree(tree, noisy, variances)
    depths, idx = tree.leaves()
    rects = np.concatenate(
        [tree.levels[d].rects[idx[depths == d]] for d in range(len(tree.levels))]
    )
    values = np.concatenate([beta[d][idx[depths == d]] for d in range(len(tree.levels))])
    return rects, values
