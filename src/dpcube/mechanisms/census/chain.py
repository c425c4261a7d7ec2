"""M_CDP: the chain of T_DP, its relations, and the exact chain solvers of Model 3.

Fioretto, Van Hentenryck, Zhu, Artificial Intelligence 296 (2021), Sec. 9.2, Lemma 7, Eq. 8,
Theorem 5.

The chain is the post-order of T_DP: subtree s = 1 (children in canonical order, each parent right
after its subtree), then s = 2, ..., s = k, then the dummy root. The chain value of a node at a
T_DP level is the running sum of true counts over that level in chain (size-major) order.

Relations between consecutive nodes (corrected here, not Lemma 7's literal case split):
EQ iff x_{i-1} is a child of x_i, else GE. The literal rule ("same level => GE, else EQ") forces
n(first child, s) = 0 and is suboptimal; ``rule="literal"`` exists only for the regression test.

Solvers of Model 3 (C6-C10):

- :func:`chain_dp`: Eq. 8, prefix-minimum DP over integer tables (the paper's method); O(n d).
- :func:`chain_isotonic`: merge each EQ block into one weighted variable; Model 3 is then a
  weighted integer isotonic regression with 0 <= y <= G and the last block fixed to G, solved
  exactly by weighted PAVA, clipping and rounding (an exact cross-check of ours; tested equal to
  :func:`chain_dp`). Vectorised over levels, used at census scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpcube.mechanisms.census.hierarchy import RegionHierarchy

EQ, GE = 1, 0


@dataclass(frozen=True)
class Chain:
    """The explicit chain (small instances): node i is region ``region[i]``, size ``size[i]``
    (1-based) at T_DP depth ``depth[i]``; the last node is the dummy root (region -1, depth 1).
    ``relation[i]`` relates node i to node i-1 (``relation[0]`` is unused)."""

    region: NDArray[np.int64]
    size: NDArray[np.int64]
    depth: NDArray[np.int64]
    relation: NDArray[np.int64]


def build_chain(h: RegionHierarchy, k: int, rule: str = "corrected") -> Chain:
    """Post-order chain of T_DP with EQ/GE relations.

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> c = build_chain(h, 3)
    >>> ["EQ" if r else "GE" for r in c.relation[1:]]
    ['GE', 'EQ', 'GE', 'GE', 'EQ', 'GE', 'GE', 'EQ', 'EQ']
    """
    kids: list[list[int]] = [[] for _ in range(h.size)]
    for r in range(1, h.size):
        kids[int(h.parent[r])].append(r)
    post: list[int] = []

    def visit(r: int) -> None:
        for c in kids[r]:
            visit(c)
        post.append(r)

    visit(0)
    region = [r for _ in range(k) for r in post] + [-1]
    size = [s + 1 for s in range(k) for _ in post] + [0]
    depth = [int(h.level[r]) + 1 if r >= 0 else 1 for r in region]
    rel = [GE]
    for i in range(1, len(region)):
        if rule == "corrected":
            prev, cur = region[i - 1], region[i]
            is_child = (cur == -1 and prev == 0) or (
                cur >= 0
                and prev >= 0
                and int(h.parent[prev]) == cur
                and depth[i - 1] == depth[i] + 1
            )
            rel.append(EQ if is_child else GE)
        elif rule == "literal":
            rel.append(GE if depth[i - 1] == depth[i] else EQ)
        else:
            raise ValueError(f"rule must be 'corrected' or 'literal', got {rule!r}")
    return Chain(np.array(region), np.array(size), np.array(depth), np.array(rel))


def level_chain_values(h: RegionHierarchy, counts: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    """Per region level l, the running sums in size-major order as a (k, |R_l|) array.

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> n = h.aggregate(np.array([[2, 0, 1], [1, 1, 1]]))
    >>> [v.tolist() for v in level_chain_values(h, n)]
    [[[3], [4], [6]], [[2, 3], [3, 4], [5, 6]]]
    """
    out = []
    for level in range(1, h.levels + 1):
        block = np.asarray(counts[h.level_slice(level)]).T
        out.append(np.cumsum(block.ravel()).reshape(block.shape))
    return out


def chain_vector(
    h: RegionHierarchy, chain: Chain, levels: list[NDArray[np.int64]] | list[NDArray[np.float64]]
) -> NDArray[np.float64]:
    """The chain values in chain order (without the root) from per-level arrays."""
    pos = np.asarray(chain.region[:-1]) - h.level_start[h.level[chain.region[:-1]] - 1]
    return np.array(
        [
            levels[int(h.level[r]) - 1][s - 1, p]
            for r, s, p in zip(chain.region[:-1], chain.size[:-1], pos, strict=True)
        ],
        dtype=np.float64,
    )


def chain_dp(
    chain: Chain, noisy: NDArray[np.float64], groups: int
) -> tuple[NDArray[np.int64], float]:
    """Eq. 8 on the full domain [0, G]: C_i = (v - c~_i)^2 + (C_{i-1} if EQ else prefix-min C_{i-1}).

    ``noisy`` has one value per chain node except the root. Returns (values without the root,
    objective). Top-down: v_n = G; v_{i-1} = v_i if EQ else min(v_i, argmin C_{i-1}).

    Golden example (worked by hand):

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> v, obj = chain_dp(build_chain(h, 3), np.array([2, 4, 2, 3, 3, 5, 5, 7, 6.0]), 6)
    >>> v.tolist(), obj
    ([2, 3, 3, 3, 4, 4, 5, 6, 6], 5.0)
    """
    G = int(groups)
    n = len(chain.region)
    v = np.arange(G + 1, dtype=np.float64)
    argmins = np.zeros(n, dtype=np.int64)
    prev = (v - noisy[0]) ** 2
    argmins[0] = int(np.argmin(prev))
    for i in range(1, n):
        psi = prev if chain.relation[i] == EQ else np.minimum.accumulate(prev)
        cur = psi if i == n - 1 else (v - noisy[i]) ** 2 + psi
        argmins[i] = int(np.argmin(cur))
        prev = cur
    objective = float(prev[G])
    out = np.zeros(n, dtype=np.int64)
    out[-1] = G
    for i in range(n - 1, 0, -1):
        out[i - 1] = out[i] if chain.relation[i] == EQ else min(out[i], argmins[i - 1])
    return out[:-1], objective


def last_leaf(h: RegionHierarchy) -> NDArray[np.int64]:
    """For every region, the index (within the leaf level) of its last leaf descendant."""
    out = np.zeros(h.size, dtype=np.int64)
    leaves = h.leaves
    out[leaves] = np.arange(leaves.stop - leaves.start)
    for level in range(h.levels - 1, 0, -1):
        sl = h.level_slice(level)
        child = h.level_slice(level + 1)
        par = h.children_of_level(level)
        last = np.zeros(sl.stop - sl.start, dtype=np.int64)
        np.maximum.at(last, par, out[child])
        out[sl] = last
    return out


def chain_isotonic(
    h: RegionHierarchy, noisy_levels: list[NDArray[np.float64]], groups: int
) -> list[NDArray[np.int64]]:
    """Exact solution of Model 3 by EQ-block merging + weighted PAVA + clip + round.

    ``noisy_levels[l-1]`` is the noisy chain of level l as a (k, |R_l|) array. Every node (a, s)
    joins the block of leaf (s, last leaf of a); block weights are member counts and targets the
    member means. The last block holds the root and is fixed to G.

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> noisy = [np.array([[2.0], [4], [6]]), np.array([[2.0, 4], [3, 3], [5, 7]])]
    >>> [v.tolist() for v in chain_isotonic(h, noisy, 6)]
    [[[3], [4], [6]], [[2, 3], [3, 4], [5, 6]]]
    """
    from scipy.optimize import isotonic_regression

    G = int(groups)
    L = h.levels
    k = noisy_levels[0].shape[0]
    m_leaf = h.level_sizes[-1]
    last = last_leaf(h)
    total = np.array(noisy_levels[L - 1], dtype=np.float64).copy()
    weight = np.ones(m_leaf)
    for level in range(1, L):
        idx = last[h.level_slice(level)]
        np.add.at(total.T, idx, np.asarray(noisy_levels[level - 1], dtype=np.float64).T)
        np.add.at(weight, idx, 1.0)
    y = (total / weight[None, :]).ravel()
    wt = np.tile(weight, k)
    fit = np.empty_like(y)
    if y.size > 1:
        fit[:-1] = isotonic_regression(y[:-1], weights=wt[:-1], increasing=True).x
    fit[-1] = G
    sol = np.rint(np.clip(fit, 0, G)).astype(np.int64).reshape(k, m_leaf)
    return [sol[:, last[h.level_slice(level)]] for level in range(1, L + 1)]


def chain_objective(
    levels_hat: list[NDArray[np.int64]], noisy_levels: list[NDArray[np.float64]]
) -> float:
    """Model 3's objective C6 over every non-root chain node."""
    return float(
        sum(
            np.sum((np.asarray(a, np.float64) - b) ** 2)
            for a, b in zip(levels_hat, noisy_levels, strict=True)
        )
    )


def counts_from_levels(
    h: RegionHierarchy, levels_hat: list[NDArray[np.int64]]
) -> NDArray[np.int64]:
    """n^ from chain values: per level, consecutive differences in chain order (0 before the first).

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> counts_from_levels(h, [np.array([[3], [4], [6]]), np.array([[2, 3], [3, 4], [5, 6]])]).tolist()
    [[3, 1, 2], [2, 0, 1], [1, 1, 1]]
    """
    k = levels_hat[0].shape[0]
    out = np.zeros((h.size, k), dtype=np.int64)
    for level, c in enumerate(levels_hat, start=1):
        flat = np.asarray(c, dtype=np.int64).ravel()
        out[h.level_slice(level)] = np.diff(flat, prepend=0).reshape(c.shape).T
    return out
