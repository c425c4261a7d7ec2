"""Cumulative group-size vectors and the approximate cumulative mechanism M_CDP^~.

Fioretto, Van Hentenryck, Zhu, Artificial Intelligence 296 (2021), Secs. 8-9.1, Lemma 6,
Algorithm 2 (from Fioretto and Van Hentenryck, CP 2019).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def gamma(n: NDArray[np.int64]) -> NDArray[np.int64]:
    """Gamma(n)_s = sum_{s' <= s} n_{s'} along the last axis.

    >>> gamma(np.array([2, 0, 1])).tolist()
    [2, 2, 3]
    """
    return np.cumsum(n, axis=-1)


def gamma_inv(c: NDArray[np.int64]) -> NDArray[np.int64]:
    """Gamma^-1(c)_1 = c_1, Gamma^-1(c)_s = c_s - c_{s-1}.

    >>> gamma_inv(np.array([2, 2, 3])).tolist()
    [2, 0, 1]
    """
    return np.diff(c, axis=-1, prepend=0)


def isotonic_nonneg(rows: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per row, argmin ||c - c~||^2 s.t. 0 <= c_1 <= ... <= c_k (Algorithm 2 line 2).

    PAVA, then clipping at 0 (exact for a lower bound on an isotonic problem).

    >>> isotonic_nonneg(np.array([[1.7, 1.6, 3.2], [-1.0, 0.5, 0.2]])).round(2).tolist()
    [[1.65, 1.65, 3.2], [0.0, 0.35, 0.35]]
    """
    from scipy.optimize import isotonic_regression

    rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    out = np.empty_like(rows)
    for i, row in enumerate(rows):
        out[i] = isotonic_regression(row, increasing=True).x
    return np.maximum(out, 0.0)


def approx_counts(noisy_cumulative: NDArray[np.float64]) -> NDArray[np.int64]:
    """Algorithm 2 lines 2-4: n'^r = Gamma^-1(round(isotonic(c~^r))) for every region.

    Non-negative integers, not yet consistent; M_DP's post-processing follows (Sec. 9.1).

    >>> approx_counts(np.array([[3.4, 4.3, 6.2], [1.7, 1.6, 3.2], [0.6, 1.8, 3.3]])).tolist()
    [[3, 1, 2], [2, 0, 1], [1, 1, 1]]
    """
    return gamma_inv(np.rint(isotonic_nonneg(noisy_cumulative)).astype(np.int64))
