"""The release of a spatial partition: leaf rectangles with noisy counts (Shaham, Ghinita, Ahuja,
Krumm, Shahabi, SIGSPATIAL 2021 (HTF), Sec. 2.2).

A query is answered under the uniformity assumption: a leaf L with noisy count c_L contributes
``c_L |Q & L| / |L|`` (HTF, Sec. 2.2, the uniformity assumption). The implementation spreads every
leaf's count evenly over its cells (a density matrix Z, built with a 2-D difference array in O(N M
+ #leaves)) and answers any number of rectangles from Z's summed-area table in O(1) each; this
equals the sum over leaves exactly (up to float rounding).

Tree releases also carry ``budget_paths``: the epsilon spent along each leaf's root-to-leaf path
(height estimate + partitioning + counts; sequential composition along the path, HTF Sec. 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from dpcube.errors import ReleaseError
from dpcube.mechanisms.spatial._common import grid_shape
from dpcube.release.base import Release, ReleaseMetadata, column_numpy
from dpcube.release.cells import box_sums, prefix_sums
from dpcube.release.views import ReportPart, ReportSection, ReportTable
from dpcube.schema import BoxedQueries, Schema, Spatial

if TYPE_CHECKING:
    from dpcube.release.uncertainty import BootstrapWorld


class Leaf(NamedTuple):
    """A released rectangle: rows [row0, row1) x columns [col0, col1) and its released count."""

    row0: int
    row1: int
    col0: int
    col1: int
    value: float


def density(
    shape: tuple[int, int], rects: NDArray[np.int64], counts: NDArray[Any]
) -> NDArray[np.float64]:
    """Per-cell estimates: each rectangle's count spread evenly over its cells.

    >>> density((2, 2), np.array([[0, 2, 0, 1], [0, 2, 1, 2]]), np.array([4.0, 2.0])).tolist()
    [[2.0, 1.0], [2.0, 1.0]]
    """
    rows, cols = shape
    r0, r1, c0, c1 = (rects[:, i] for i in range(4))
    area = ((r1 - r0) * (c1 - c0)).astype(np.float64)
    value = np.asarray(counts, dtype=np.float64) / area
    diff = np.zeros((rows + 1) * (cols + 1), dtype=np.float64)
    stride = cols + 1
    for rr, cc, sign in ((r0, c0, 1.0), (r0, c1, -1.0), (r1, c0, -1.0), (r1, c1, 1.0)):
        diff += np.bincount(rr * stride + cc, weights=sign * value, minlength=diff.size)
    z = diff.reshape(rows + 1, cols + 1)
    z = np.cumsum(np.cumsum(z, axis=0), axis=1)
    return np.ascontiguousarray(z[:rows, :cols])


def brute_force_answers(
    rects: NDArray[np.int64], counts: NDArray[Any], boxes: NDArray[np.int64]
) -> NDArray[np.float64]:
    """sum_L c_L |Q & L| / |L| for each inclusive box, by a loop over queries (tests only)."""
    out = np.zeros(len(boxes))
    area = ((rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])).astype(np.float64)
    for i, ((a0, a1), (b0, b1)) in enumerate(boxes):
        frac = _overlap(rects, a0, a1 + 1, b0, b1 + 1) / area
        out[i] = float(np.sum(np.asarray(counts, dtype=np.float64) * frac))
    return out


def _overlap(rects: NDArray[np.int64], a0: Any, a1: Any, b0: Any, b1: Any) -> NDArray[np.float64]:
    dr = np.clip(np.minimum(rects[:, 1], a1) - np.maximum(rects[:, 0], a0), 0, None)
    dc = np.clip(np.minimum(rects[:, 3], b1) - np.maximum(rects[:, 2], b0), 0, None)
    return np.asarray(dr * dc, dtype=np.float64)


def _ragged(starts: NDArray[np.int64], lengths: NDArray[np.int64]) -> tuple[NDArray, NDArray]:
    """``(owner, values)``: for each k, ``lengths[k]`` values ``starts[k], starts[k] + 1, ...``
    owned by ``k``, all runs one after another (no Python loop).

    >>> owner, values = _ragged(np.array([5, 0, 7]), np.array([2, 0, 3]))
    >>> owner.tolist(), values.tolist()
    ([0, 0, 2, 2, 2], [5, 6, 7, 8, 9])
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    first = np.cumsum(lengths) - lengths
    values = np.arange(int(lengths.sum()), dtype=np.int64) - first[owner] + starts[owner]
    return owner, values


def leaf_map(shape: tuple[int, int], rects: NDArray[np.int64]) -> NDArray[np.int64]:
    """The index of the leaf holding each cell of a grid the rectangles tile.

    >>> leaf_map((2, 3), np.array([[0, 2, 0, 1], [0, 1, 1, 3], [1, 2, 1, 3]])).tolist()
    [[0, 1, 1], [0, 2, 2]]
    """
    rows, cols = shape
    index = np.arange(len(rects), dtype=np.int64)
    diff = np.zeros((rows + 1) * (cols + 1), dtype=np.int64)
    stride = cols + 1
    r0, r1, c0, c1 = (rects[:, i] for i in range(4))
    for rr, cc, sign in ((r0, c0, 1), (r0, c1, -1), (r1, c0, -1), (r1, c1, 1)):
        diff[rr * stride + cc] += sign * index  # a tiling: no two leaves share this corner
    z = np.cumsum(np.cumsum(diff.reshape(rows + 1, cols + 1), axis=0), axis=1)
    return np.ascontiguousarray(z[:rows, :cols])


def leaf_overlaps(
    shape: tuple[int, int],
    rects: NDArray[np.int64],
    boxes: NDArray[np.int64],
    cells_leaf: NDArray[np.int64] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """The sparse overlap of inclusive ``boxes`` (q, 2, 2) with leaves tiling ``shape``:
    ``(query, leaf, cells)``, one entry per box and leaf that share ``cells > 0`` cells, in
    increasing (query, leaf) order.

    A leaf meets a box either with its top-left cell inside the box, or across the box's top row
    or left column (its top-left cell lies above or to the left). The first are found per row of
    the box among the leaves sorted by top-left cell (a binary search per row), the second in the
    map of the cells' leaves (:func:`leaf_map`) along that row and column: the work is the boxes'
    heights and widths plus the entries, never a pass over all leaves per box. ``cells_leaf``:
    the :func:`leaf_map` of the rectangles when the caller keeps it.

    >>> rects = np.array([[0, 2, 0, 1], [0, 1, 1, 3], [1, 2, 1, 3]])
    >>> q, leaf, cells = leaf_overlaps((2, 3), rects, np.array([[[0, 1], [1, 2]], [[1, 1], [0, 0]]]))
    >>> q.tolist(), leaf.tolist(), cells.tolist()
    ([0, 0, 1], [1, 2, 0], [2.0, 2.0, 1.0])
    """
    cols = shape[1]
    boxes = np.asarray(boxes, dtype=np.int64).reshape(-1, 2, 2)
    a0, a1, b0, b1 = boxes[:, 0, 0], boxes[:, 0, 1], boxes[:, 1, 0], boxes[:, 1, 1]
    n = len(rects)
    key = rects[:, 0] * cols + rects[:, 2]
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    # leaves whose top-left cell is inside the box: per row of the box, a range of sorted keys
    row_owner, row = _ragged(a0, a1 - a0 + 1)
    start = np.searchsorted(sorted_key, row * cols + b0[row_owner], side="left")
    stop = np.searchsorted(sorted_key, row * cols + b1[row_owner], side="right")
    owner, at = _ragged(start, stop - start)
    inside_q, inside_leaf = row_owner[owner], order[at]
    # leaves crossing the box's top row or left column
    cells_of = (leaf_map(shape, rects) if cells_leaf is None else cells_leaf).ravel()
    top_q, top_col = _ragged(b0, b1 - b0 + 1)
    left_q, left_row = _ragged(a0, a1 - a0 + 1)
    edge_leaf = np.concatenate(
        [cells_of[a0[top_q] * cols + top_col], cells_of[left_row * cols + b0[left_q]]]
    )
    pair = np.unique(
        np.concatenate(
            [inside_q * n + inside_leaf, np.concatenate([top_q, left_q]) * n + edge_leaf]
        )
    )
    query, leaf = pair // n, pair % n
    r = rects[leaf]
    dr = np.minimum(r[:, 1], a1[query] + 1) - np.maximum(r[:, 0], a0[query])
    dc = np.minimum(r[:, 3], b1[query] + 1) - np.maximum(r[:, 2], b0[query])
    keep = (dr > 0) & (dc > 0)
    return query[keep], leaf[keep], (dr * dc)[keep].astype(np.float64)


def _kept_stack(reps: Sequence[LeafRelease]) -> NDArray[np.float64] | None:
    """The stacked summed-area tables :meth:`LeafRelease.replicate_answers` left the replicates
    holding (each its slice, in order), or None where they do not all hold theirs."""
    first = reps[0]._prefix
    stack = None if first is None else first.base
    if not isinstance(stack, np.ndarray) or stack.ndim != 3 or len(stack) != len(reps):
        return None
    for b, rep in enumerate(reps):
        p = rep._prefix
        if p is None or p.base is not stack or p.ctypes.data != stack[b].ctypes.data:
            return None
    return stack


#: Most cells of the replicates' summed-area tables built at once when they are not kept
#: (:func:`replicate_leaf_answers`): 32 MiB of float64 per table.
REPLICATE_CHUNK_CELLS = 1 << 22


def _stacked_prefix(
    shape: tuple[int, int],
    rects: NDArray[np.int64],
    counts: NDArray[Any],
    replicate: NDArray[np.int64],
    runs: int,
) -> NDArray[np.float64]:
    """The (runs, rows + 1, cols + 1) summed-area tables of the densities of ``runs`` leaf
    releases, their leaves given one after another (``replicate``: each leaf's release):
    :func:`density` and :func:`~dpcube.linalg.summed_area.prefix_sums` of each release, the same
    sums in the same order, for all at once in one array.

    The difference array is written one row and column down and right of :func:`density`'s, so
    that its two running sums leave the density where the summed-area table wants it (row and
    column 0 zero) and two more running sums in place give the table. A corner on the grid's
    last row or column only changes cells beyond the grid and is left out. In a tiling no two
    leaves share a corner of the same kind, so one ``bincount`` over the four kinds adds each
    cell's corners in :func:`density`'s order."""
    rows, cols = shape
    r0, r1, c0, c1 = (rects[:, i] for i in range(4))
    area = ((r1 - r0) * (c1 - c0)).astype(np.float64)
    value = np.asarray(counts, dtype=np.float64) / area
    stride = cols + 1
    size = (rows + 1) * stride
    index, weight = [], []
    for rr, cc, sign in ((r0, c0, 1.0), (r0, c1, -1.0), (r1, c0, -1.0), (r1, c1, 1.0)):
        inside = (rr < rows) & (cc < cols)
        index.append(replicate[inside] * size + (rr[inside] + 1) * stride + cc[inside] + 1)
        weight.append(sign * value[inside])
    table = np.asarray(
        np.bincount(np.concatenate(index), np.concatenate(weight), minlength=runs * size),
        dtype=np.float64,
    )
    table.shape = (runs, rows + 1, cols + 1)  # the array itself, not a view: replicates keep slices
    for axis in (1, 2, 1, 2):  # the density, then its summed-area table
        np.cumsum(table, axis=axis, out=table)
    return table


def _stacked_box_sums(prefix: NDArray[np.float64], boxes: NDArray[np.int64]) -> NDArray:
    """(runs, q) box sums of stacked summed-area tables: the corners of
    :func:`~dpcube.linalg.summed_area.box_sums` in its order, for every table at once."""
    lo_r, hi_r = boxes[:, 0, 0], boxes[:, 0, 1] + 1
    lo_c, hi_c = boxes[:, 1, 0], boxes[:, 1, 1] + 1
    out = np.zeros((prefix.shape[0], len(boxes)), dtype=np.float64)
    for r, c, sign in ((lo_r, lo_c, 1), (lo_r, hi_c, -1), (hi_r, lo_c, -1), (hi_r, hi_c, 1)):
        out += sign * prefix[:, r, c]
    return out


def _compressed_leaf_answers(
    rects: NDArray[np.int64],
    counts: NDArray[Any],
    boxes: NDArray[np.int64],
    row_edges: NDArray[np.int64],
    col_edges: NDArray[np.int64],
) -> NDArray[np.float64]:
    """One leaf release's answers to inclusive ``boxes`` from a summed-area table over the grid
    cut only where a leaf or a box has an edge (``row_edges``, ``col_edges``: the boxes' edges).
    The density is constant inside each block of that coarser grid, so a block holds its density
    times its area, and each box is a sum of whole blocks: the answers of
    :meth:`LeafRelease.answer_boxes`, up to float rounding, from a table that is much smaller
    than the grid where the leaves and boxes are few."""
    r0, r1, c0, c1 = (rects[:, i] for i in range(4))
    rows = np.unique(np.concatenate([row_edges, r0, r1]))
    cols = np.unique(np.concatenate([col_edges, c0, c1]))
    nr, nc = len(rows), len(cols)
    value = np.asarray(counts, dtype=np.float64) / ((r1 - r0) * (c1 - c0))
    i0, i1 = np.searchsorted(rows, r0), np.searchsorted(rows, r1)
    j0, j1 = np.searchsorted(cols, c0), np.searchsorted(cols, c1)
    diff = np.bincount(
        np.concatenate([i0 * nc + j0, i0 * nc + j1, i1 * nc + j0, i1 * nc + j1]),
        np.concatenate([value, -value, -value, value]),
        minlength=nr * nc,
    ).reshape(nr, nc)
    density = np.cumsum(np.cumsum(diff, axis=0), axis=1)[:-1, :-1]
    table = np.zeros((nr, nc))
    table[1:, 1:] = density * np.diff(rows)[:, None] * np.diff(cols)[None, :]
    np.cumsum(table, axis=0, out=table)
    np.cumsum(table, axis=1, out=table)
    a0, a1 = np.searchsorted(rows, boxes[:, 0, 0]), np.searchsorted(rows, boxes[:, 0, 1] + 1)
    b0, b1 = np.searchsorted(cols, boxes[:, 1, 0]), np.searchsorted(cols, boxes[:, 1, 1] + 1)
    out: NDArray[np.float64] = table[a1, b1] - table[a0, b1] - table[a1, b0] + table[a0, b0]
    return out


#: How many times smaller than the grid the coarser grid of :func:`_compressed_leaf_answers`
#: must be for :func:`replicate_leaf_answers` to answer replicate by replicate on it.
COMPRESSION_GAIN = 2


def replicate_leaf_answers(
    shape: tuple[int, int],
    rects: NDArray[np.int64],
    counts: NDArray[Any],
    replicate: NDArray[np.int64],
    runs: int,
    boxes: NDArray[np.int64],
) -> NDArray[np.float64]:
    """The (runs, q) answers of ``runs`` leaf releases (their leaves one after another,
    ``replicate`` numbering each leaf's release in increasing order) to inclusive ``boxes``: the
    same figures as :meth:`LeafRelease.answer_boxes` on each release (to float rounding).

    Where the grid cut at the leaves' and boxes' edges is :data:`COMPRESSION_GAIN` times smaller
    than the grid (a large grid, few leaves), each release is answered from a summed-area table
    of that coarser grid (:func:`_compressed_leaf_answers`); otherwise the releases' summed-area
    tables are built together, a chunk of releases at a time (:data:`REPLICATE_CHUNK_CELLS`), and
    each box read from all of them at once."""
    rows, cols = shape
    start = np.searchsorted(replicate, np.arange(runs + 1))
    row_edges = np.unique(np.concatenate([boxes[:, 0, 0], boxes[:, 0, 1] + 1]))
    col_edges = np.unique(np.concatenate([boxes[:, 1, 0], boxes[:, 1, 1] + 1]))
    first_rects = rects[start[0] : start[1]]
    coarse = len(np.union1d(row_edges, first_rects[:, :2])) * len(
        np.union1d(col_edges, first_rects[:, 2:])
    )
    out = np.empty((runs, len(boxes)))
    if coarse * COMPRESSION_GAIN <= (rows + 1) * (cols + 1):
        for b in range(runs):
            part = slice(int(start[b]), int(start[b + 1]))
            out[b] = _compressed_leaf_answers(
                rects[part], counts[part], boxes, row_edges, col_edges
            )
        return out
    per_run = max(1, REPLICATE_CHUNK_CELLS // ((rows + 1) * (cols + 1)))
    for first in range(0, runs, per_run):
        last = min(first + per_run, runs)
        part = slice(int(start[first]), int(start[last]))
        prefix = _stacked_prefix(
            shape, rects[part], counts[part], replicate[part] - first, last - first
        )
        out[first:last] = _stacked_box_sums(prefix, boxes)
    return out


def edge_pairs(rects: NDArray[np.int64]) -> NDArray[np.int64]:
    """The (k, 2) index pairs of rectangles that share a whole edge (their union is a rectangle):
    side by side with the same rows, or one above the other with the same columns.

    >>> edge_pairs(np.array([[0, 1, 0, 1], [0, 1, 1, 2], [1, 2, 0, 2]])).tolist()
    [[0, 1]]
    >>> edge_pairs(np.array([[0, 1, 0, 2], [1, 2, 0, 2]])).tolist()
    [[0, 1]]
    """
    out: list[tuple[int, int]] = []
    r = np.asarray(rects, dtype=np.int64).reshape(-1, 4).tolist()
    for same, far in ((0, 2), (2, 0)):
        # (same axis lo, hi, the other axis' far end) -> leaf: whose far end meets my near end
        ends = {(a[same], a[same + 1], a[far + 1]): i for i, a in enumerate(r)}
        for j, a in enumerate(r):
            i = ends.get((a[same], a[same + 1], a[far]))
            if i is not None:
                out.append((i, j))
    return np.array(sorted(out), dtype=np.int64).reshape(-1, 2)


def leaf_pair_dispersion(
    rects: NDArray[np.int64], counts: NDArray[Any], variances: NDArray[np.float64] | None
) -> float:
    """How unevenly points split between neighbouring leaves, relative to the Bhatia-Davis bound:
    an estimate of ``1 / (kappa + 1)`` in [0, 1] (experiments/docs/coverage.md, "Uniformity
    error").

    For two leaves A, B sharing a whole edge, R = A u B holds ``n = n_A + n_B`` points, a share
    ``p = n_A / n`` of them in A, which has a share ``f = |A| / |R|`` of R's area. Under the
    Beta(kappa f, kappa (1 - f)) model of ``p``, ``E[n^2 (p - f)^2] = n^2 f (1 - f) / (kappa +
    1)``, and ``n (p - f) = (1 - f) n_A - f n_B``. With released counts ``c = n + noise``
    (independent noises of variance ``v``) the method of moments over all pairs gives

        r = sum [((1 - f) c_A - f c_B)^2 - (1 - f)^2 v_A - f^2 v_B]
            / sum [((c_A + c_B)^2 - v_A - v_B) f (1 - f)]

    clipped to [0, 1]; 1 (the bound) where no pair or no signal. Where the noise variances are
    not known (consistency post-processing), none is discounted: ``r`` is then too large, the
    conservative side. Taking the same ``r`` inside a leaf as between leaves is a
    self-similarity assumption (a multiplicative cascade splits every region alike).

    >>> rects = np.array([[0, 1, 0, 1], [0, 1, 1, 2], [1, 2, 0, 1], [1, 2, 1, 2]])
    >>> leaf_pair_dispersion(rects, np.array([50.0, 50.0, 50.0, 50.0]), None)  # even: kappa huge
    0.0
    >>> leaf_pair_dispersion(rects, np.array([100.0, 0.0, 0.0, 0.0]), None)  # all in one leaf
    1.0
    """
    pairs = edge_pairs(rects)
    if len(pairs) == 0:
        return 1.0
    r = np.asarray(rects, dtype=np.float64).reshape(-1, 4)
    area = (r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2])
    c = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    v = np.zeros(len(c)) if variances is None else np.asarray(variances, dtype=np.float64)
    a, b = pairs[:, 0], pairs[:, 1]
    f = area[a] / (area[a] + area[b])
    num = ((1 - f) * c[a] - f * c[b]) ** 2 - (1 - f) ** 2 * v[a] - f**2 * v[b]
    den = ((c[a] + c[b]) ** 2 - v[a] - v[b]) * f * (1 - f)
    total = float(np.sum(den))
    if total <= 0.0:
        return 1.0
    return float(np.clip(np.sum(num) / total, 0.0, 1.0))


def noise_discounted_counts(
    counts: NDArray[Any], variances: NDArray[np.float64] | None
) -> NDArray[np.float64]:
    """Leaf counts with their known noise discounted, for the bootstrap world: ``sqrt(max(c^2 -
    v, 0))`` where the released count ``c`` is positive, 0 elsewhere (``v``: the leaf's noise
    variance; unchanged where the release does not know it).

    A released count is ``c = n + e`` with independent noise of mean 0 and variance ``v``, so
    ``E[c^2] = n^2 + v``: ``c^2 - v`` is an unbiased estimate of ``n^2``, the quantity the
    uniformity error scales with (``V_u = sum n_L^2 f (1 - f)``). Spreading ``c`` itself treats
    the noise of an empty leaf as points; the clustered cascade then piles that mass into a few
    cells, a world rougher than the truth (experiments/docs/coverage.md, "Empty rectangles").
    A leaf whose count is within one noise sd of 0 (``c^2 <= v``) is indistinguishable from
    empty and becomes 0; a dense leaf (``c >> sd``) loses about ``v / (2 c)``, a negligible
    share. This is post-processing of the release alone.

    >>> noise_discounted_counts(np.array([5.0, 3.0, -4.0, 1000.0]), np.full(4, 16.0)).round(3).tolist()
    [3.0, 0.0, 0.0, 999.992]
    >>> noise_discounted_counts(np.array([5.0, -1.0]), None).tolist()
    [5.0, 0.0]
    """
    c = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    if variances is None:
        return c
    return np.sqrt(np.clip(c**2 - np.asarray(variances, dtype=np.float64), 0.0, None))


#: Fewest negative leaf counts from which :func:`negative_count_variance` estimates a variance.
MIN_NEGATIVE_LEAVES = 20


def negative_count_variance(counts: NDArray[Any]) -> float | None:
    """The noise variance of leaf counts whose variance the release does not state
    (consistency post-processing), estimated from its negative counts: ``mean(c^2)`` over the
    leaves with ``c < 0``; None where fewer than :data:`MIN_NEGATIVE_LEAVES` are negative.

    A negative count is noise below a leaf holding few or no points. For an empty leaf with
    symmetric noise ``e``, ``E[e^2 | e < 0] = Var(e)``. A leaf holding ``n > 0`` points is
    negative only when ``e < -n``; for (discrete) Laplace noise, which is memoryless, ``n + e``
    given ``e < -n`` is distributed as ``e`` given ``e < 0``, so such leaves estimate the same
    ``Var(e)``; for lighter-tailed noise (the kd-tree's consistent leaves mix several Laplace
    draws) ``(n + e)^2`` is smaller and the estimate errs low: less noise is discounted
    (:func:`noise_discounted_counts`), the conservative side. It takes one variance for all
    leaves (the kd-tree's leaves are at its last level).

    >>> negative_count_variance(np.array([-3.0] * 10 + [-1.0] * 10 + [500.0]))
    5.0
    >>> negative_count_variance(np.array([-3.0, 40.0])) is None
    True
    """
    c = np.asarray(counts, dtype=np.float64)
    negative = c[c < 0]
    if len(negative) < MIN_NEGATIVE_LEAVES:
        return None
    return float(np.mean(negative**2))


#: What the reason line says of the kd-tree's widening (:meth:`LeafRelease.uniformity_widening`).
KAPPA_NOTE = "variance bound f (1 - f) of the share f of each cut leaf inside the query"
#: What the reason line says of UG's, the quadtree's and AG's widening.
DISPERSION_NOTE = (
    "variance r f (1 - f) of the share f of each cut leaf inside the query, r the dispersion of "
    "the release's neighbouring leaves"
)


#: Seed of the cascade that scatters leaf counts in the bootstrap world (:func:`cascade_spread`).
CASCADE_SEED = 0
#: Whether the clustered bootstrap world spreads noise-discounted leaf counts
#: (:func:`noise_discounted_counts`) rather than the released ones. Off: on GeoLife's bounding
#: box over 40 releases it narrows every HTF and kd-tree row and brings the kd-tree's at epsilon
#: 0.1 into 90-99 % (99.1 -> 98.9 %), but leaves HTF's at epsilon 1 out (99.5 -> 99.3 %), and
#: it would change the world of every HTF, kd-tree and PrivTree release on the strength of the
#: rows it is judged by (experiments/docs/coverage.md, "Forty releases").
#: ``experiments/coverage_empty.py`` measures it.
DENOISE_CLUSTERED_WORLD = False


def cascade_spread(
    shape: tuple[int, int],
    rects: NDArray[np.int64],
    counts: NDArray[np.int64],
    dispersion: float,
    rng: np.random.Generator,
) -> NDArray[np.int64]:
    """Whole counts on the grid: each leaf's count scattered over its cells by a random
    multiplicative cascade of dispersion ``r = 1 / (kappa + 1)`` (:func:`leaf_pair_dispersion`).

    A rectangle holding ``n`` points is halved across its longer side (``f``: the first half's
    share of the area); the first half gets ``Binomial(n, p)`` points, ``p ~ Beta(kappa f, kappa
    (1 - f))``, so that ``E[(p - f)^2] = f (1 - f) / (kappa + 1)``: the Beta model the release's
    leaf pairs estimate; each half is cut again down to single cells. ``r = 0`` spreads the points
    as binomial draws around the even spread; ``r = 1`` puts every leaf's points in one cell.
    The total of every leaf is kept.

    >>> rng = np.random.default_rng(0)
    >>> rects = np.array([[0, 2, 0, 4], [2, 4, 0, 4]])
    >>> z = cascade_spread((4, 4), rects, np.array([40, 8]), 1.0, rng)
    >>> int(z[:2].sum()), int(z[2:].sum()), int((z[:2] > 0).sum()), int((z[2:] > 0).sum())
    (40, 8, 1, 1)
    """
    out = np.zeros(shape, dtype=np.int64)
    kappa = 1.0 / max(dispersion, 1e-12) - 1.0
    stack = [
        (int(a), int(b), int(c), int(d), int(n))
        for (a, b, c, d), n in zip(
            np.asarray(rects).tolist(), np.asarray(counts).tolist(), strict=True
        )
        if n > 0
    ]
    while stack:
        r0, r1, c0, c1, n = stack.pop()
        if r1 - r0 == 1 and c1 - c0 == 1:
            out[r0, c0] += n
            continue
        if r1 - r0 >= c1 - c0:
            mid = (r0 + r1) // 2
            f = (mid - r0) / (r1 - r0)
            halves = ((r0, mid, c0, c1), (mid, r1, c0, c1))
        else:
            mid = (c0 + c1) // 2
            f = (mid - c0) / (c1 - c0)
            halves = ((r0, r1, c0, mid), (r0, r1, mid, c1))
        p = rng.beta(kappa * f, kappa * (1.0 - f)) if kappa > 1e-9 else float(rng.random() < f)
        first = int(rng.binomial(n, p))
        for (a, b, c, d), k in zip(halves, (first, n - first), strict=True):
            if k > 0:
                stack.append((a, b, c, d, k))
    return out


def _pct(level: float) -> str:
    return f"{100 * level:g}%"


class LeafRelease(Release):
    """Leaf rectangles tiling the grid, each with a released count.

    ``variances``: the noise variance of each leaf count when leaf noises are independent (HTF,
    UG, Uniform), else ``None`` (consistency post-processing correlates them); a query's variance
    is then ``sum_L var_L (|Q & L| / |L|)^2``. ``budget_paths``: epsilon per leaf path, or None.
    """

    kind = "spatial_leaves"

    def __init__(
        self,
        schema: Schema,
        metadata: ReleaseMetadata,
        rects: NDArray[np.int64],
        counts: NDArray[Any],
        variances: NDArray[np.float64] | None = None,
        budget_paths: NDArray[np.float64] | None = None,
        *,
        raw_counts: NDArray[Any] | None = None,
        raw_variances: NDArray[np.float64] | None = None,
    ) -> None:
        super().__init__(schema, metadata)
        self.shape = grid_shape(schema)
        self.rects = np.asarray(rects, dtype=np.int64).reshape(-1, 4)
        self.leaf_counts = np.asarray(counts)
        if self.leaf_counts.shape != (len(self.rects),):
            raise ReleaseError(f"{len(self.rects)} leaves but {self.leaf_counts.shape} counts")
        self.variances = None if variances is None else np.asarray(variances, dtype=np.float64)
        self.budget_paths = (
            None if budget_paths is None else np.asarray(budget_paths, dtype=np.float64)
        )
        #: Each leaf's own noisy count before post-processing (least-squares consistency of the
        #: quadtree and kd-tree, AG's combination of its two levels) and its noise variance, or
        #: None. They are the mechanism's own measurements, covered by its guarantee; their noise
        #: is each leaf's own draw, which :meth:`bound_interval_many` needs.
        self.raw_counts = None if raw_counts is None else np.asarray(raw_counts)
        self.raw_variances = (
            None if raw_variances is None else np.asarray(raw_variances, dtype=np.float64)
        )
        if (self.raw_counts is None) != (self.raw_variances is None) or (
            self.raw_counts is not None and self.raw_counts.shape != self.leaf_counts.shape
        ):
            raise ReleaseError("raw leaf counts need one count and one variance per leaf")
        self._prefix: NDArray[np.float64] | None = None
        #: The leaf of each cell (:func:`leaf_map`) and the last queries' overlaps with the
        #: leaves (:meth:`_overlaps`: the bound, the variances and the widening read the same).
        self._leaf_map: NDArray[np.int64] | None = None
        self._last_overlaps: tuple[bytes, Any] | None = None

    @property
    def leaves(self) -> list[Leaf]:
        """The released rectangles with their counts."""
        return [
            Leaf(int(a), int(b), int(c), int(d), float(n))
            for (a, b, c, d), n in zip(self.rects, self.leaf_counts, strict=True)
        ]

    @property
    def density(self) -> NDArray[np.float64]:
        """The per-cell estimates Z (uniformity assumption)."""
        return density(self.shape, self.rects, self.leaf_counts)

    @property
    def prefix(self) -> NDArray[np.float64]:
        if self._prefix is None:
            self._prefix = prefix_sums(self.density)
        return self._prefix

    def answer_boxes(self, boxes: NDArray[np.int64]) -> NDArray[np.float64]:
        """Answers for an int array (q, 2, 2) of inclusive [lo, hi] per axis (fast path)."""
        return box_sums(self.prefix, np.asarray(boxes, dtype=np.int64)).astype(np.float64)

    def answer_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        return self.answer_boxes(self.boxes(queries))

    #: The bootstrap world's version, recorded with stored replicates
    #: (:class:`~dpcube.release.replicates.StoredReplicates`): replicates drawn in another world
    #: (the even spread of releases saved before) are recomputed rather than used.
    @property
    def bootstrap_world_version(self) -> str:
        """The bootstrap world's version: ``"clustered-denoised-2"`` (noise-discounted leaf
        counts scattered by the cascade; ``"clustered-cascade-1"`` spread the released counts),
        or for a partition that does not depend on the data ``"even-world-modelled-1"`` (see
        :meth:`bootstrap_world`)."""
        if self.reruns_keep_the_leaves:
            return "even-world-modelled-1"
        return "clustered-denoised-2" if DENOISE_CLUSTERED_WORLD else "clustered-cascade-1"

    #: Why answers need a bootstrap (:mod:`dpcube.release.uncertainty`).
    bootstrap_reason = "leaf counts spread under the uniformity assumption (biased)"

    @property
    def bootstrap_unavailable(self) -> str | None:
        """None: every leaf release has a bootstrap (:meth:`bootstrap_world`)."""
        return None

    def trim_cache(self, max_bytes: int) -> None:
        """Drop the summed-area table if it takes more than ``max_bytes``."""
        if self._prefix is not None and self._prefix.nbytes > max_bytes:
            self._prefix = None

    def replicate_answers(
        self,
        replicates: Sequence[Release],
        queries: Sequence[Mapping[str, Any]],
        keep_bytes: int = 0,
    ) -> NDArray[np.float64]:
        """The (runs, q) answers of leaf ``replicates`` in one vectorised pass. Where every
        replicate has the same leaves, the sparse overlap of the queries' boxes with them
        (:func:`leaf_overlaps`) times the (runs, leaves) matrix of their counts; else
        (:func:`replicate_leaf_answers`) the boxes read from the replicates' summed-area
        tables built together. Where all the tables fit in ``keep_bytes`` they are built as one
        array and each replicate keeps its slice, so the next call only reads boxes."""
        if not all(isinstance(rep, LeafRelease) for rep in replicates) or not replicates:
            return super().replicate_answers(replicates, queries, keep_bytes)
        reps = [rep for rep in replicates if isinstance(rep, LeafRelease)]
        boxes = self.boxes(queries)
        rects = reps[0].rects
        if all(np.array_equal(rep.rects, rects) for rep in reps):
            # every re-run cut the same leaves (UG, the quadtree, AG): the sparse overlaps of the
            # boxes with those leaves times the replicates' leaf counts, no summed-area table
            query, leaf, cells = leaf_overlaps(self.shape, rects, boxes)
            r = rects[leaf]
            frac = cells / ((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2]))
            counts = np.stack([np.asarray(rep.leaf_counts, dtype=np.float64) for rep in reps])
            out = np.zeros((len(reps), len(boxes)))
            if len(query):
                met, first = np.unique(query, return_index=True)
                out[:, met] = np.add.reduceat(counts[:, leaf] * frac, first, axis=1)
            return out
        kept = _kept_stack(reps)
        table_cells = (self.shape[0] + 1) * (self.shape[1] + 1)
        if kept is not None and kept.nbytes <= keep_bytes:
            return _stacked_box_sums(kept, boxes)
        rects = np.concatenate([rep.rects for rep in reps])
        counts = np.concatenate([np.asarray(rep.leaf_counts, dtype=np.float64) for rep in reps])
        replicate = np.repeat(np.arange(len(reps)), [len(rep.rects) for rep in reps])
        if len(reps) * table_cells * 8 <= keep_bytes:
            stack = _stacked_prefix(self.shape, rects, counts, replicate, len(reps))
            for b, rep in enumerate(reps):
                rep._prefix = stack[b]
            return _stacked_box_sums(stack, boxes)
        for rep in reps:
            rep._prefix = None
        return replicate_leaf_answers(self.shape, rects, counts, replicate, len(reps), boxes)

    def packed_replicate_answers(
        self, packed: Mapping[str, pa.Table], runs: int, queries: Sequence[Mapping[str, Any]]
    ) -> NDArray[np.float64] | None:
        """The (runs, q) answers of stored bootstrap replicates (:mod:`dpcube.release.replicates`:
        every replicate's leaves in one table, numbered by ``_replicate``) in one vectorised pass
        over that table (:func:`replicate_leaf_answers`), restoring no replicate."""
        from dpcube.release.replicates import REPLICATE_COLUMN

        t = packed["leaves"]
        rects = np.stack(
            [column_numpy(t, n).astype(np.int64) for n in ("row0", "row1", "col0", "col1")],
            axis=1,
        )
        counts = np.asarray(column_numpy(t, "count"), dtype=np.float64)
        replicate = column_numpy(t, REPLICATE_COLUMN).astype(np.int64)
        if len(replicate) > 1 and np.any(np.diff(replicate) < 0):
            order = np.argsort(replicate, kind="stable")
            rects, counts, replicate = rects[order], counts[order], replicate[order]
        return replicate_leaf_answers(
            self.shape, rects, counts, replicate, runs, self.boxes(queries)
        )

    def _overlaps(
        self, queries: Sequence[Mapping[str, Any]]
    ) -> tuple[int, NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
        """``(q, query, leaf, frac)``: the leaves each query meets and the share ``|Q & L| /
        |L|`` of each that it holds (:func:`leaf_overlaps`; leaves it misses are left out)."""
        boxes = self.boxes(queries)
        key = boxes.tobytes()
        last = self._last_overlaps  # read once: a service may answer from several threads
        if last is not None and last[0] == key:
            found: tuple[int, NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]
            found = last[1]
            return found
        if self._leaf_map is None:
            self._leaf_map = leaf_map(self.shape, self.rects)
        query, leaf, cells = leaf_overlaps(self.shape, self.rects, boxes, self._leaf_map)
        r = self.rects[leaf]
        area = ((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2])).astype(np.float64)
        overlaps = (len(boxes), query, leaf, cells / area)
        self._last_overlaps = (key, overlaps)
        return overlaps

    def bootstrap_world(self, dispersion: float | None = None) -> BootstrapWorld:
        """The parametric bootstrap's world: every leaf's count, made a non-negative whole number
        (:func:`~dpcube.release.uncertainty.integer_truth` over the leaves), scattered over its
        cells by a multiplicative cascade as clustered as the release's own leaf pairs
        (:func:`cascade_spread` with :meth:`uniformity_dispersion`), is the truth; each replicate
        re-runs the whole mechanism on it, re-choosing the partition, so the structural error and
        the uniformity error of leaves cutting clustered points are part of the bootstrap. (A
        world spread evenly inside every leaf hid the uniformity error: experiments/docs/coverage.md.)

        Where every re-run cuts (nearly) the same leaves (:attr:`reruns_keep_the_leaves`: UG, the
        quadtree, AG), a clustered world would put one draw
        of its layout into every replicate alike; the world is then spread as evenly as whole
        counts allow (dispersion 0: binomial draws) and the uniformity error is added from the
        model's variance by :func:`~dpcube.release.uncertainty.answer_uncertainty` instead.
        With :data:`DENOISE_CLUSTERED_WORLD` (off by default) each leaf's count is first
        discounted by its noise (:func:`noise_discounted_counts`: ``sqrt(max(c^2 - v, 0))``,
        ``v`` from :meth:`leaf_noise_variances`): spreading a noise leaf's positive count as
        points, which the cascade piles into a few cells, makes the world rougher than the truth
        in empty space; the de-noised world narrows those intervals but did not bring the rows it
        was meant for into the target (experiments/docs/coverage.md, "Empty rectangles").
        ``dispersion`` overrides the world's dispersion (diagnostics only:
        ``experiments/coverage_shift.py``)."""
        from dpcube.histogram import Histogram
        from dpcube.release.cells import CellRelease
        from dpcube.release.integer import is_integer
        from dpcube.release.uncertainty import (
            BootstrapWorld,
            integer_truth,
            rebuild_mechanism,
            rerun,
        )

        assert self.schema is not None
        counts = np.asarray(self.leaf_counts, dtype=np.float64)
        # a fixed seed: the world is a function of the release (stored replicates rebuild it)
        rng = np.random.default_rng(CASCADE_SEED)
        if dispersion is None:
            independent = self.reruns_keep_the_leaves
            dispersion = 0.0 if independent else self.uniformity_dispersion()
            if not independent and DENOISE_CLUSTERED_WORLD:
                counts = noise_discounted_counts(counts, self.leaf_noise_variances())
        whole = integer_truth(counts)
        truth = cascade_spread(self.shape, self.rects, whole, dispersion, rng)
        mechanism = rebuild_mechanism(self.metadata)
        data = Histogram(self.schema, truth, privacy_unit=mechanism.privacy_unit)
        if is_integer(self.metadata):
            return BootstrapWorld(
                CellRelease(self.schema, self.metadata, truth),
                lambda rng: rerun(mechanism, data, rng).to_integer(),
            )
        return BootstrapWorld(
            CellRelease(self.schema, self.metadata, truth), lambda rng: rerun(mechanism, data, rng)
        )

    @property
    def integer_unavailable(self) -> str | None:
        """None: every leaf release can be made whole (:meth:`to_integer`)."""
        return None

    def to_integer(self) -> LeafRelease:
        """The leaf counts as non-negative whole numbers, every block of leaves summing exactly
        to its whole figure and the leaves to the released total made whole
        (:func:`dpcube.release.integer.topdown_blocks`: TopDown on a quadtree of the leaves,
        taken in the Z order of their centres (:func:`~dpcube.release.integer.morton_order`) in
        blocks of 4, 16, ...; each leaf moves by less than 1 from its projection). Only the
        leaves are released (the
        tree's inner nodes are not), so the total and every union of leaves are sums of whole
        leaf counts; a query that cuts a leaf still takes its area share (the uniformity
        assumption), which need not be whole.

        The leaves' own noisy counts before this step stay with the release
        (:attr:`raw_counts`, with their variances), so the ``bound`` intervals (from those
        counts, widened to hold the answer: :meth:`bound_interval_many`) stay valid; the
        whole counts carry no variance of their own. Post-processing: nothing is charged."""
        from dpcube.release.integer import (
            integer_metadata,
            is_integer,
            morton_order,
            topdown_blocks,
        )

        if is_integer(self.metadata):
            return self
        own = self.raw_counts if self.raw_counts is not None else self.leaf_counts
        own_variances = self.raw_variances if self.raw_counts is not None else self.variances
        metadata = integer_metadata(
            self.metadata,
            steps=[
                "tree: the leaves in the Z order of their centres, in blocks of 4, blocks of 4 "
                "blocks, ... up to the total, each block's figure the sum of its leaves' counts",
                "total: made the nearest whole number >= 0",
                "each level: every block's children projected in L2 onto the non-negative "
                "figures summing to the block's whole figure, then rounded under it by the "
                "largest remainders (each moves by less than 1)",
            ],
            intervals=(
                "bound intervals from the leaves' own noisy counts (kept as raw_count), widened "
                "to hold the answer"
                if own_variances is not None
                else "as the release before this step: its leaves' own noise is not known"
            ),
        )
        assert self.schema is not None
        order = morton_order(
            (self.rects[:, 0] + self.rects[:, 1]) // 2, (self.rects[:, 2] + self.rects[:, 3]) // 2
        )
        whole = np.zeros(len(order), dtype=np.int64)
        whole[order] = topdown_blocks(np.asarray(self.leaf_counts, dtype=np.float64)[order])
        return LeafRelease(
            self.schema,
            metadata,
            self.rects,
            whole,
            None,
            self.budget_paths,
            raw_counts=None if own_variances is None else np.asarray(own),
            raw_variances=own_variances,
        )

    def assumed_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        """The part of each answer that rests on the uniformity assumption: ``sum |c_L| |Q & L| /
        |L|`` over the leaves L the query cuts (neither inside it nor outside it). The bootstrap
        cannot see how the real points lie inside a leaf, so an interval is only as good as this
        part is small (experiments/docs/coverage.md)."""
        q, query, leaf, frac = self._overlaps(queries)
        weight = np.abs(np.asarray(self.leaf_counts, dtype=np.float64))
        cut = frac < 1
        assumed = np.bincount(query[cut], weights=weight[leaf[cut]] * frac[cut], minlength=q)
        return np.asarray(assumed, dtype=np.float64)

    @property
    def splits_equalise_counts(self) -> bool:
        """Whether the mechanism splits where the two halves hold equal counts (the kd-tree's
        medians): then its leaf pairs hold equal counts by construction, and
        :meth:`uniformity_dispersion` cannot see how clustered the points are; the intervals are
        widened by the bound instead (:func:`dpcube.release.uncertainty.answer_uncertainty`)."""
        # an unknown mechanism: assume the worst, keep the bound
        return self._mechanism_flag("splits_equalise_counts", unknown=True)

    def _mechanism_flag(self, name: str, *, unknown: bool) -> bool:
        """The boolean class attribute ``name`` of the mechanism that made this release (False
        where it has none), or ``unknown`` where the mechanism is not registered."""
        from dpcube import registry

        try:
            cls = registry.resolve(registry.MECHANISMS, self.metadata.mechanism, "mechanism")
        except KeyError:
            return unknown
        return bool(getattr(cls, name, False))

    @property
    def reruns_keep_the_leaves(self) -> bool:
        """Whether a re-run of the mechanism on the bootstrap world cuts (nearly) the same leaves
        as the release: UG's grid and the quadtree depend on the data only through a noisy total;
        AG's second-level grids are sized from noisy counts of its fixed first-level cells, whose
        totals the world keeps. Then the uniformity error in the bootstrap errors of a clustered
        world is *one draw* of its layout inside those leaves, the same in every replicate (a
        shift, not a spread). Its size varies a lot from query to query (the cascade's shares are
        heavy-tailed: on GeoLife over Beijing, UG at epsilon 0.1, the shift was a median 0.19 and
        0.52 of the model's sd on the flagged answers of two releases, and the bootstrap's mean
        square error a quarter of the actual in the first:
        ``experiments/coverage_shift.py``), so the bootstrap world is spread evenly
        (:meth:`bootstrap_world`) and the interval widened by the model's variance instead
        (:func:`dpcube.release.uncertainty.answer_uncertainty`). Trees that re-choose their
        leaves from the data (HTF, PrivTree, the kd-tree) cut the clustered world differently in
        each re-run and keep it."""
        # unknown: splits_equalise_counts already keeps the bound
        return self._mechanism_flag("reruns_keep_the_leaves", unknown=False)

    def uniformity_dispersion(self) -> float:
        """``1 / (kappa + 1)`` of the Beta model of :meth:`uniformity_variance_many`, estimated
        from the release itself (:func:`leaf_pair_dispersion` on the pairs of leaves that share a
        whole edge, discounting the leaf noise variances where the release knows them)."""
        return leaf_pair_dispersion(self.rects, self.leaf_counts, self.variances)

    def leaf_noise_variances(self) -> NDArray[np.float64] | None:
        """The noise variance of each leaf count: :attr:`variances` where the release knows them,
        else (consistency post-processing, e.g. the kd-tree) one variance estimated from the
        release's negative counts (:func:`negative_count_variance`), or None."""
        if self.variances is not None:
            return self.variances
        from dpcube.release.integer import is_integer

        if is_integer(self.metadata) and self.raw_variances is not None:
            # whole counts have no negatives to estimate from: their own noisy counts' variance
            return self.raw_variances
        v = negative_count_variance(self.leaf_counts)
        return None if v is None else np.full(len(self.leaf_counts), v)

    def uniformity_variance_many(
        self, queries: Sequence[Mapping[str, Any]], kappa: float, discount_noise: bool = False
    ) -> NDArray[np.float64]:
        """A variance for the uniformity error the bootstrap cannot see, per answer.

        A leaf L that the query cuts holds ``n_L`` points (estimated by ``max(c_L, 0)``), a
        fraction ``p`` of which lie inside the query; the answer assumes ``p = f = |Q & L| / |L|``
        (area share). Whatever the points' layout, ``p`` lies in [0, 1], so if its mean is ``f``
        its variance is at most ``f (1 - f)`` (the Bhatia-Davis inequality): ``kappa = 0`` gives
        that bound. A Beta(kappa f, kappa (1 - f)) model of ``p`` gives ``f (1 - f) / (kappa +
        1)`` (``kappa = 1``: half the bound; large ``kappa``: points close to uniform). Leaves the
        query does not cut have ``f`` 0 or 1 and add nothing; leaves are taken as independent:
        ``sum_L max(c_L, 0)^2 f_L (1 - f_L) / (kappa + 1)``. ``discount_noise``: estimate
        ``n_L^2`` by ``max(c_L, 0)^2 - v_L`` clipped at 0 (:func:`noise_discounted_counts`,
        ``v_L`` from :meth:`leaf_noise_variances`) instead of counting a leaf's noise as points.
        """
        q, query, leaf, frac = self._overlaps(queries)
        noise = self.leaf_noise_variances() if discount_noise else None
        weight = noise_discounted_counts(self.leaf_counts, noise) ** 2
        spread = np.bincount(query, weights=weight[leaf] * frac * (1.0 - frac), minlength=q)
        return np.asarray(spread / (kappa + 1.0), dtype=np.float64)

    def uniformity_widening(
        self, queries: Sequence[Mapping[str, Any]], kappa: float
    ) -> tuple[NDArray[np.float64] | None, NDArray[np.float64], str | None]:
        """How :func:`~dpcube.release.uncertainty.answer_uncertainty` accounts for the uniformity
        error the bootstrap cannot see: ``(extra, modelled, note)``, ``extra`` the variance added
        to each interval in quadrature (None: not widened), ``modelled`` the modelled uniformity
        variance an answer is flagged by (``Uncertainty.untrusted``), ``note`` what the reason line
        says of the widening.

        - Splits that equalise sibling counts (:attr:`splits_equalise_counts`: the kd-tree, or an
          unknown mechanism): the leaf pairs cannot tell the clustering, so the interval is
          widened by the Bhatia-Davis bound over ``kappa + 1``, each cut leaf's noise variance
          discounted from its squared count (a leaf's noise is not points: it matters in empty
          space).
        - Re-runs that cut the same leaves (:attr:`reruns_keep_the_leaves`: UG, the quadtree,
          AG): the world is even (a clustered one would put one draw of its layout, a shift, into
          every replicate), so the model's variance ``r V_u`` of the layout inside the cut leaves
          is added.
        - Otherwise (HTF, PrivTree) the clustered world carries the uniformity error: not
          widened; ``r V_u`` only flags answers.
        """
        if self.splits_equalise_counts:
            bound = self.uniformity_variance_many(queries, 0.0, discount_noise=True)
            extra = bound / (kappa + 1.0)
            return (
                extra,
                extra,
                f"widened by the uniformity error of the leaves each query cuts ({KAPPA_NOTE})",
            )
        modelled = self.uniformity_variance_many(queries, 0.0) * self.uniformity_dispersion()
        if self.reruns_keep_the_leaves:
            note = f"widened by the modelled uniformity error of the leaves each query cuts ({DISPERSION_NOTE})"
            return modelled, modelled, note
        return None, modelled, None

    #: What a bound interval rests on (:func:`~dpcube.release.uncertainty.uncertainty_kind`).
    bound_reason = (
        "the noisy counts of the leaves a query covers and of those it touches, with their exact "
        "noise; it holds whatever the points do inside the leaves the query cuts"
    )

    @property
    def bound_unavailable(self) -> str | None:
        """Why :meth:`bound_interval_many` cannot be used (None where it can): it needs each
        released leaf count to be the leaf's true count plus its own independent discrete Laplace
        draw of known variance, drawn after the partition was chosen (UG, PrivTree, HTF, Uniform,
        the quadtree and kd-tree without consistency), or the release to keep such counts from
        before its post-processing (:attr:`raw_counts`: the consistent trees, AG)."""
        distribution = str((self.metadata.noise or {}).get("distribution", ""))
        if self.variances is None and self.raw_variances is None:
            return (
                "its leaf counts are post-processed (consistency or a combination of levels), so "
                "a leaf's noise is not its own known draw, and the release does not carry the "
                "leaves' own noisy counts (saved before they were kept)"
            )
        if not distribution.startswith("discrete_laplace"):
            return f"its leaf noise is {distribution or 'not stated'}, not discrete Laplace"
        return None

    def bound_interval_many(
        self, queries: Sequence[Mapping[str, Any]], level: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], list[str]]:
        """``(lower, upper, reasons)``: an interval at ``level`` for each query's true count that
        holds whatever the points do inside the leaves (see :attr:`bound_unavailable` for when).

        Proof. Leaf L holds ``n_L >= 0`` true points and is released as ``c_L = n_L + e_L``, the
        ``e_L`` independent discrete Laplace draws of known variance ``v_L``, drawn after (and
        independently of) the choice of the partition, so that given the partition they keep
        that distribution. A query Q covers the leaves C (inside Q) and touches the leaves T (C
        and the leaves Q cuts). Its true count is ``sum_C n_L + sum_{T \\ C} n_{L,Q}`` with ``0 <=
        n_{L,Q} <= n_L`` whatever the layout inside the cut leaves, so

            sum_C n_L  <=  truth  <=  sum_T n_L.

        (The released answer ``sum_C c_L + sum_{T \\ C} f_L c_L``, ``f_L`` the area share, has
        uniformity error ``n_{L,Q} - f_L n_L`` in ``[-f_L n_L, (1 - f_L) n_L]`` per cut leaf: the
        same bound written about the answer.) ``sum_C n_L = sum_C c_L - sum_C e_L`` and
        ``P(sum_C e_L >= t_C) <= alpha / 2`` for the point ``t_C`` of
        :func:`~dpcube.release.bounds.discrete_laplace_sum_point`, so ``sum_C c_L - t_C`` is
        below ``sum_C n_L`` with probability at least ``1 - alpha/2``; likewise (the noise is
        symmetric) ``sum_T c_L + t_T`` is above ``sum_T n_L`` with probability at least ``1 -
        alpha/2``. By Bonferroni (the confidence split: ``alpha/2`` for the covered leaves'
        noise, ``alpha/2`` for the touched leaves' count, ``alpha = 1 - level``) both hold
        together with probability at least ``level``, and then the truth is in ``[sum_C c_L -
        t_C, sum_T c_L + t_T]``. Clipping the lower end at 0 (a count is never negative),
        raising the upper end to at least the lower one (all the touched leaves' noise negative
        can put it below 0; an empty interval would only say the ``alpha`` event happened) and
        taking the hull with the released answer only widen it. A query that cuts no leaf gets
        ``C = T``: an interval of the noise alone.

        A post-processed release (the consistent quadtree and kd-tree, AG) answers from its
        post-processed counts, whose noise mixes several draws; the proof above then runs on
        the leaves' own noisy counts before post-processing (:attr:`raw_counts`, each ``n_L``
        plus the leaf's own draw, of variance :attr:`raw_variances`), which the release keeps.
        """
        from dpcube.release.bounds import discrete_laplace_sum_point

        why = self.bound_unavailable
        if why is not None:
            raise ReleaseError(f"no bound interval for this release: {why}")
        # a post-processed release answers from its consistent counts; its bound rests on the
        # leaves' own noisy counts (raw_counts), whose noise is each leaf's own draw
        own = self.raw_counts if self.raw_counts is not None else self.leaf_counts
        variances = self.raw_variances if self.raw_variances is not None else self.variances
        assert variances is not None
        boxes = self.boxes(queries)
        q, query, leaf, frac = self._overlaps(queries)
        groups, group = np.unique(variances, return_inverse=True)
        group = np.ravel(group)
        counts = np.asarray(own, dtype=np.float64)
        k = len(groups)
        inside = frac >= 1.0  # every entry touches its query
        covered_sum = np.bincount(query[inside], weights=counts[leaf[inside]], minlength=q)
        touched_sum = np.bincount(query, weights=counts[leaf], minlength=q)
        cell = query * k + group[leaf]
        covered_m = np.bincount(cell[inside], minlength=q * k).reshape(q, k).astype(np.float64)
        touched_m = np.bincount(cell, minlength=q * k).reshape(q, k).astype(np.float64)
        cuts = np.bincount(query[~inside], minlength=q)
        tail = (1.0 - level) / 2.0
        lower = covered_sum - discrete_laplace_sum_point(covered_m, groups, tail)
        upper = touched_sum + discrete_laplace_sum_point(touched_m, groups, tail)
        answers = self.answer_boxes(boxes)
        lower = np.maximum(np.minimum(lower, answers), 0.0)
        upper = np.maximum(np.maximum(upper, answers), lower)  # never empty: [0, -1] -> [0, 0]
        reasons = [
            (
                f"bound valid on any data: the query cuts {k} leaves; from the {_pct(level)} "
                "limits of the covered leaves' and the touched leaves' noisy sums (alpha/2 each), "
                "whatever the points do inside the cut leaves"
                if k
                else "bound valid on any data: the query cuts no leaf; the noise of the leaves "
                "it covers (exact discrete Laplace distribution)"
            )
            for k in cuts.tolist()
        ]
        return lower, upper, reasons

    def variance_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        """The noise-only variance of each answer (independent leaf noises); NOT the answer's
        error, which also holds the uniformity assumption's bias (see ``bootstrap_world``)."""
        if self.variances is None:
            return np.full(len(queries), np.nan)
        q, query, leaf, frac = self._overlaps(queries)
        spread = np.bincount(query, weights=self.variances[leaf] * frac**2, minlength=q)
        return np.asarray(spread, dtype=np.float64)

    def table_cells(
        self, attributes: Sequence[str] | None = None, where: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], Sequence[Mapping[str, Any]]]:
        """One row per leaf (its latitude/longitude bounds; the query of exactly its grid
        cells), or with ``attributes``/``where`` the grid cells (:meth:`Release.table_cells`)."""
        if attributes is not None or where:
            return super().table_cells(attributes, where)
        assert self.schema is not None
        r0, r1, c0, c1 = (self.rects[:, i] for i in range(4))
        labels: dict[str, Any] = {}
        spatial = [a for a in self.schema.attributes if isinstance(a, Spatial)]
        if spatial:
            (attribute,) = spatial
            lat, lon = (np.asarray(s.edges) for s in attribute.scales)
            name = attribute.name
            labels = {
                f"{name}_lat_lo": lat[r0].tolist(),
                f"{name}_lat_hi": lat[r1].tolist(),
                f"{name}_lon_lo": lon[c0].tolist(),
                f"{name}_lon_hi": lon[c1].tolist(),
            }
            rects = self.rects.tolist()
            return labels, self._boxed_leaves(
                lambda k: {
                    name: {"bins": [[rects[k][0], rects[k][1] - 1], [rects[k][2], rects[k][3] - 1]]}
                }
            )
        rows, cols = self.schema.attributes  # two ordinal axes (grid_shape checked it)
        for axis, lo, hi in ((rows, r0, r1), (cols, c0, c1)):
            edges = np.asarray(getattr(axis, "edges", ()), dtype=np.float64)
            labels[f"{axis.name}_lo"] = edges[lo].tolist()
            labels[f"{axis.name}_hi"] = edges[hi].tolist()
        rects = self.rects.tolist()
        return labels, self._boxed_leaves(
            lambda k: {
                rows.name: {"bins": [rects[k][0], rects[k][1] - 1]},
                cols.name: {"bins": [rects[k][2], rects[k][3] - 1]},
            }
        )

    def _boxed_leaves(self, row: Any) -> BoxedQueries:
        """The queries of exactly each leaf's cells, with their boxes (``row(k)``: leaf ``k``'s
        query dict, built only when asked for)."""
        r = self.rects
        boxes = np.stack([r[:, 0], r[:, 1] - 1, r[:, 2], r[:, 3] - 1], axis=1).reshape(-1, 2, 2)
        return BoxedQueries(boxes, {}, row)

    # -- the labelled table, the explorer and the report -----------------------------------
    def table_size(self, cuboid: Sequence[str] | None, where: Mapping[str, Any]) -> int:
        """One row per leaf (:meth:`table_cells`), or with ``cuboid``/``where`` the grid
        cells (:meth:`Release.table_size`)."""
        if cuboid is None and not where:
            return len(self.rects)
        return super().table_size(cuboid, where)

    def explorer_view(self) -> dict[str, Any]:
        """The ``bounds`` of each spatial attribute (bounding box, grid resolution) and the
        number of ``leaves``."""
        if self.schema is None:
            return {}
        spatial = [a for a in self.schema.attributes if isinstance(a, Spatial)]
        return {
            "bounds": {
                a.name: {"bbox": list(a.bbox), "resolution": list(a.resolution)} for a in spatial
            },
            "leaves": len(self.rects),
        }

    def report_parts(self, max_rows: int) -> tuple[ReportPart, ...]:
        """The map with the leaves outlined, then the ``max_rows`` leaves with the largest
        released counts (coordinates to 8 significant digits: not rounded away)."""
        labels, queries = self.table_cells()
        order = np.argsort(-np.asarray(self.leaf_counts, dtype=np.float64), kind="stable")
        order = order[:max_rows]
        shown = (
            f"the {len(order):,} leaves with the largest released counts, of {len(queries):,}"
            if len(queries) > len(order)
            else f"all {len(queries):,} leaves"
        )
        leaves = ReportTable(
            ident="table-leaves",
            heading=f"Released leaves ({shown})",
            labels={n: [f"{float(labels[n][i]):.8g}" for i in order.tolist()] for n in labels},
            queries=[queries[i] for i in order.tolist()],
        )
        section = ReportSection(
            ident="spatial", title="Location map", tables=(leaves,), map_outlines=self.rects
        )
        return (section,)

    def tables(self) -> dict[str, pa.Table]:
        columns: dict[str, Any] = {
            name: pa.array(self.rects[:, i].astype(np.int32))
            for i, name in enumerate(("row0", "row1", "col0", "col1"))
        }
        columns["count"] = pa.array(self.leaf_counts)
        if self.variances is not None:
            columns["variance"] = pa.array(self.variances)
        if self.budget_paths is not None:
            columns["path_epsilon"] = pa.array(self.budget_paths)
        if self.raw_counts is not None and self.raw_variances is not None:
            columns["raw_count"] = pa.array(self.raw_counts)
            columns["raw_variance"] = pa.array(self.raw_variances)
        return {"leaves": pa.table(columns)}

    @classmethod
    def restore(
        cls,
        schema: Schema | None,
        metadata: ReleaseMetadata,
        tables: dict[str, pa.Table],
        state: dict[str, Any],
    ) -> LeafRelease:
        if schema is None:
            raise ReleaseError("a spatial leaf release needs its schema in the manifest")
        t = tables.get("leaves")
        if t is None:
            raise ReleaseError("a spatial leaf release has no 'leaves' table")
        missing = [n for n in ("row0", "row1", "col0", "col1", "count") if n not in t.column_names]
        if missing:
            raise ReleaseError(f"the 'leaves' table has no column {missing[0]!r}")
        rects = np.stack(
            [column_numpy(t, n).astype(np.int64) for n in ("row0", "row1", "col0", "col1")],
            axis=1,
        )
        check_tiling(rects, grid_shape(schema))
        names = t.column_names
        return cls(
            schema,
            metadata,
            rects,
            column_numpy(t, "count"),
            column_numpy(t, "variance") if "variance" in names else None,
            column_numpy(t, "path_epsilon") if "path_epsilon" in names else None,
            raw_counts=column_numpy(t, "raw_count") if "raw_count" in names else None,
            raw_variances=column_numpy(t, "raw_variance") if "raw_variance" in names else None,
        )

    def report_lines(self) -> list[str]:
        lines = super().report_lines()
        lines.append(
            f"- leaves: {len(self.rects)} rectangles tiling a {self.shape[0]} x {self.shape[1]} grid"
        )
        if self.budget_paths is not None and len(self.budget_paths):
            lines.append(
                f"- epsilon per root-to-leaf path: min {self.budget_paths.min():.6g}, max {self.budget_paths.max():.6g}"
            )
        return lines


def check_tiling(rects: NDArray[np.int64], shape: tuple[int, int]) -> None:
    """Refuse leaves (rows ``[row0, row1)`` x columns ``[col0, col1)``) that do not tile the
    schema's ``shape``: a rectangle empty or outside the grid, or areas that do not add up to the
    grid's (a schema or table edited after the save)."""
    rows, cols = shape
    r0, r1, c0, c1 = rects.T
    if len(rects) and (
        r0.min() < 0
        or c0.min() < 0
        or r1.max() > rows
        or c1.max() > cols
        or (r1 <= r0).any()
        or (c1 <= c0).any()
    ):
        raise ReleaseError(
            f"the 'leaves' table holds a rectangle outside the schema's {rows} x {cols} grid; "
            "the schema or the table was edited: do not use this release"
        )
    area = int(((r1 - r0) * (c1 - c0)).sum())
    if area != rows * cols:
        raise ReleaseError(
            f"the 'leaves' table covers {area:,} cells but the schema's {rows} x {cols} grid "
            f"has {rows * cols:,}; the schema or the table was edited: do not use this release"
        )
