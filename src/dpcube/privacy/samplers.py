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

Speed (``benchmarks/foundation/bench_samplers.py``): samples are drawn in cache-sized blocks,
from 32-bit words (Lemire's multiply-shift for uniform integers), with index arrays rather than
boolean masks, and with one word per Bernoulli(exp(-1)) coin (:func:`_bernoulli_exp_one`: the
first ten rounds of Algorithm 1 at gamma = 1 read off one uniform on [0, 107 * 11!)). Every
outcome is still decided by integer comparisons; no float exp/log and no table of approximations.

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
#: :func:`snapped_gaussian` keeps sigma / grid below 2**(this + 1), inside the int64 path.
_MAX_GRID_SIGMA_BITS = 12


def _flat(x: ArrayLike, shape: tuple[int, ...]) -> IntArray:
    return (
        np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype=np.int64), shape)).ravel().copy()
    )


# --------------------------------------------------------------------------------------------
# Exact building blocks on 32-bit words
#
# Every decision below compares integers. A 32-bit word w and a range h < 2**32 give the uniform
# integer floor(w h / 2**32) on [0, h), exact once the words whose low half falls below
# 2**32 mod h are redrawn (Lemire 2019). Samples are processed in blocks of 2**16 so that the
# working arrays stay in the CPU caches, and selections use index arrays (np.flatnonzero), which
# numpy runs far faster than boolean-mask indexing.
# --------------------------------------------------------------------------------------------

_U64 = np.uint64
_LOW32 = _U64(0xFFFFFFFF)
_TWO32 = _U64(2**32)
_BLOCK = 2**16
#: CKS Algorithm 1 with gamma = 1 from one word: a uniform R on [0, 107 * 11!) (107 * 11! is the
#: largest multiple of 11! below 2**32, so a word is redrawn with probability 0.6%).
_FACT_N = 11
_FACT_RANGE = (2**32 // math.factorial(_FACT_N)) * math.factorial(_FACT_N)
#: R < _FACT_RANGE / k! (probability exactly 1/k!) for k = 2, ..., 11.
_FACT_THRESHOLDS = tuple(np.uint32(_FACT_RANGE // math.factorial(k)) for k in range(2, _FACT_N + 1))

UIntArray = NDArray[np.uint64]
UInt = UIntArray | np.uint64


def _take(x: UInt, index: NDArray[np.intp]) -> UInt:
    """``x[index]`` for an array, ``x`` itself for a scalar (a value shared by every sample)."""
    return x[index] if isinstance(x, np.ndarray) else x


def _uniform32(source: RandomSource, high: UInt, n: int) -> UIntArray:
    """``n`` exact uniforms on ``[0, high)`` (``1 <= high < 2**32``, elementwise), Lemire's method."""
    m = source.words32(n).astype(_U64)
    m *= high
    low = m & _LOW32
    if isinstance(high, np.ndarray):
        near = np.flatnonzero(low < high)
        keep = np.flatnonzero(low[near] < _TWO32 % high[near])
        bad = near[keep]
        h: UInt = high[bad]
    else:
        bad = np.flatnonzero(low < _TWO32 % high)
        h = high
    if bad.size:
        m[bad] = _uniform32(source, h, bad.size) << _U64(32)
    m >>= _U64(32)
    return m


def _uniform(source: RandomSource, high: UInt, n: int, high_max: int) -> UIntArray:
    """``n`` exact uniforms on ``[0, high)``; 32-bit words when ``high_max < 2**32``."""
    if high_max < 2**32:
        return _uniform32(source, high, n)
    if high_max >= 2**62:
        raise OverflowError("bernoulli_exp: denominator too large for exact int64 sampling")
    h = np.broadcast_to(np.asarray(high, dtype=np.int64), (n,))
    return source.integers(h).astype(_U64)


def _words_below(source: RandomSource, n: int, bound: int) -> NDArray[np.uint32]:
    """``n`` exact uniforms on ``[0, bound)`` (``bound <= 2**32``): words at or above it are redrawn."""
    w = np.array(source.words32(n), dtype=np.uint32)
    bad = np.flatnonzero(w >= bound)
    while bad.size:
        w[bad] = source.words32(bad.size)
        bad = bad[np.flatnonzero(w[bad] >= bound)]
    return w


def _bernoulli_exp_fraction(
    source: RandomSource, num: UIntArray, den: UInt, den_max: int
) -> NDArray[np.bool_]:
    """Bernoulli(exp(-num/den)) for ``0 <= num <= den`` (CKS Algorithm 1, first branch).

    K <- 1; while Bernoulli(gamma / K): K <- K + 1; return K odd. Round k flips, for the samples
    still going, a coin of probability num / (k den): a uniform on [0, k den) below num. An
    expected e^gamma <= e rounds.
    """
    result = np.ones(num.size, dtype=bool)
    index = np.flatnonzero(num)
    u, d = num[index], _take(den, index)
    k = 1
    while index.size:
        if den_max * k >= 2**62:
            # k den no longer fits int64: finish the few samples still going with Python integers.
            dd = np.broadcast_to(d, index.shape)
            for i, ui, di in zip(index.tolist(), u.tolist(), dd.tolist(), strict=True):
                kk = k
                while _uniform_big(source, di * kk) < ui:
                    kk += 1
                result[i] = kk % 2 == 1
            break
        heads = _uniform(source, d * _U64(k), index.size, den_max * k) < u
        if k % 2 == 0:
            result[index[np.flatnonzero(~heads)]] = False
        keep = np.flatnonzero(heads)
        index, u, d = index[keep], u[keep], _take(d, keep)
        k += 1
    return result


def _bernoulli_exp_one(source: RandomSource, n: int) -> NDArray[np.bool_]:
    """``n`` exact Bernoulli(exp(-1)) (CKS Algorithm 1 with gamma = 1), about one 32-bit word each.

    With gamma = 1 round 1 is always heads and round k >= 2 flips a 1/k coin; K is the first
    round with tails and the result is "K odd". For R uniform on [0, 107 * 11!) the events
    ``R < 107 * 11!/k!`` (k = 2..11) are nested with probabilities exactly 1/k!, those of "rounds
    2..k all heads"; so while K <= 11, K - 2 is the number of these events that hold, and "K odd"
    is their parity. The samples with all ten (probability 1/11!) go on flipping 1/k coins from
    k = 12.
    """
    r = _words_below(source, n, _FACT_RANGE)
    odd = r < _FACT_THRESHOLDS[0]
    for threshold in _FACT_THRESHOLDS[1:]:
        odd ^= r < threshold
    rest = np.flatnonzero(r < _FACT_THRESHOLDS[-1])
    k = _FACT_N + 1
    while rest.size:
        heads = _uniform32(source, _U64(k), rest.size) == 0
        odd[rest[np.flatnonzero(~heads)]] = k % 2 == 1
        rest = rest[np.flatnonzero(heads)]
        k += 1
    return odd


def _geometric_e(source: RandomSource, n: int) -> UIntArray:
    """``n`` draws of V with ``P(V = v) = (1 - 1/e) e^-v``: heads of Bernoulli(exp(-1)) before tails."""
    v = np.zeros(n, dtype=_U64)
    alive = np.arange(n)
    while alive.size:
        alive = alive[np.flatnonzero(_bernoulli_exp_one(source, alive.size))]
        v[alive] += _U64(1)
    return v


def _truncated_geometric(source: RandomSource, t: UInt, n: int, t_max: int) -> UIntArray:
    """``n`` draws of U on ``{0..t-1}`` with ``P(U = u) ~ exp(-u/t)`` (CKS Algorithm 2, steps 1-4).

    A uniform U is kept with probability exp(-U/t) (at least 1 - 1/e on average). With one t for
    all samples, ~1.6 n candidates are drawn at once and the first n kept are used (the kept
    values of independent candidates are independent draws of the target, whichever are kept);
    with one t per sample, each sample is redrawn until kept.
    """
    if np.ndim(t) == 0:
        parts: list[UIntArray] = []
        got = 0
        while got < n:
            need = n - got
            u = (
                _uniform32(source, t, need + need * 3 // 5 + 16)
                if t_max < 2**32
                else _uniform(source, t, need * 2, t_max)
            )
            kept = np.flatnonzero(_bernoulli_exp_fraction(source, u, t, t_max))[:need]
            parts.append(u[kept])
            got += kept.size
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    out = np.empty(n, dtype=_U64)
    pending = np.arange(n)
    tp = t
    while pending.size:
        u = _uniform(source, tp, pending.size, t_max)
        keep = _bernoulli_exp_fraction(source, u, tp, t_max)
        kept = np.flatnonzero(keep)
        out[pending[kept]] = u[kept]
        rejected = np.flatnonzero(~keep)
        pending, tp = pending[rejected], _take(tp, rejected)
    return out


def _geometric(source: RandomSource, t: UInt, n: int, t_max: int) -> UIntArray:
    """``n`` draws of X with ``P(X = x) ~ exp(-x/t)``: X = U + t V (CKS Algorithm 2, steps 1-8)."""
    x = _geometric_e(source, n)
    x *= t
    if t_max > 1:
        x += _truncated_geometric(source, t, n, t_max)
    return x


def _discrete_laplace_block(source: RandomSource, t: UInt, s: UInt, n: int, t_max: int) -> IntArray:
    """``n`` discrete Laplace draws of scale t/s (CKS Algorithm 2, steps 9-12): Y = floor(X/s)
    with a random sign, "-0" redrawn so that 0 is not counted twice."""
    y = _geometric(source, t, n, t_max)
    if np.ndim(s) or s != 1:
        y //= s
    negative = source.coins(n)
    z = y.view(np.int64)
    np.negative(z, out=z, where=negative)
    redo = np.flatnonzero(negative & (z == 0))
    if redo.size:
        z[redo] = _discrete_laplace_block(source, _take(t, redo), _take(s, redo), redo.size, t_max)
    return z


def _as_uint(x: IntArray) -> UInt:
    """A scalar when every entry is equal (the common case: one scale for all samples)."""
    if x.size and x.min() == x.max():
        return _U64(int(x[0]))
    return x.astype(_U64)


def bernoulli_exp(source: RandomSource, num: ArrayLike, den: ArrayLike) -> NDArray[np.bool_]:
    """Exact Bernoulli(exp(-num/den)) for integers ``num >= 0``, ``den >= 1`` (CKS Algorithm 1).

    For gamma > 1, exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma))).
    """
    shape = np.broadcast(np.asarray(num), np.asarray(den)).shape
    n, d = _flat(num, shape), _flat(den, shape)
    if n.size and (n.min() < 0 or d.min() < 1):
        raise ValueError("bernoulli_exp needs num >= 0 and den >= 1")
    if source.noiseless:
        raise RuntimeError("the NO_NOISE source draws no random words")
    whole, frac = np.divmod(n, d)
    result = np.ones(n.shape, dtype=bool)
    remaining = whole.copy()
    active = np.flatnonzero(remaining > 0)
    while active.size:
        ok = _bernoulli_exp_one(source, active.size)
        result[active[~ok]] = False
        remaining[active] -= 1
        active = active[ok & (remaining[active] > 0)]
    alive = np.flatnonzero(result & (frac > 0))
    if alive.size:
        den_alive = _as_uint(d[alive])
        result[alive] = _bernoulli_exp_fraction(
            source, frac[alive].astype(_U64), den_alive, int(d[alive].max())
        )
    return result.reshape(shape)


def discrete_laplace(
    source: RandomSource, t: ArrayLike, s: ArrayLike = 1, size: int | tuple[int, ...] | None = None
) -> IntArray:
    """Exact discrete Laplace with scale ``t/s``: ``P(z) = (1-p)/(1+p) p^|z|``, ``p = exp(-s/t)``.

    CKS Algorithm 2: U ~ Uniform{0..t-1} kept with probability exp(-U/t); V ~ Geometric(1-1/e);
    X = U + tV is Geometric(1 - exp(-1/t)); Y = floor(X/s); a random sign, rejecting -0.
    Samples are drawn in blocks of 2**16 so that the working arrays stay in cache; every
    decision is an integer comparison (see :func:`_uniform32` and :func:`_bernoulli_exp_one`).

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
    total = math.prod(shape)
    tt, ss = _parameter(t, shape, "t"), _parameter(s, shape, "s")
    t_max = int(np.max(tt)) if total else 1
    out = np.empty(total, dtype=np.int64)
    for start in range(0, total, _BLOCK):
        stop = min(total, start + _BLOCK)
        tb = tt[start:stop] if isinstance(tt, np.ndarray) else tt
        sb = ss[start:stop] if isinstance(ss, np.ndarray) else ss
        out[start:stop] = _discrete_laplace_block(source, tb, sb, stop - start, t_max)
    return out.reshape(shape)


def _parameter(x: ArrayLike, shape: tuple[int, ...], name: str) -> UInt:
    """A positive integer parameter: one uint64 scalar if it is shared, else a flat array."""
    a = np.asarray(x)
    if a.dtype.kind not in "iub" and not (a.size and np.all(a == np.floor(a))):
        raise ValueError(f"discrete_laplace needs integers t >= 1 and s >= 1, got {name} = {x!r}")
    a = a.astype(np.int64)
    if a.size and a.min() < 1:
        raise ValueError("discrete_laplace needs integers t >= 1 and s >= 1")
    if a.size == 1:
        return _U64(int(a.reshape(())))
    return np.broadcast_to(a, shape).ravel().astype(_U64)


def _bernoulli_exp_scalar(source: RandomSource, num: int, den: int) -> bool:
    """Bernoulli(exp(-num/den)) with Python integers of any size (rare big-number path).

    exp(-gamma) = exp(-1)^floor(gamma) exp(-frac): floor(gamma) Bernoulli(exp(-1)) must all succeed
    (drawn in batches, stopping at the first batch with a failure), then CKS Algorithm 1 on the
    fraction with exact big-integer uniforms.
    """
    whole, frac = divmod(num, den)
    while whole > 0:
        batch = min(whole, 1024)
        if not _bernoulli_exp_one(source, batch).all():
            return False
        whole -= batch
    k = 1
    while True:
        if _uniform_big(source, den * k) >= frac:
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


def discrete_gaussian(
    source: RandomSource, sigma2_num: int, sigma2_den: int, size: int | tuple[int, ...]
) -> IntArray:
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
    """Exact variance of the discrete Gaussian (sum of the pmf; it is slightly below sigma^2).

    By Poisson summation the variance is ``sigma^2 (1 - O(sigma^2 exp(-2 pi^2 sigma^2)))``; from
    sigma = 8 on the correction is below 1e-500 and sigma^2 is returned exactly as a float.
    """
    if sigma2 >= 64:
        return float(sigma2)
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


def add_discrete_laplace(
    counts: ArrayLike, scale: float, source: RandomSource
) -> tuple[IntArray, NoiseDraw]:
    """Integer counts plus discrete Laplace noise of scale at least ``scale`` (rounded up to t/2^20).

    With L1 sensitivity Delta and ``scale = Delta/epsilon`` this is epsilon-DP (the discrete
    Laplace mechanism; CKS section 2).
    """
    x = np.asarray(counts, dtype=np.int64)
    t, s = laplace_scale_rational(scale)
    noisy = x + discrete_laplace(source, t, s, size=x.shape)
    b = t / s
    return noisy, NoiseDraw("discrete_laplace", np.asarray(b), discrete_laplace_variance(b))


def add_discrete_gaussian(
    counts: ArrayLike, sigma: float, source: RandomSource
) -> tuple[NDArray[np.float64] | IntArray, NoiseDraw]:
    """Integer counts plus discrete Gaussian noise with variance parameter at least sigma^2.

    sigma^2 is rounded up to a multiple of 1/1024 (sigma < 16) or to an integer. Any sigma is
    exact; above sigma = 4096 some acceptance tests leave int64 and run on Python integers, which
    is slower (about 30 microseconds a draw at sigma = 10^6) but needs no grid.
    """
    x = np.asarray(counts, dtype=np.int64)
    den = 1024 if sigma < 16 else 1
    num = math.ceil(Fraction(sigma) ** 2 * den)
    noisy = x + discrete_gaussian(source, num, den, size=x.shape)
    sigma2 = num / den
    return noisy, NoiseDraw(
        "discrete_gaussian",
        np.asarray(math.sqrt(sigma2)),
        np.asarray(discrete_gaussian_variance(sigma2)),
    )


def _grid_exponent(scale: FloatArray, bits: int) -> IntArray:
    """k with ``2**k <= scale * 2**-bits < 2**(k+1)``, exactly (from the float's exponent).

    >>> _grid_exponent(np.array([1.0, 1.5, 0.75, 2.0**30 - 1]), 24).tolist()
    [-24, -24, -25, 5]
    """
    _, e = np.frexp(scale)
    return np.asarray(e, dtype=np.int64) - 1 - bits


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
    The realised scale ``t_i g_i >= c b_i`` is reported with the exact variance of the noise.
    """
    x = np.asarray(values, dtype=np.float64)
    b = np.broadcast_to(np.asarray(scales, dtype=np.float64), x.shape)
    if not np.all(np.isfinite(x)):
        raise ValueError("snapped_laplace: values must be finite")
    if not (np.all(b > 0) and np.all(np.isfinite(b))):
        raise ValueError("snapped_laplace: scales must be positive and finite")
    c = 1.0 + support * 2.0**-bits / epsilon
    if b.size and b.min() == b.max():
        # One scale for every value (the common case): the grid and its variance once.
        k: IntArray | int = int(_grid_exponent(np.asarray(b.flat[0]), bits))
        t: IntArray | int = math.ceil(math.ldexp(c * float(b.flat[0]), -int(k)))
        realised = np.broadcast_to(np.float64(math.ldexp(float(t), int(k))), x.shape)
        variance = np.broadcast_to(
            discrete_laplace_variance(float(t)) * math.ldexp(1.0, 2 * int(k)), x.shape
        )
    else:
        k = _grid_exponent(b, bits)
        t = np.ceil(np.ldexp(c * b, -k)).astype(np.int64)
        realised = np.ldexp(t.astype(np.float64), k)
        variance = discrete_laplace_variance(t) * np.ldexp(1.0, 2 * k)
    if source.noiseless:
        return x.copy(), NoiseDraw("snapped_laplace", realised, variance)
    snapped = np.ldexp(np.rint(np.ldexp(x, np.negative(k))), k)
    z = discrete_laplace(source, t, 1, size=x.shape)
    noisy = snapped + np.ldexp(z.astype(np.float64), k)
    return noisy, NoiseDraw("snapped_laplace", realised, variance)


def gaussian_grid_exponent(sigma: float, l2_sensitivity: float, support: int, bits: int) -> int:
    """k of the grid ``g = 2**k`` of :func:`snapped_gaussian`.

    Fine enough that rounding barely enlarges sigma: ``g <= min(sigma, Delta / sqrt(support)) 2**-bits``
    (the enlargement ``1 + g sqrt(support) / Delta`` is then at most ``1 + 2**-bits``); but never
    finer than ``sigma 2**-12``, so that ``sigma / g < 2**13`` keeps :func:`discrete_gaussian` on
    its int64 path (beyond ``sigma sqrt(support) / Delta = 2**(12 - bits)`` the enlargement grows as
    ``1 + sigma sqrt(support) / (2**12 Delta)``). Exact, from the floats' exponents.

    >>> gaussian_grid_exponent(12.3, 1.0, 2, 8)  # 2**-9 <= min(12.3, 0.707) / 256
    -9
    >>> gaussian_grid_exponent(0.3, 1.0, 1, 8)  # sigma below Delta: 2**-10 <= 0.3 / 256
    -10
    >>> gaussian_grid_exponent(24000.0, 1.0, 1, 8)  # capped: 2**2 <= 24000 / 4096
    2
    """
    fine = math.frexp(min(sigma, l2_sensitivity / math.sqrt(support)))[1] - 1 - bits
    return max(fine, math.frexp(sigma)[1] - 1 - _MAX_GRID_SIGMA_BITS)


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
    rounded to the grid ``g = 2**k`` of :func:`gaussian_grid_exponent`; rounding adds at most
    ``g sqrt(support)`` to the L2 distance, so sigma is enlarged by the factor
    ``1 + g sqrt(support) / Delta`` and the rho of the discrete Gaussian on the grid is unchanged.
    """
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("snapped_gaussian: values must be finite")
    k = gaussian_grid_exponent(sigma, l2_sensitivity, support, bits)
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


# --------------------------------------------------------------------------------------------
# The exponential mechanism
# --------------------------------------------------------------------------------------------

#: Grid of the exponential mechanism's scores: ``g = 2**k <= sensitivity * 2**-EM_GRID_BITS``.
EM_GRID_BITS = 16
#: Bits of the dyadic coefficient ``a / 2**j`` of the exponential mechanism.
EM_COEFFICIENT_BITS = 24
#: Proposals drawn at once by :func:`exponential_mechanism` (at least; at most the candidates).
_EM_BATCH = 64


def exponential_mechanism_coefficient(
    epsilon: float, sensitivity: float, bits: int = EM_GRID_BITS
) -> tuple[int, int, int]:
    """``(k, a, j)`` of :func:`exponential_mechanism`: the score grid ``g = 2**k`` and the
    coefficient ``a / 2**j <= epsilon g / (2 (sensitivity + g))``, rounded *down* (less privacy
    loss, never more), ``a`` of :data:`EM_COEFFICIENT_BITS` bits.

    >>> exponential_mechanism_coefficient(1.0, 1.0)
    (-16, 33553920, 42)
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"the exponential mechanism needs epsilon > 0, got {epsilon}")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"the exponential mechanism needs a sensitivity > 0, got {sensitivity}")
    k = math.frexp(sensitivity)[1] - 1 - bits
    g = Fraction(2) ** k
    coefficient = Fraction(epsilon) * g / (2 * (Fraction(sensitivity) + g))
    j = EM_COEFFICIENT_BITS - math.floor(math.log2(coefficient))
    a = math.floor(coefficient * 2**j)
    return k, a, j


def _split_exponent(d: IntArray, a: int, j: int) -> tuple[IntArray, IntArray]:
    """``(floor(a d / 2**j), (a d) mod 2**j)`` exactly in int64, for ``0 <= d < 2**62``,
    ``a < 2**26`` and ``31 <= j < 62`` (the product a d may need 88 bits).

    With ``d = dh 2**31 + dl`` and ``a dl = bh 2**31 + bl``: ``a d = c 2**31 + bl`` with
    ``c = a dh + bh < 2**58``, so the quotient is ``c >> (j - 31)`` and the remainder
    ``(c mod 2**(j-31)) 2**31 + bl``.

    >>> w, f = _split_exponent(np.array([3, 2**61 + 12345], dtype=np.int64), 2**25 + 7, 40)
    >>> [int(x) for x in w] == [(2**25 + 7) * 3 >> 40, (2**25 + 7) * (2**61 + 12345) >> 40]
    True
    >>> [int(x) for x in f] == [(2**25 + 7) * 3 % 2**40, (2**25 + 7) * (2**61 + 12345) % 2**40]
    True
    """
    if not (31 <= j < 62 and 0 < a < 2**26):
        raise ValueError("_split_exponent needs 31 <= j < 62 and 0 < a < 2**26")
    low31 = np.int64(2**31 - 1)
    dh, dl = d >> np.int64(31), d & low31
    product_low = dl * np.int64(a)  # < 2**57
    c = dh * np.int64(a) + (product_low >> np.int64(31))  # < 2**58
    shift = np.int64(j - 31)
    whole = c >> shift
    frac = ((c & np.int64((1 << (j - 31)) - 1)) << np.int64(31)) | (product_low & low31)
    return whole, frac


def exponential_mechanism(
    scores: ArrayLike,
    *,
    epsilon: float,
    sensitivity: float,
    source: RandomSource,
    bits: int = EM_GRID_BITS,
) -> int:
    """The index of one candidate, drawn with ``P(i) ~ exp(epsilon u_i / (2 sensitivity))``
    (McSherry and Talwar, FOCS 2007, the exponential mechanism), exactly: epsilon-DP when each
    score ``u_i`` changes by at most ``sensitivity`` between neighbours. Larger scores are likelier.

    No float exp, no Gumbel noise. The argument, step by step:

    1. *Snap the scores.* ``S_i = rint(u_i / g)`` on the grid ``g = 2**k <= sensitivity 2**-bits``
       (exact: a float divided by a power of two). Rounding moves a score by at most ``g/2``, so
       ``|S_i - S'_i| <= (sensitivity + g) / g`` between neighbours.
    2. *Round the coefficient down.* ``c = a / 2**j <= epsilon g / (2 (sensitivity + g))``
       (:func:`exponential_mechanism_coefficient`). The target is ``P(i) ~ exp(c S_i)``; a
       neighbour changes ``c S_i`` by at most ``epsilon / 2``, so each weight moves by a factor
       at most ``e^(epsilon/2)`` and the normaliser too: epsilon-DP (McSherry-Talwar's proof,
       with ``c`` at most the exact coefficient, which only lowers the loss).
    3. *Sample exactly by rejection.* Propose ``i`` uniformly (:meth:`RandomSource.integers`,
       exact) and accept with probability ``exp(-c (S_max - S_i))``, a Bernoulli(exp(-num/den))
       with integers ``num = a (S_max - S_i)``, ``den = 2**j`` (Canonne, Kamath and Steinke 2020,
       Algorithm 1; the whole part and the fraction as two independent exact coins). A proposal
       is accepted with probability ``exp(c S_i) / exp(c S_max)``, so the first accepted index
       has ``P(i) ~ exp(c S_i)``: the exponential mechanism's distribution, exactly. The best
       candidate is accepted with probability 1, so at most ``len(scores)`` proposals are
       expected.

    With :data:`~dpcube.privacy.random.NO_NOISE` the first best candidate is returned.

    >>> from dpcube.privacy.random import SeededRandomSource
    >>> exponential_mechanism([0.0, 50.0, 1.0], epsilon=1.0, sensitivity=1.0, source=SeededRandomSource(0))
    1
    """
    u = np.asarray(scores, dtype=np.float64).ravel()
    if u.size == 0:
        raise ValueError("the exponential mechanism needs at least one candidate")
    if not np.all(np.isfinite(u)):
        raise ValueError("the exponential mechanism's scores must be finite")
    if source.noiseless:
        return int(np.argmax(u))
    k, a, j = exponential_mechanism_coefficient(epsilon, sensitivity, bits)
    snapped = np.rint(np.ldexp(u, -k))
    if np.max(np.abs(snapped)) >= 2.0**62:
        raise ValueError(
            "the exponential mechanism's scores are too large for its grid "
            f"(|score| / sensitivity >= 2**{62 - bits})"
        )
    s = snapped.astype(np.int64)
    gap = int(s.max()) - s  # S_max - S_i >= 0
    n = u.size
    batch = min(n, _EM_BATCH)
    # 31 <= j < 62 (an epsilon between about 2**-20 and 2**11 per unit of sensitivity): the
    # exponent a * gap / 2**j split exactly in int64 (:func:`_split_exponent`); else Python ints
    vectorised = 31 <= j < 62
    while True:
        proposals = source.integers(np.full(batch, n, dtype=np.int64))
        d = gap[proposals]
        if vectorised:
            whole, frac = _split_exponent(d, a, j)
            accept = bernoulli_exp(source, whole, np.ones_like(whole)) & bernoulli_exp(
                source, frac, np.full_like(frac, 1 << j)
            )
        else:
            accept = np.array(
                [_bernoulli_exp_scalar(source, a * int(v), 1 << j) for v in d], dtype=bool
            )
        hit = np.flatnonzero(accept)
        if hit.size:
            return int(proposals[hit[0]])
        # Few candidates are near the best: propose more at once next time (at most 2**16),
        # so that the expected work stays proportional to the proposals needed.
        batch = min(2 * batch, 2**16)
