"""M_DP: the exact tree dynamic program of Model 1 with Algorithm 1's slope merge.

Fioretto, Van Hentenryck, Zhu, Artificial Intelligence 296 (2021), Secs. 6-7, Eq. 4a-4d, Lemma 5,
Theorem 3, Algorithm 1.

The DP tree T_DP has a dummy root fixed to G whose children are the national nodes x_s^{r0},
s = 1..k; below each, subtree s mirrors the region tree. Each node x gets a cost table
C_x(v) = (v - n~_x)^2 + Psi_x(v) over an integer interval D_x (Eq. 4a), where Psi_x is the
min-plus convolution of its children's tables (Eq. 4b-4d). Tables are discretely convex
(Lemma 5), so the convolution is Algorithm 1's greedy merge of the children's sorted slopes:
Psi_x(sum_y lo_y + t) = sum_y C_y(lo_y) + (sum of the t smallest child slopes). This module
does that merge for every node of a level at once (a segmented sort of all slopes), so the cost
is O(k |R| d log(c d)) as in Theorem 4, in vectorised numpy.

Domains (the paper's text lost the window; this one is ours): D_x = [round(n~_x) - w, round(n~_x) +
w] intersected with [0, G] and with the children's reachable range, w = ceil(3 sigma). A solution
value on an artificial window bound (neither 0, G nor a bound forced by the children) may be
suboptimal, so the solver doubles w and solves again until no value touches one; by the exchange
argument of separable convex flows, a box-restricted optimum that touches no box bound is a global
optimum. ``half_width=None`` uses the full domain [0, G].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import DataError
from dpcube.mechanisms.census.hierarchy import RegionHierarchy

INF = np.inf
#: Cells (nodes x domain width) processed per chunk of sizes (bounds the memory of one pass).
CHUNK_CELLS = 400_000_000


# ------------------------------------------------------------------------------------------------
# Small reference pieces (used by the tests and to explain the vectorised solver)
# ------------------------------------------------------------------------------------------------


def min_plus(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """Brute-force min-plus convolution of two tables on [0, len): (a * b)(v) = min a(i) + b(v-i).

    >>> min_plus(np.array([0.0, 1.0]), np.array([5.0, 0.0])).tolist()
    [5.0, 0.0, 1.0]
    """
    out = np.full(len(a) + len(b) - 1, INF)
    for i, x in enumerate(a):
        out[i : i + len(b)] = np.minimum(out[i : i + len(b)], x + b)
    return out


def merge_convex(tables: list[tuple[int, NDArray[np.float64]]]) -> tuple[int, NDArray[np.float64]]:
    """Min-plus convolution of discretely convex tables by Algorithm 1's slope merge.

    Each table is ``(lo, values)`` with ``values[j] = C(lo + j)`` finite and convex. The result
    starts at ``sum lo`` with ``sum C(lo)`` and adds the merged (sorted) forward differences.

    >>> merge_convex([(0, np.array([1.0, 0.0, 1.0])), (2, np.array([0.0, 4.0]))])
    (2, array([1., 0., 1., 5.]))
    """
    lo = sum(t[0] for t in tables)
    base = float(sum(t[1][0] for t in tables))
    slopes = np.sort(np.concatenate([np.diff(t[1]) for t in tables]), kind="stable")
    return lo, np.concatenate([[base], base + np.cumsum(slopes)])


# ------------------------------------------------------------------------------------------------
# The vectorised solver
# ------------------------------------------------------------------------------------------------


def noise_half_width(alpha: float, c: float = 3.0) -> int:
    """w = ceil(c sigma), sigma = sqrt(2 alpha) / (1 - alpha), the double-geometric std (Sec. 3).

    >>> noise_half_width(math.exp(-1.0 / 6))
    26
    """
    return max(1, math.ceil(c * math.sqrt(2 * alpha) / (1 - alpha)))


def tail_half_width(alpha: float, nodes: int, miss: float = 0.05) -> int:
    """Smallest w with nodes * P(|Z| > w) <= miss for double-geometric Z (pmf of Sec. 3).

    P(|Z| >= w + 1) = 2 alpha^(w+1) / (1 + alpha). With w = ceil(3 sigma) alone, about 1% of
    3.2M census nodes have noise beyond the window and every such node forces a widening round;
    this bound makes a widening round rare (it still happens when needed, keeping exactness).

    >>> tail_half_width(math.exp(-1.0 / 6), 3_200_000) > noise_half_width(math.exp(-1.0 / 6))
    True
    """
    need = math.log(2 * max(nodes, 1) / (miss * (1 + alpha))) / -math.log(alpha)
    return max(noise_half_width(alpha), math.ceil(need) - 1)


def segment_argsort(segments: NDArray[np.int64], values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Order that sorts by (segment, value). One int64 argsort when the values are integers."""
    if values.size == 0:
        return np.zeros(0, dtype=np.int64)
    vmin, vmax = float(values.min()), float(values.max())
    span = vmax - vmin + 1
    nseg = int(segments.max()) + 1
    if np.isfinite(span) and span * nseg < 2**62 and np.array_equal(values, np.rint(values)):
        key = segments * np.int64(span) + (values - vmin).astype(np.int64)
        return np.argsort(key)
    return np.lexsort((values, segments))


@dataclass
class _Level:
    """Cost tables of one level (regions x sizes of a chunk) and what the top-down pass needs."""

    lo: NDArray[np.int64]  # (m, kc) first domain value
    length: NDArray[np.int64]  # (m, kc) number of finite entries
    table: NDArray[np.float64] | None  # (m, kc, D); None for closed-form leaves
    art_lo: NDArray[np.bool_]
    art_hi: NDArray[np.bool_]
    merge: dict[str, Any] = field(default_factory=dict)


def _own_window(
    noisy: NDArray[np.float64], w: int | None, G: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    if w is None:
        return np.zeros(noisy.shape, np.int64), np.full(noisy.shape, G, np.int64)
    c = np.rint(noisy).astype(np.int64)
    return np.clip(c - w, 0, G), np.clip(c + w, 0, G)


def _leaf_level(
    noisy: NDArray[np.float64], w: int | None, G: int, width: int, explicit: bool = True
) -> _Level:
    a, b = _own_window(noisy, w, G)
    if not explicit:
        return _Level(a, b - a + 1, None, a > 0, b < G)
    j = np.arange(width)
    v = a[..., None] + j
    table = (v - noisy[..., None]) ** 2
    length = b - a + 1
    table[j >= length[..., None]] = INF
    return _Level(a, length, table, a > 0, b < G)


def _merge_level(
    child: _Level,
    parent_of: NDArray[np.int64],
    m: int,
    noisy: NDArray[np.float64],
    w: int | None,
    G: int,
    width: int,
) -> _Level:
    """Tables of ``m`` parents from their children's (Algorithm 1 for every node at once)."""
    kc = noisy.shape[1]
    assert child.table is not None
    with np.errstate(invalid="ignore"):
        slopes = np.diff(child.table, axis=2)
    valid = np.arange(width - 1) < (child.length - 1)[..., None]
    ci, si, ji = np.nonzero(valid)
    vals = slopes[ci, si, ji]
    seg = parent_of[ci] * kc + si
    order = segment_argsort(seg, vals)
    seg_sorted = seg[order]
    csum = np.concatenate([[0.0], np.cumsum(vals[order])])
    nseg = m * kc
    seg_start = np.searchsorted(seg_sorted, np.arange(nseg))
    sum_lo = np.zeros((m, kc), np.int64)
    np.add.at(sum_lo, parent_of, child.lo)
    sum_hi = np.zeros((m, kc), np.int64)
    np.add.at(sum_hi, parent_of, child.lo + child.length - 1)
    base = np.zeros((m, kc))
    np.add.at(base, parent_of, child.table[:, :, 0])
    a, b, art_lo, art_hi = _parent_window(noisy, w, G, sum_lo, sum_hi)
    length = b - a + 1
    j = np.arange(width)
    t = (a - sum_lo)[..., None] + j
    ok = j < length[..., None]
    start = seg_start.reshape(m, kc)[..., None]
    gather = np.where(ok, start + t, 0)
    psi = base[..., None] + csum[gather] - csum[start]
    v = a[..., None] + j
    table = np.where(ok, (v - noisy[..., None]) ** 2 + psi, INF)
    merge = {
        "order_child": (ci * kc + si)[order],
        "seg_sorted": seg_sorted,
        "seg_start": seg_start,
        "sum_lo": sum_lo,
    }
    return _Level(a, length, table, art_lo, art_hi, merge)


def _merge_leaves(
    leaf: _Level,
    leaf_noisy: NDArray[np.float64],
    parent_of: NDArray[np.int64],
    m: int,
    noisy: NDArray[np.float64],
    w: int | None,
    G: int,
    width: int,
) -> _Level:
    """Algorithm 1 for parents of leaves with integer targets, by counting instead of sorting.

    A leaf's slopes C(v+1) - C(v) = 2 mu + 1 with mu = v - n~ run over consecutive integers
    mu in [lo - n~, hi - 1 - n~], so the merged sorted slope list of a parent is a histogram over
    mu (a difference array of the children's ranges), and the sum of its t smallest slopes is
    read off the cumulative histogram. Same tables as the sort, O(children + m k w) work.
    """
    kc = noisy.shape[1]
    a = leaf.lo
    nslopes = leaf.length - 1
    mu_lo = (a - leaf_noisy).astype(np.int64)
    has = nslopes > 0
    shift = -int(mu_lo[has].min()) if has.any() else 0
    nbins = int((mu_lo + nslopes)[has].max()) + shift + 1 if has.any() else 1
    seg = parent_of[:, None] * kc + np.arange(kc)[None, :]
    start = np.where(has, mu_lo + shift, 0)
    stop = np.where(has, mu_lo + shift + nslopes, 0)
    nseg = m * kc
    diff = np.bincount((seg * (nbins + 1) + start).ravel(), minlength=nseg * (nbins + 1)).astype(
        np.int64
    )
    diff -= np.bincount((seg * (nbins + 1) + stop).ravel(), minlength=nseg * (nbins + 1))
    cnt = np.cumsum(diff.reshape(nseg, nbins + 1), axis=1)[:, :nbins]
    slope = np.asarray(2.0 * (np.arange(nbins) - shift) + 1.0, dtype=np.float64)
    cc = np.cumsum(cnt, axis=1)
    cs = np.cumsum(cnt * slope, axis=1)
    sum_lo = np.zeros((m, kc), np.int64)
    np.add.at(sum_lo, parent_of, a)
    sum_hi = np.zeros((m, kc), np.int64)
    np.add.at(sum_hi, parent_of, a + leaf.length - 1)
    base = np.zeros((m, kc))
    np.add.at(base, parent_of, (a - leaf_noisy) ** 2)
    a_p, b_p, art_lo, art_hi = _parent_window(noisy, w, G, sum_lo, sum_hi)
    length = b_p - a_p + 1
    j = np.arange(width)
    ok = j < length[..., None]
    t = np.where(ok, (a_p - sum_lo)[..., None] + j, 0).reshape(nseg, width)
    psi = _smallest_sums(cc, cs, slope, t)
    v = a_p[..., None] + j
    table = np.where(
        ok, (v - noisy[..., None]) ** 2 + base[..., None] + psi.reshape(m, kc, width), INF
    )
    merge = {
        "kind": "leaves",
        "cc": cc,
        "shift": shift,
        "sum_lo": sum_lo,
        "mu_lo": mu_lo,
        "nslopes": nslopes,
        "parent_of": parent_of,
    }
    return _Level(a_p, length, table, art_lo, art_hi, merge)


def _first_reaching(cc: NDArray[np.int64], t: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per row i, the first bin where ``cc[i]`` reaches ``t[i, j]`` (rows of cc nondecreasing)."""
    nseg, nbins = cc.shape
    big = int(cc[:, -1].max()) + 2 if cc.size else 2
    keys = (cc + np.arange(nseg)[:, None] * big).ravel()
    query = t + np.arange(nseg)[:, None] * big
    return (
        np.searchsorted(keys, query.ravel(), side="left").reshape(t.shape)
        - np.arange(nseg)[:, None] * nbins
    )


def _smallest_sums(
    cc: NDArray[np.int64], cs: NDArray[np.float64], slope: NDArray[np.float64], t: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Sum of the t smallest slopes of each row's histogram (cumulative counts cc, sums cs)."""
    nbins = cc.shape[1]
    i = np.clip(_first_reaching(cc, t), 0, nbins - 1)
    rows = np.arange(cc.shape[0])[:, None]
    prev_c = np.where(i > 0, cc[rows, i - 1], 0)
    prev_s = np.where(i > 0, cs[rows, i - 1], 0.0)
    return np.where(t > 0, prev_s + (t - prev_c) * slope[i], 0.0)


def _split_leaves(
    merge: dict[str, Any], parent_values: NDArray[np.int64], leaf_lo: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Top-down for leaf children: all slopes below the t-th, then ties by child order."""
    cc, shift = merge["cc"], merge["shift"]
    parent_of, mu_lo, nslopes = merge["parent_of"], merge["mu_lo"], merge["nslopes"]
    m, kc = parent_values.shape
    t = (parent_values - merge["sum_lo"]).reshape(m * kc, 1)
    istar = np.clip(_first_reaching(cc, t)[:, 0], 0, cc.shape[1] - 1)
    rows = np.arange(m * kc)
    before = np.where(istar > 0, cc[rows, istar - 1], 0)
    need = (t[:, 0] - before).reshape(m, kc)
    istar = istar.reshape(m, kc)
    first = mu_lo + shift
    i_child = istar[parent_of]
    less = np.clip(i_child - first, 0, nslopes)
    tie = (less < nslopes) & (i_child >= first) & (t.reshape(m, kc)[parent_of] > 0)
    csum = np.cumsum(tie, axis=0)
    starts = np.searchsorted(parent_of, np.arange(m))
    offset = np.where((starts > 0)[:, None], csum[np.maximum(starts - 1, 0)], 0)
    rank = csum - 1 - offset[parent_of]
    extra = tie & (rank < need[parent_of])
    return leaf_lo + less + extra


def _parent_window(
    noisy: NDArray[np.float64],
    w: int | None,
    G: int,
    sum_lo: NDArray[np.int64],
    sum_hi: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_]]:
    """D_x: the own window intersected with the children's reachable range (shifted if apart)."""
    a0, b0 = _own_window(noisy, w, G)
    a, b = np.maximum(a0, sum_lo), np.minimum(b0, sum_hi)
    empty = a > b
    below = empty & (b0 < sum_lo)
    above = empty & ~below
    span = b0 - a0
    a = np.where(below, sum_lo, np.where(above, np.maximum(sum_lo, sum_hi - span), a))
    b = np.where(below, np.minimum(sum_hi, sum_lo + span), np.where(above, sum_hi, b))
    return a, b, a > np.maximum(0, sum_lo), b < np.minimum(G, sum_hi)


def _split(
    merge: dict[str, Any], parent_values: NDArray[np.int64], child_lo: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Top-down step: children's values for given parent values (first t slopes of each merge)."""
    t = (parent_values - merge["sum_lo"]).ravel()
    seg_sorted = merge["seg_sorted"]
    rank = np.arange(seg_sorted.size) - merge["seg_start"][seg_sorted]
    take = rank < t[seg_sorted]
    add = np.bincount(merge["order_child"][take], minlength=child_lo.size)
    return child_lo + add.reshape(child_lo.shape)


@dataclass
class TreeSolution:
    """Result of :func:`solve_tree`: integer values for every (region, size)."""

    values: NDArray[np.int64]
    objective: float
    half_width: int | None
    touched: bool = False
    rounds: int = 1


def _bottom_up(
    h: RegionHierarchy, noisy: NDArray[np.float64], w: int | None, G: int, width: int
) -> list[_Level]:
    """Tables of every level (index l-1 for level l) for a chunk of sizes."""
    L = h.levels
    levels: list[_Level | None] = [None] * L
    leaf_noisy = noisy[h.level_slice(L)]
    counting = L > 1 and bool(np.array_equal(leaf_noisy, np.rint(leaf_noisy)))
    levels[L - 1] = _leaf_level(leaf_noisy, w, G, width, explicit=not counting)
    for level in range(L - 1, 0, -1):
        sl = h.level_slice(level)
        child = levels[level]
        assert child is not None
        if counting and level == L - 1:
            merged = _merge_leaves(
                child,
                leaf_noisy,
                h.children_of_level(level),
                sl.stop - sl.start,
                noisy[sl],
                w,
                G,
                width,
            )
        else:
            merged = _merge_level(
                child, h.children_of_level(level), sl.stop - sl.start, noisy[sl], w, G, width
            )
        levels[level - 1] = merged
    return [lv for lv in levels if lv is not None]


def _root(top: _Level, G: int) -> NDArray[np.int64] | None:
    """Values of the national nodes x_s^{r0} with sum G (the dummy root's merge), or None.

    The k national tables are the dummy root's children: one merge over all sizes.
    """
    assert top.table is not None
    k = top.lo.shape[1]
    sizes = _Level(top.lo.T, top.length.T, top.table.transpose(1, 0, 2), top.art_lo.T, top.art_hi.T)
    merged = _merge_level(
        sizes, np.zeros(k, np.int64), 1, np.zeros((1, 1)), None, G, top.table.shape[2]
    )
    t = G - int(merged.merge["sum_lo"][0, 0])
    if t < 0 or t > int(np.sum(top.length - 1)):
        return None
    return _split(merged.merge, np.array([[G]]), sizes.lo)[:, 0]


def _touched(levels: list[_Level], values: list[NDArray[np.int64]]) -> bool:
    for lv, v in zip(levels, values, strict=True):
        hi = lv.lo + lv.length - 1
        if np.any(((v == lv.lo) & lv.art_lo) | ((v == hi) & lv.art_hi)):
            return True
    return False


def _size_chunks(
    h: RegionHierarchy, noisy: NDArray[np.float64], G: int, w: int | None
) -> list[tuple[NDArray[np.int64], int]]:
    """Group the sizes into chunks of similar table width (the widest own window of the size).

    Windows of cells near 0 are clipped to [0, round(n~) + w], about half of 2w + 1; most large
    sizes are such, so giving each chunk its own width roughly halves the work. Each chunk also
    respects :data:`CHUNK_CELLS`.
    """
    k = noisy.shape[1]
    if w is None:
        need = np.full(k, G + 1, dtype=np.int64)
    else:
        a, b = _own_window(noisy, w, G)
        need = (b - a + 1).max(axis=0)
    order = np.argsort(need, kind="stable")
    internal, leaves = h.size - h.level_sizes[-1], h.level_sizes[-1]
    chunks: list[tuple[NDArray[np.int64], int]] = []
    i = 0
    while i < k:
        j = i + 1
        width = int(need[order[i]])
        while j < k:
            cand = int(need[order[j]])
            per_size = internal * cand * 4 + leaves * 8
            if cand > 1.25 * int(need[order[i]]) + 2 or (j - i + 1) * per_size > CHUNK_CELLS:
                break
            width = cand
            j += 1
        chunks.append((np.sort(order[i:j]), max(width, 1)))
        i = j
    return chunks


def _pad(table: NDArray[np.float64] | None, width: int) -> NDArray[np.float64]:
    assert table is not None
    extra = width - table.shape[2]
    if extra <= 0:
        return table
    return np.concatenate([table, np.full((*table.shape[:2], extra), INF)], axis=2)


def _solve_fixed(
    h: RegionHierarchy, noisy: NDArray[np.float64], G: int, w: int | None
) -> tuple[NDArray[np.int64] | None, bool]:
    R, k = noisy.shape
    chunks = _size_chunks(h, noisy, G, w)
    internal, leaves = h.size - h.level_sizes[-1], h.level_sizes[-1]
    cells = sum(cols.size * (internal * width * 4 + leaves * 8) for cols, width in chunks)
    keep = cells <= CHUNK_CELLS
    tops: list[_Level] = []
    kept: list[list[_Level]] = []
    for cols, width in chunks:
        lv = _bottom_up(h, noisy[:, cols], w, G, width)
        tops.append(lv[0])
        if keep:
            kept.append(lv)
    widest = max(width for _, width in chunks)
    top = _Level(
        np.concatenate([t.lo for t in tops], axis=1),
        np.concatenate([t.length for t in tops], axis=1),
        np.concatenate([_pad(t.table, widest) for t in tops], axis=1),
        np.concatenate([t.art_lo for t in tops], axis=1),
        np.concatenate([t.art_hi for t in tops], axis=1),
    )
    national_chunked = _root(top, G)
    if national_chunked is None:
        return None, True
    all_cols = np.concatenate([cols for cols, _ in chunks])
    national = np.zeros(k, np.int64)
    national[all_cols] = national_chunked
    out = np.zeros((R, k), np.int64)
    touched = False
    for i, (cols, width) in enumerate(chunks):
        levels = kept[i] if keep else _bottom_up(h, noisy[:, cols], w, G, width)
        vals = [national[None, cols]]
        for level in range(1, h.levels):
            merge = levels[level - 1].merge
            split = _split_leaves if merge.get("kind") == "leaves" else _split
            vals.append(split(merge, vals[-1], levels[level].lo))
        touched = touched or _touched(levels, vals)
        for level, v in enumerate(vals, start=1):
            out[h.level_slice(level), cols] = v
    return out, touched


def solve_tree(
    hierarchy: RegionHierarchy,
    noisy: NDArray[Any],
    groups: int,
    half_width: int | None = None,
    *,
    widen: bool = True,
) -> TreeSolution:
    """Optimal integer solution of Model 1 (Sec. 5: H1-H4) for noisy counts ``noisy[R, k]``.

    ``half_width``: the domain window w (None: full domain [0, G]). With ``widen`` the window is
    doubled until no value touches an artificial bound (then the result is the exact optimum).

    Golden example (worked by hand):

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> noisy = np.array([[3.6, 0.4, 2.3], [1.2, 0.6, 1.4], [2.3, -0.8, 0.7]])
    >>> sol = solve_tree(h, noisy, 6)
    >>> sol.values.tolist(), round(sol.objective, 9)
    ([[3, 1, 2], [1, 1, 1], [2, 0, 1]], 1.99)
    """
    noisy = np.asarray(noisy, dtype=np.float64)
    G = int(groups)
    if noisy.shape[0] != hierarchy.size:
        raise DataError(
            f"noisy counts have {noisy.shape[0]} rows, the hierarchy {hierarchy.size} regions"
        )
    w = half_width
    rounds = 0
    while True:
        rounds += 1
        if w is not None and 2 * w + 1 >= G + 1:
            w = None
        values, touched = _solve_fixed(hierarchy, noisy, G, w)
        if values is not None and (not touched or not widen or w is None):
            obj = float(np.sum((values - noisy) ** 2))
            return TreeSolution(values, obj, w, touched, rounds)
        if values is None and w is None:
            raise DataError(f"no non-negative integer release sums to G={G}")
        assert w is not None
        w *= 2


def naive_tree_dp(hierarchy: RegionHierarchy, noisy: NDArray[Any], groups: int) -> float:
    """M_DP^OP's optimum (Theorem 2): the same DP with explicit min-plus tables on [0, G].

    A slow reference for the tests.
    """
    h, G = hierarchy, int(groups)
    noisy = np.asarray(noisy, dtype=np.float64)
    v = np.arange(G + 1)
    tables: dict[tuple[int, int], NDArray[np.float64]] = {}
    for r in range(h.size - 1, -1, -1):
        kids = np.flatnonzero(h.parent == r)
        for s in range(noisy.shape[1]):
            psi = np.zeros(G + 1)
            if kids.size:
                acc = tables[(int(kids[0]), s)]
                for c in kids[1:]:
                    acc = min_plus(acc, tables[(int(c), s)])[: G + 1]
                psi = acc
            tables[(r, s)] = (v - noisy[r, s]) ** 2 + psi
    acc = tables[(0, 0)]
    for s in range(1, noisy.shape[1]):
        acc = min_plus(acc, tables[(0, s)])[: G + 1]
    return float(acc[G])
