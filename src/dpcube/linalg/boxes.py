"""Box (axis-aligned range) queries over a grid, and their Gram matrix kept as boxes.

A 0/1 box query over the grid ``d₁ x … x d_k`` is the Kronecker product of the per-axis interval
indicators ``r₁ ⊗ … ⊗ r_k``, so the Gram of a workload of q boxes is the sum of q Kronecker
products ``G = Σ_q ⊗ᵢ r_qi r_qiᵀ`` (Li & Miklau 2011, Def. 2.1 and Sec. 3.3). :class:`BoxGram`
holds G as its boxes: on a 256 x 256 grid (65,536 cells) G would be a 32 GiB dense matrix, while
the boxes take 32 bytes each. Everything the planner needs follows without forming G:

- ``G x`` by summed-area tables: the box sums of x (inclusion-exclusion on the prefix sums, 2^k
  reads a box), then each sum spread back over its box (a difference array and k cumulative sums);
- ``tr(G (⊗ᵢ Cᵢ)) = Σ_q Πᵢ r_qiᵀ Cᵢ r_qi`` (:meth:`BoxGram.kron_trace`): one interval sum of each
  ``Cᵢ`` per box and axis, read off the 2-D prefix sums of ``Cᵢ`` (:func:`interval_quadratic`);
- the per-axis Gram of the other axes' weights ``Σ_q w_q r_qi r_qiᵀ`` (:meth:`BoxGram.axis_gram`,
  :func:`interval_gram`): the alternating step of OPT_⊗ on a box workload
  (:func:`dpcube.mechanisms.matrix.optimize.opt_kron_boxes`);
- on one axis, ``B G`` for a p x n matrix B without forming G (:class:`IntervalGram`): each row's
  interval sums off its prefix sums, spread back by a difference array, O(p (n + q)) instead of
  the O(p n²) of a dense product (OPT_0 on 1-D range workloads, e.g. Prefix(4096)).

>>> g = BoxGram([[[0, 1], [1, 1]], [[1, 1], [0, 1]]], (2, 2))
>>> g.dense().astype(int).tolist()
[[0, 0, 0, 0], [0, 1, 0, 1], [0, 0, 1, 1], [0, 1, 1, 2]]
>>> g.trace(), g.kron_trace([np.eye(2), np.eye(2)])
(4.0, 4.0)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse
from numpy.typing import ArrayLike, NDArray

from dpcube.linalg.operators import FloatArray, LinearOperator
from dpcube.linalg.summed_area import box_sums, prefix_sums

IntArray = NDArray[np.int64]

#: Up to this many cells :meth:`BoxGram.dense` materialises G (n x n float64: 128 MiB at 4,096).
MAX_DENSE_BOX_GRAM = 4096


def spread_over_boxes(values: ArrayLike, boxes: IntArray, dims: Sequence[int]) -> FloatArray:
    """``Σ_q values_q · 1[cell ∈ box_q]`` on the grid (the adjoint of :func:`box_sums`): a
    difference array with ±value at the 2^d corners, then a cumulative sum along every axis.

    >>> spread_over_boxes([1.0, 2.0], np.array([[[0, 1]], [[1, 2]]]), (3,)).tolist()
    [1.0, 3.0, 2.0]
    """
    v = np.asarray(values, dtype=np.float64)
    d = len(dims)
    diff = np.zeros(tuple(n + 1 for n in dims))
    lo, hi = boxes[:, :, 0], boxes[:, :, 1] + 1
    for corner in itertools.product((0, 1), repeat=d):
        pick = np.array(corner, dtype=bool)
        index = np.where(pick, hi, lo)
        sign = -1.0 if int(pick.sum()) % 2 else 1.0
        np.add.at(diff, tuple(index.T), sign * v)
    for axis in range(d):
        np.cumsum(diff, axis=axis, out=diff)
    return np.asarray(diff[tuple(slice(0, n) for n in dims)], dtype=np.float64)


def interval_quadratic(matrix: ArrayLike, intervals: IntArray) -> FloatArray:
    """``rᵀ M r`` for the 0/1 indicator r of each inclusive interval ``[lo, hi]`` (shape (q, 2)):
    the sum of the block ``M[lo:hi+1, lo:hi+1]``, read off M's 2-D prefix sums. O(n² + q).

    >>> interval_quadratic(np.arange(9.0).reshape(3, 3), np.array([[0, 1], [2, 2]])).tolist()
    [8.0, 8.0]
    """
    m = np.asarray(matrix, dtype=np.float64)
    p = np.zeros((m.shape[0] + 1, m.shape[1] + 1))
    p[1:, 1:] = m
    p = p.cumsum(axis=0).cumsum(axis=1)
    lo, hi = intervals[:, 0], intervals[:, 1] + 1
    return np.asarray(p[hi, hi] - p[lo, hi] - p[hi, lo] + p[lo, lo], dtype=np.float64)


def interval_gram(intervals: IntArray, n: int, weights: ArrayLike | None = None) -> FloatArray:
    """``Σ_q w_q r_q r_qᵀ`` for the indicators of intervals ``[lo, hi]`` on n cells (n x n).

    Entry (k, l) sums the weights of the intervals containing both, i.e. with
    ``lo ≤ min(k, l)`` and ``hi ≥ max(k, l)``: the weights accumulated at (lo, hi), summed forwards
    over lo and backwards over hi, read at (min, max). O(n² + q).

    >>> interval_gram(np.array([[0, 1], [1, 2]]), 3, [1.0, 2.0]).tolist()
    [[1.0, 1.0, 0.0], [1.0, 3.0, 2.0], [0.0, 2.0, 2.0]]
    """
    w = np.ones(len(intervals)) if weights is None else np.asarray(weights, dtype=np.float64)
    counts = np.zeros((n, n))
    np.add.at(counts, (intervals[:, 0], intervals[:, 1]), w)
    counts = np.cumsum(counts, axis=0)
    counts = np.flip(np.cumsum(np.flip(counts, axis=1), axis=1), axis=1)
    i = np.arange(n)
    return np.asarray(counts[np.minimum.outer(i, i), np.maximum.outer(i, i)], dtype=np.float64)


class BoxGram(LinearOperator):
    """``G = Σ_q w_q ⊗ᵢ r_qi r_qiᵀ`` (= WᵀW of the box queries, rows scaled by ``sqrt(w_q)``),
    symmetric n x n, never formed (module docstring). ``boxes`` has shape (q, k, 2), inclusive.
    """

    def __init__(
        self, boxes: ArrayLike, dims: Sequence[int], weights: ArrayLike | None = None
    ) -> None:
        self.dims = tuple(int(d) for d in dims)
        self.boxes = np.asarray(boxes, dtype=np.int64).reshape(-1, len(self.dims), 2)
        self.weights = (
            np.ones(len(self.boxes)) if weights is None else np.asarray(weights, dtype=np.float64)
        )
        n = math.prod(self.dims)
        self.shape = (n, n)

    def _apply(self, x: FloatArray) -> FloatArray:
        grid = x.reshape(self.dims)
        sums = box_sums(prefix_sums(grid), self.boxes) * self.weights
        return spread_over_boxes(sums, self.boxes, self.dims).ravel()

    def matvec(self, x: ArrayLike) -> FloatArray:
        v = np.asarray(x, dtype=np.float64)
        if v.ndim == 1:
            return self._apply(v)
        return np.stack([self._apply(v[:, j]) for j in range(v.shape[1])], axis=1)

    def rmatvec(self, y: ArrayLike) -> FloatArray:
        return self.matvec(y)

    def dense(self) -> FloatArray:
        if self.cols > MAX_DENSE_BOX_GRAM:
            raise MemoryError(
                f"the Gram of {len(self.boxes):,} boxes on {self.cols:,} cells would be a dense "
                f"{self.cols:,} x {self.cols:,} matrix"
            )
        return self.matvec(np.eye(self.cols))

    def sizes(self) -> FloatArray:
        """Cells of each box."""
        return np.prod(self.boxes[:, :, 1] - self.boxes[:, :, 0] + 1, axis=1).astype(np.float64)

    def trace(self) -> float:
        """``tr(G) = Σ_q w_q |box_q|``."""
        return float(np.dot(self.weights, self.sizes()))

    def axis_quadratics(self, factors: Sequence[ArrayLike | None]) -> FloatArray:
        """(q, k): ``r_qiᵀ Cᵢ r_qi`` per box and axis (``None`` = identity: the interval length)."""
        out = np.empty((len(self.boxes), len(self.dims)))
        for axis, c in enumerate(factors):
            iv = self.boxes[:, axis, :]
            out[:, axis] = iv[:, 1] - iv[:, 0] + 1 if c is None else interval_quadratic(c, iv)
        return out

    def kron_trace(self, factors: Sequence[ArrayLike | None]) -> float:
        """``tr(G (⊗ᵢ Cᵢ)) = Σ_q w_q Πᵢ r_qiᵀ Cᵢ r_qi`` (``None`` = identity factor)."""
        if len(factors) != len(self.dims):
            raise ValueError(f"{len(factors)} factors for a grid of {len(self.dims)} axes")
        return float(np.dot(self.weights, np.prod(self.axis_quadratics(factors), axis=1)))

    def axis_gram(self, axis: int, box_weights: ArrayLike | None = None) -> FloatArray:
        """``Σ_q w_q v_q r_qi r_qiᵀ`` on one axis (``v_q`` = ``box_weights``, default 1)."""
        w = self.weights if box_weights is None else self.weights * np.asarray(box_weights)
        return interval_gram(self.boxes[:, axis, :], self.dims[axis], w)


class IntervalGram:
    """``G = Σ_q w_q r_q r_qᵀ`` for q inclusive intervals ``[lo, hi]`` on n cells (a 1-D range
    workload's Gram), applied from the left to a block of rows without forming G.

    ``B G`` (:meth:`left_multiply`): the interval sums ``s = B R ᵀ`` of every row of B (two reads
    of its prefix sums per interval), weighted, then ``(s w) R`` as a difference array (+ at lo,
    − after hi: one sparse product) and a cumulative sum. O(p (n + q)) for p rows.

    >>> iv = np.array([[0, 1], [1, 2]])
    >>> g = IntervalGram(iv, 3, [1.0, 2.0])
    >>> bool(np.allclose(g.left_multiply(np.eye(3)), interval_gram(iv, 3, [1.0, 2.0])))
    True
    >>> g.diagonal().tolist(), g.trace()
    ([1.0, 3.0, 2.0], 6.0)
    """

    def __init__(self, intervals: ArrayLike, n: int, weights: ArrayLike | None = None) -> None:
        self.intervals = np.asarray(intervals, dtype=np.int64).reshape(-1, 2)
        self.n = int(n)
        self.shape = (self.n, self.n)
        q = len(self.intervals)
        self.weights = np.ones(q) if weights is None else np.asarray(weights, dtype=np.float64)
        self._lo, self._hi = self.intervals[:, 0], self.intervals[:, 1] + 1
        # (q, n + 1): +w at lo, -w at hi + 1; a row of interval sums times it is the difference
        # array of the spread-back sums.
        rows = np.repeat(np.arange(q), 2)
        cols = np.stack([self._lo, self._hi], axis=1).ravel()
        vals = np.stack([self.weights, -self.weights], axis=1).ravel()
        self._scatter = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(q, self.n + 1))

    @property
    def queries(self) -> int:
        return len(self.intervals)

    def left_multiply(self, b: ArrayLike) -> FloatArray:
        """``B G`` for B of shape (p, n)."""
        rows = np.atleast_2d(np.asarray(b, dtype=np.float64))
        pre = np.zeros((rows.shape[0], self.n + 1))
        np.cumsum(rows, axis=1, out=pre[:, 1:])
        sums = pre[:, self._hi] - pre[:, self._lo]  # (p, q): B Rᵀ
        diff = np.asarray((self._scatter.T @ sums.T).T)  # (p, n + 1)
        return np.cumsum(diff[:, : self.n], axis=1)

    def diagonal(self) -> FloatArray:
        """``G_kk``: the weight of the intervals containing cell k."""
        diff = np.zeros(self.n + 1)
        np.add.at(diff, self._lo, self.weights)
        np.add.at(diff, self._hi, -self.weights)
        return np.cumsum(diff[: self.n])

    def trace(self) -> float:
        """``tr(G) = Σ_q w_q |interval_q|``."""
        return float(np.dot(self.weights, self._hi - self._lo))

    def dense(self) -> FloatArray:
        """G as an n x n matrix (:func:`interval_gram`)."""
        return interval_gram(self.intervals, self.n, self.weights)


__all__ = [
    "MAX_DENSE_BOX_GRAM",
    "BoxGram",
    "IntervalGram",
    "box_sums",
    "interval_gram",
    "interval_quadratic",
    "prefix_sums",
    "spread_over_boxes",
]
