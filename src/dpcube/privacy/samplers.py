"""Exact noise samplers (Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential
Privacy", Algorithms 1-3), vectorised over numpy arrays with integer arithmetic only.

- :func:`bernoulli_exp`: Bernoulli(exp(-num/den)) for a non-negative rational (Algorithm 1).
- :func:`discrete_laplace`: the discrete Laplace (two-sided geometric) ``P(z) ~ exp(-|z| s / t)``
  (Algorithm 2).
- :func:`discrete_gaussian`: ``P(z) ~ exp(-z^2 / (2 sigma^2))`` for rational sigma^2 (Algorithm 3).

Real-valued noise is never drawn as a float (Mironov 2012 showed that textbook float Laplace leaks
through the low bits). :func:`snapped_laplace` and :func:`snapped_gaussian` round each value to a
grid of granularity ``g = 2**k`` (k per value, ``g <= scale * 2**-bits``) and add ``g`` times a
discrete sample; every output is the exact grid value correctly rounded once to float, a
post-processing of a discrete mechanism. Rounding moves a value by at most ``g/2``, so a neighbour
can move each changed coordinate by ``g`` more than the true sensitivity; the samplers take the
number of coordinates a neighbour may change (``support``) and enlarge the scales so that the
guarantee the caller asked for holds exactly (see each function).

No function here calls numpy's float Laplace or Gaussian.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcube.privacy.random import RandomSource

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: Denominator used to round a real Laplace scale up to a rational ``t / 2**20``.
_SCALE_DENOMINATOR = 2**20
#: Largest sigma for which :func:`discrete_gaussian` keeps every intermediate inside int64.
_MAX_INTEGER_SIGMA = 2**12


def _flat(x: ArrayLike, shape: tuple[int, ...]) -> IntArray:
    return np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype=np.int64), shape)).ravel().copy()


def _bernoulli_exp_at_most_one(source: RandomSource, num: IntArray, den: IntArray) -> NDArray[np.bool_]:
    """Bernoulli(exp(-num/den)) for ``0 <= num <= den`` (CKS Algorithm 1, first branch).

    K <- 1; while Bernoulli(gamma / K): K <- K + 1; return K odd.
    """
    k = np.ones(num.shape, dtype=np.int64)
    active = np.flatnonzero(num > 0)
    while active.size:
        high = den[active] * k[active]
        if np.any(high >= 2**62):
            raise OverflowError("bernoulli_exp: denominator too large for exact int64 sampling")
        success = source.integers(high) < num[active]
        active = active[success]
        k[active] += 1
    return np.asarray(k % 2 == 1)


def bernoulli_exp(source: RandomSource, num: ArrayLike, den: ArrayLike) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(-num/den)) for integers ``num >= 0``, ``den >= 1`` (CKS Algorithm 1).

    For gamma > 1, exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma))).
    """
    shape = np.broadcast(np.asarray(num), np.asarray(den)).shape
    n, d = _flat(num, shape), _flat(den, shape)
    if n.size and (n.min() < 0 or d.min() < 1):
        raise ValueError("bernoulli_exp needs num >= 0 and den >= 1")
    whole, frac = np.divmod(n, d)
    result = np.ones(n.shape, dtype=bool)
    remaining = whole.copy()
    active = np.flatnonzero(remaining > 0)
    while active.size:
        ok = _bernoulli_exp_at_most_one(source, np.ones(active.size, np.int64), np.ones(active.size, np.int64))
        result[active[~ok]] = False
        remaining[active] -= 1
        active = active[ok & (remaining[active] > 0)]
    alive = np.flatnonzero(result)
    result[alive] = _bernoulli_exp_at_most_one(source, frac[alive], d[alive])
    return result.reshape(shape)


def discrete_laplace(source: RandomSource, t: ArrayLike, s: ArrayLike = 1, size: int | tuple[int, ...] | None = None) -> IntArray:
    """Exact discrete Laplace with scale ``t/s``: ``P(z) = (1-p)/(1+p) p^|z|``, ``p = exp(-s/t)``.

    CKS Algorithm 2: U ~ Uniform{0..t-1} kept with probability exp(-U/t); V ~ Geometric(1-1/e);
    X = U + tV is Geometric(1 - exp(-1/t)); Y = floor(X/s); a random sign, rejecting -0.

    >>> from dpcube.privacy.random import SeededRandomSource
    >>> discrete_laplace(SeededRandomSource(0), 3, size=4).dtype
    dtype('int64')
    """
    if source.noiseless:
        shape = np.broadcast(np.asarray(t), np.asarray(s)).shape if size is None else size
        return np.zeros(shape, dtype=np.int64)
    if size is None:
        shape = np.broadcast(np.asarray(t), np.asarray(s)).shape
    else:
        shape = (size,) if isinstance(size, int) else tuple(size)
    tt, ss = _flat(t, shape), _flat(s, shape)
    if tt.size and (tt.min() < 1 or ss.min() < 1):
        raise ValueError("discrete_laplace needs integers t >= 1 and s >= 1")
    out = np.zeros(tt.shape, dtype=np.int64)
    todo = np.arange(tt.size)
    while todo.size:
        t_, s_ = tt[todo], ss[todo]
        u = source.integers(t_)
        keep = _bernoulli_exp_at_most_one(source, u, t_)
        idx, u, t_, s_ = todo[keep], u[keep], t_[keep], s_[keep]
        v = np.zeros(idx.size, dtype=np.int64)
        active = np.arange(idx.size)
        while active.size:
            ones = np.ones(active.size, np.int64)
            active = active[_bernoulli_exp_at_most_one(source, ones, ones)]
            v[active] += 1
        y = (u + t_ * v) // s_
        negative = source.coins(idx.size)
        reject = negative & (y == 0)
        out[idx[~reject]] = np.where(negative, -y, y)[~reject]
        todo = np.concatenate([todo[~keep], idx[reject]])
    return out.reshape(shape)


def _bernoulli_exp_scalar(source: RandomSource, num: int, den: int) -> bool:
    """Bernoulli(exp(-num/den)) with Python integers of any size (rare big-number path)."""
    whole, frac = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_scalar(source, 1, 1):
            return False
    k = 1
    while True:
        high = den * k
        if _uniform_big(source, high) >= frac:
            break
        k += 1
    return k % 2 == 1


def _uniform_big(source: RandomSource, high: int) -> int:
    """Exact uniform integer on [0, high) for an arbitrary Python int ``high``."""
    words = (high.bit_length() + 63) // 64
    span = 1 << (64 * words)
    limit = span - span % high
    while True:
        x = 0
        for w in source.words(words):
            x = (x << 64) | int(w)
        if x < limit:
            return x % high


def discrete_gaussian(source: RandomSource, sigma2_num: int, sigma2_den: int, size: int | tuple[int, ...]) -> IntArray:
    """Exact discrete Gaussian ``P(z) ~ exp(-z^2 / (2 sigma^2))``, ``sigma^2 = sigma2_num/sigma2_den``.

    CKS Algorithm 3: t = floor(sigma) + 1; Y ~ discrete Laplace(t); accept with probability
    exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)) = exp(-(|Y| d t - n)^2 / (2 n d t^2)) for sigma^2 = n/d.
    """
    shape = (size,) if isinstance(size, int) else tuple(size)
    if source.noiseless:
        return np.zeros(shape, dtype=np.int64)
    n_, d_ = int(sigma2_num), int(sigma2_den)
    if n_ < 1 or d_ < 1:
        raise ValueError("discrete_gaussian needs a positive rational sigma^2")
    t = math.isqrt(n_ // d_) + 1
    total = math.prod(shape)
    out = np.zeros(total, dtype=np.int64)
    todo = np.arange(total)
    safe = 2**31 // (d_ * t) if d_ * t < 2**31 else 0
    den = 2 * n_ * d_ * t * t
    while todo.size:
        y = discrete_laplace(source, t, 1, size=todo.size)
        a = np.abs(y)
        small = a < safe
        accept = np.zeros(todo.size, dtype=bool)
        if den < 2**62 and small.any():
            num = (a[small] * (d_ * t) - n_) ** 2
            accept[small] = bernoulli_exp(source, num, den)
        for i in np.flatnonzero(~small | (den >= 2**62)):
            accept[i] = _bernoulli_exp_scalar(source, (int(a[i]) * d_ * t - n_) ** 2, den)
        out[todo[accept]] = y[accept]
        todo = todo[~accept]
    return out.reshape(shape)


# --------------------------------------------------------------------------------------------
# Variances and calibration
# --------------------------------------------------------------------------------------------


def discrete_laplace_variance(scale: ArrayLike) -> FloatArray:
    """Variance of the discrete Laplace with scale ``t/s``: ``2p / (1-p)^2``, ``p = exp(-1/scale)``."""
    b = np.asarray(scale, dtype=np.float64)
    p = np.exp(-1.0 / b)
    return np.asarray(2.0 * p / np.expm1(-1.0 / b) ** 2)


def discrete_gaussian_variance(sigma2: float) -> float:
    """Exact variance of the discrete Gaussian (sum of the pmf; it is slightly below sigma^2)."""
    sigma = math.sqrt(sigma2)
    z = np.arange(0, int(40 * sigma) + 20, dtype=np.float64)
    w = np.exp(-(z**2) / (2 * sigma2))
    return float(2 * np.sum(z**2 * w) / (2 * np.sum(w) - w[0]))


def laplace_scale_rational(scale: float) -> tuple[int, int]:
    """Round a real scale *up* to a rational ``t/s`` with ``s = 2**20`` (so noise is never smaller)."""
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"a Laplace scale must be positive and finite, got {scale}")
    t = math.ceil(Fraction(scale) * _SCALE_DENOMINATOR)
    g = math.gcd(t, _SCALE_DENOMINATOR)
    return t // g, _SCALE_DENOMINATOR // g


def zcdp_rho(epsilon: float, delta: float) -> float:
    """Largest rho such that rho-zCDP implies (epsilon, delta)-DP.

    Bun and Steinke 2016, Prop. 1.3: rho-zCDP gives (rho + 2 sqrt(rho ln(1/delta)), delta)-DP;
    solving for rho gives ``(sqrt(ln(1/delta) + epsilon) - sqrt(ln(1/delta)))^2``.
    """
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    log_term = math.log(1.0 / delta)
    return (math.sqrt(log_term + epsilon) - math.sqrt(log_term)) ** 2


def gaussian_sigma(l2_sensitivity: float, epsilon: float, delta: float) -> float:
    """Sigma of a (discrete) Gaussian with L2 sensitivity Delta that is (epsilon, delta)-DP.

    The discrete Gaussian with sigma is (Delta^2 / (2 sigma^2))-zCDP (CKS Theorem 4), converted to
    (epsilon, delta)-DP by :func:`zcdp_rho`.
    """
    return l2_sensitivity / math.sqrt(2.0 * zcdp_rho(epsilon, delta))


# --------------------------------------------------------------------------------------------
# Mechanism-level helpers: add noise to integer counts or to real values
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseDraw:
    """What a helper added: the realised scale (Laplace b or Gaussian sigma) and variance."""

    distribution: str
    scale: FloatArray
    variance: FloatArray


def add_discrete_laplace(counts: ArrayLike, scale: float, source: RandomSource) -> tuple[IntArray, NoiseDraw]:
    """Integer counts plus discrete Laplace noise of scale at least ``scale`` (rounded up to t/2^20).

    With L1 sensitivity Delta and ``scale = Delta/epsilon`` this is epsilon-DP (the discrete
    Laplace mechanism; CKS section 2).
    """
    x = np.asarray(counts, dtype=np.int64)
    t, s = laplace_scale_rational(scale)
    noisy = x + discrete_laplace(source, t, s, size=x.shape)
    b = t / s
    return noisy, NoiseDraw("discrete_laplace", np.asarray(b), discrete_laplace_variance(b))


def add_discrete_gaussian(counts: ArrayLike, sigma: float, source: RandomSource) -> tuple[NDArray[np.float64] | IntArray, NoiseDraw]:
    """Integer counts plus discrete Gaussian noise with variance parameter at least sigma^2.

    sigma^2 is rounded up to a multiple of 1/1024 (sigma < 16) or to an integer. Above
    sigma = 4096 the integer arithmetic would overflow and the snapped sampler is used instead
    (support 1 per changed count is then the caller's bound; see :func:`snapped_gaussian`).
    """
    x = np.asarray(counts, dtype=np.int64)
    if sigma > _MAX_INTEGER_SIGMA:
        raise ValueError("add_discrete_gaussian supports sigma <= 4096; use snapped_gaussian")
    den = 1024 if sigma < 16 else 1
    num = math.ceil(Fraction(sigma) ** 2 * den)
    noisy = x + discrete_gaussian(source, num, den, size=x.shape)
    sigma2 = num / den
    return noisy, NoiseDraw("discrete_gaussian", np.asarray(math.sqrt(sigma2)), np.asarray(discrete_gaussian_variance(sigma2)))


def _grid_exponent(scale: FloatArray, bits: int) -> IntArray:
    """k with ``2**k <= scale * 2**-bits`` (the grid for each value)."""
    return (np.floor(np.log2(scale)).astype(np.int64) - bits).astype(np.int64)


def snapped_laplace(
    values: ArrayLike,
    scales: ArrayLike,
    *,
    epsilon: float,
    support: int,
    source: RandomSource,
    bits: int = 24,
) -> tuple[FloatArray, NoiseDraw]:
    """Real values plus Laplace noise on a fine grid, safe against floating-point attacks.

    Contract: the caller chose ``scales`` b_i such that, for every pair of neighbours,
    ``sum_i |x_i - x'_i| / b_i <= epsilon`` and at most ``support`` coordinates differ.
    Value i is rounded to the grid ``g_i = 2**k_i <= b_i 2**-bits`` and gets ``g_i`` times a
    discrete Laplace of scale ``t_i = ceil(c b_i / g_i)`` with ``c = 1 + support 2**-bits / epsilon``.
    Since rounding moves a difference by at most g_i, the privacy loss is at most
    ``sum_i (|x_i - x'_i| + g_i) / (c b_i) <= (epsilon + support 2**-bits) / c = epsilon``.
    """
    x = np.asarray(values, dtype=np.float64)
    b = np.broadcast_to(np.asarray(scales, dtype=np.float64), x.shape)
    if not np.all(np.isfinite(x)):
        raise ValueError("snapped_laplace: values must be finite")
    if not (np.all(b > 0) and np.all(np.isfinite(b))):
        raise ValueError("snapped_laplace: scales must be positive and finite")
    c = 1.0 + support * 2.0**-bits / epsilon
    k = _grid_exponent(b, bits)
    t = np.ceil(np.ldexp(c * b, -k)).astype(np.int64)
    realised = np.ldexp(t.astype(np.float64), k)
    if source.noiseless:
        return x.copy(), NoiseDraw("snapped_laplace", realised, discrete_laplace_variance(t) * np.ldexp(1.0, 2 * k))
    snapped = np.ldexp(np.rint(np.ldexp(x, -k)), k)
    z = discrete_laplace(source, t, 1, size=x.shape)
    noisy = snapped + np.ldexp(z.astype(np.float64), k)
    variance = discrete_laplace_variance(t) * np.ldexp(1.0, 2 * k)
    return noisy, NoiseDraw("snapped_laplace", realised, variance)


def snapped_gaussian(
    values: ArrayLike,
    sigma: float,
    *,
    l2_sensitivity: float,
    support: int,
    source: RandomSource,
    bits: int = 8,
) -> tuple[FloatArray, NoiseDraw]:
    """Real values plus Gaussian noise on a grid, safe against floating-point attacks.

    Contract: the caller chose sigma for L2 sensitivity Delta (so the Gaussian would be
    (Delta^2/(2 sigma^2))-zCDP) and neighbours differ in at most ``support`` coordinates. Values are
    rounded to ``g = 2**k <= sigma 2**-bits``; rounding adds at most ``g sqrt(support)`` to the L2
    distance, so sigma is enlarged by the factor ``1 + g sqrt(support) / Delta`` and the rho of
    the discrete Gaussian on the grid is unchanged.
    """
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("snapped_gaussian: values must be finite")
    k = int(math.floor(math.log2(sigma))) - bits
    g = math.ldexp(1.0, k)
    sigma_eff = sigma * (1.0 + g * math.sqrt(support) / l2_sensitivity)
    grid_sigma2 = math.ceil(Fraction(sigma_eff / g) ** 2)
    variance = discrete_gaussian_variance(grid_sigma2) * g * g
    realised = math.sqrt(grid_sigma2) * g
    if source.noiseless:
        return x.copy(), NoiseDraw("snapped_gaussian", np.asarray(realised), np.asarray(variance))
    snapped = np.ldexp(np.rint(np.ldexp(x, -k)), k)
    z = discrete_gaussian(source, grid_sigma2, 1, size=x.shape)
    noisy = snapped + np.ldexp(z.astype(np.float64), k)
    return noisy, NoiseDraw("snapped_gaussian", np.asarray(realised), np.asarray(variance))
