"""Summed-area tables: zero-padded d-dimensional prefix sums and box sums by inclusion-exclusion.

numpy only (no scipy), so that answering a saved release (``dpcube query``) stays light;
:mod:`dpcube.linalg.boxes` builds the box-workload Grams on the same two functions.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
from numpy.typing import NDArray


def prefix_sums(counts: NDArray[Any]) -> NDArray[Any]:
    """Zero-padded d-dimensional prefix sums: ``P[i1..id] = sum counts[:i1, ..., :id]``.

    Integer counts are summed exactly in int64, real ones in float64.

    >>> prefix_sums(np.array([[1, 2], [3, 4]]))
    array([[ 0,  0,  0],
           [ 0,  1,  3],
           [ 0,  4, 10]])
    """
    dtype = np.int64 if np.issubdtype(counts.dtype, np.integer) else np.float64
    p = np.zeros(tuple(n + 1 for n in counts.shape), dtype=dtype)
    inner = tuple(slice(1, None) for _ in counts.shape)
    p[inner] = counts
    for axis in range(counts.ndim):
        np.cumsum(p, axis=axis, out=p)
    return p


#: Below this many boxes, :func:`box_sums` gathers all corners at once; from it on, corner by
#: corner (fewer, larger numpy calls: faster for many boxes, and less memory).
FEW_BOXES = 64


@functools.lru_cache(maxsize=64)
def _corner_plan(
    shape: tuple[int, ...], dtype: np.dtype[Any]
) -> tuple[NDArray[np.bool_], NDArray[Any], NDArray[np.int64], NDArray[np.int64]]:
    """For prefix sums of ``shape``: the 2^d corners of a box (True: the upper end on that
    axis) in the order of ``itertools.product((0, 1), repeat=d)``, their inclusion-exclusion
    signs (in ``dtype``), the C-order strides and the largest index per axis."""
    d = len(shape)
    corners = np.array(list(itertools.product((0, 1), repeat=d)), dtype=bool).reshape(-1, d)
    signs = np.where((d - corners.sum(axis=1)) % 2 == 0, 1, -1).astype(dtype)
    dims = np.asarray(shape, dtype=np.int64)
    strides = np.concatenate([np.cumprod(dims[:0:-1])[::-1], [1]]).astype(np.int64)
    return corners, signs, strides, dims - 1


def box_sums(prefix: NDArray[Any], boxes: NDArray[np.int64]) -> NDArray[Any]:
    """Sum of the cells in each box by inclusion-exclusion over the 2^d corners: O(2^d) a box.

    ``boxes`` has shape (q, d, 2) with inclusive [lo, hi] per axis. Fewer than
    :data:`FEW_BOXES` boxes (a service answering one query) have all their corners gathered
    at once, a handful of numpy calls whatever d; more are summed corner by corner. Either way
    the signed corner values are added in corner order, so both give the same sums to the bit.

    >>> P = prefix_sums(np.arange(12).reshape(3, 4))
    >>> box_sums(P, np.array([[[1, 2], [1, 3]]]))
    array([48])
    >>> box_sums(P, np.array([[[0, 2], [0, 3]], [[2, 2], [3, 3]]])).tolist()
    [66, 11]
    """
    q, d, _ = boxes.shape
    lo, hi = boxes[:, :, 0], boxes[:, :, 1] + 1
    if 0 < q < FEW_BOXES:
        corners, signs, strides, top = _corner_plan(prefix.shape, prefix.dtype)
        if lo.min() < 0 or np.any(hi > top):
            raise ValueError("invalid entry in coordinates array: a box outside the prefix sums")
        index = np.where(corners, hi[:, None, :], lo[:, None, :])  # (q, 2^d, d)
        values = prefix.ravel()[index @ strides] * signs  # (q, 2^d)
        return np.cumsum(values, axis=1)[:, -1]  # corner order, as the loop below
    out = np.zeros(q, dtype=prefix.dtype)
    for corner in itertools.product((0, 1), repeat=d):
        pick = np.array(corner, dtype=bool)
        index = np.where(pick, hi, lo)
        sign = 1 if (d - int(pick.sum())) % 2 == 0 else -1
        flat = np.ravel_multi_index(tuple(index.T), prefix.shape)
        out += sign * prefix.ravel()[flat]
    return out


__all__ = ["FEW_BOXES", "box_sums", "prefix_sums"]
