"""Tail bounds of sums of independent discrete Laplace noises, valid by construction.

A release whose answer's error is not a linear unbiased function of the noise (a spatial
partition answering under the uniformity assumption) can still give an interval that covers the
truth at the stated level on *every* data set, when the interval rests only on sums of released
counts whose noises are known exactly. What it then needs is an upper confidence limit of such a
sum's noise: :func:`discrete_laplace_sum_tail`, a Chernoff bound (Chernoff 1952, Ann. Math.
Statist. 23(4); Boucheron, Lugosi and Massart 2013, "Concentration Inequalities", section 2.2)
built from the exact moment generating function of the discrete Laplace distribution (Canonne,
Kamath and Steinke 2020, NeurIPS, section 2). No normal approximation enters: for one discrete
Laplace cell the normal 2.5 % tail point (1.96 sd) is exceeded 3.2 % of the time, so it would not
be valid; the Chernoff point is.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: Points of the Chernoff parameter grid (each gives a valid bound; the least is taken).
CHERNOFF_GRID = 256


def discrete_laplace_log_mgf(variance: NDArray[np.float64], s: NDArray[np.float64]) -> NDArray:
    """``log E[exp(s X)]`` of a discrete Laplace ``X`` (``P(X = k) ~ p^|k|``) of ``variance``.

    With ``p = exp(-1/b)`` the generating function is ``(1 - p)^2 / ((1 - p e^s)(1 - p e^-s))``
    and ``(1 - p e^s)(1 - p e^-s) = (1 - p)^2 - 2 p (cosh s - 1)``; since the variance is ``v = 2p
    / (1 - p)^2`` it is ``1 / (1 - v (cosh s - 1))``, for ``v (cosh s - 1) < 1`` (+inf beyond).
    ``cosh s - 1 = 2 sinh(s/2)^2`` keeps it exact for small ``s``. Broadcasts ``variance``
    against ``s``.

    >>> v = np.array([2.0])
    >>> float(discrete_laplace_log_mgf(v, np.array([0.0]))[0])
    0.0
    >>> p = (v[0] + 1 - np.sqrt(2 * v[0] + 1)) / v[0]  # the p of variance 2
    >>> k = np.arange(-200, 201)
    >>> direct = np.log(np.sum((1 - p) / (1 + p) * p ** np.abs(k) * np.exp(0.3 * k)))
    >>> bool(np.isclose(discrete_laplace_log_mgf(v, np.array([0.3]))[0], direct))
    True
    """
    x = np.asarray(variance, dtype=np.float64) * 2.0 * np.sinh(np.asarray(s) / 2.0) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -np.log1p(-np.minimum(x, 1.0))
    return np.where(x < 1.0, out, np.inf)


def discrete_laplace_sum_tail(
    multiplicity: NDArray[np.float64], variances: NDArray[np.float64], tail: float
) -> NDArray[np.float64]:
    """For each row of ``multiplicity`` (q, K): a ``t`` with ``P(S >= t) <= tail``, where ``S``
    is the sum of ``multiplicity[i, k]`` independent discrete Laplace noises of variance
    ``variances[k]`` (per group k). By symmetry also ``P(S <= -t) <= tail``.

    Chernoff: for every ``s > 0``, ``P(S >= t) <= exp(log M_S(s) - s t)`` with ``log M_S(s) =
    sum_k m_k log M_k(s)`` (independence), so ``t(s) = (log M_S(s) - log tail) / s`` is a valid
    point for every ``s``; the least over a grid of ``s`` in ``(0, s_max)`` is taken (``s_max``
    where the widest noise's generating function ends). Rows with no noise get 0.

    >>> t = discrete_laplace_sum_tail(np.array([[1.0], [0.0]]), np.array([2.0]), 0.025)
    >>> p = (3 - np.sqrt(5)) / 2  # variance 2: P(X >= k) = p^k / (1 + p) for k >= 1
    >>> float(p ** np.ceil(t[0]) / (1 + p)) <= 0.025, float(t[1])
    (True, 0.0)
    """
    m = np.asarray(multiplicity, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    out = np.zeros(m.shape[0])
    if m.size == 0 or v.size == 0:
        return out
    s_max = float(np.arccosh(1.0 + 1.0 / float(np.max(v))))
    s = s_max * np.geomspace(1e-7, 1.0 - 1e-9, CHERNOFF_GRID)
    log_mgf = discrete_laplace_log_mgf(v[:, None], s[None, :])  # (K, J)
    total = m @ log_mgf  # (q, J)
    t = (total - np.log(tail)) / s[None, :]
    noisy = m.sum(axis=1) > 0
    out[noisy] = np.min(t[noisy], axis=1)
    return out


#: Probability left outside the support of the numerical distribution of a sum (it is added to
#: the tail, so the point stays valid); also covers the float error of the transform.
OUTSIDE = 1e-12
#: Largest transform :func:`discrete_laplace_sum_point` computes (beyond: the Chernoff point).
MAX_TRANSFORM = 1 << 22


def discrete_laplace_sum_point(
    multiplicity: NDArray[np.float64], variances: NDArray[np.float64], tail: float
) -> NDArray[np.float64]:
    """For each row of ``multiplicity`` (q, K): the least whole ``t`` whose bound on ``P(S >= t)``
    is at most ``tail`` (``S`` as in :func:`discrete_laplace_sum_tail`), from the distribution of
    ``S`` itself rather than its generating function.

    ``S`` is integer valued with characteristic function ``phi(w) = prod_k (1 + v_k (1 - cos
    w))^-m_k`` (:func:`discrete_laplace_log_mgf` with ``s = i w``). The inverse discrete Fourier
    transform of ``phi`` at ``w_j = 2 pi j / N`` is the *wrapped* probability function
    ``sum_r P(S = n + r N)``, which is at least ``P(S = n)`` (every term is >= 0). With ``N / 2``
    beyond the Chernoff point of :data:`OUTSIDE`, ``P(S >= t) <= sum_{t <= n < N/2} wrapped(n) +
    OUTSIDE``: the least ``t`` where that is ``<= tail`` is a valid point, and within one of the
    exact quantile (up to ``2 OUTSIDE`` of probability). Beyond :data:`MAX_TRANSFORM` points the
    Chernoff point is used.

    >>> p = (3 - np.sqrt(5)) / 2  # variance 2: P(X >= k) = p^k / (1 + p) for k >= 1
    >>> exact = int(np.ceil(np.log(0.025 * (1 + p)) / np.log(p)))
    >>> int(discrete_laplace_sum_point(np.array([[1.0]]), np.array([2.0]), 0.025)[0]) == exact
    True
    """
    m = np.asarray(multiplicity, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    if m.size == 0 or v.size == 0:
        return np.zeros(m.shape[0])
    if m.shape[0] > 1:  # queries that sum the same noises share one point
        rows, back = np.unique(m, axis=0, return_inverse=True)
        if len(rows) < m.shape[0]:
            return discrete_laplace_sum_point(rows, v, tail)[np.ravel(back)]
    out = np.zeros(m.shape[0])
    far = discrete_laplace_sum_tail(m, v, OUTSIDE)
    chernoff = discrete_laplace_sum_tail(m, v, tail)
    for i in np.flatnonzero(m.sum(axis=1) > 0):
        size = max(64, 1 << int(np.ceil(np.log2(2.0 * np.ceil(far[i]) + 2.0))))
        if size > MAX_TRANSFORM:
            out[i] = np.ceil(chernoff[i])
            continue
        w = 2.0 * np.pi * np.arange(size) / size
        log_phi = -(m[i][:, None] * np.log1p(v[:, None] * (1.0 - np.cos(w))[None, :])).sum(0)
        wrapped = np.clip(np.fft.ifft(np.exp(log_phi)).real, 0.0, None)
        upper = wrapped[: size // 2]  # n = 0 .. N/2 - 1
        above = np.cumsum(upper[::-1])[::-1] + OUTSIDE  # bound on P(S >= n)
        ok = np.flatnonzero(above <= tail)
        out[i] = float(ok[0]) if len(ok) else np.ceil(chernoff[i])
    return np.minimum(out, np.ceil(chernoff))


__all__ = ["discrete_laplace_log_mgf", "discrete_laplace_sum_point", "discrete_laplace_sum_tail"]
