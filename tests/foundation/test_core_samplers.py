"""The exact samplers match their distributions; calibration helpers; sources of randomness.

Statistical tests use fixed seeds (so each test is deterministic) and critical values derived
from the test statistic's distribution at a small significance level ``ALPHA``: with a fresh seed
a correct sampler would fail a given check with probability ALPHA. Each goodness-of-fit test also
checks the same draws against a slightly wrong distribution and asserts that *that* is rejected,
so the test has the power to fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import stats

from dpcube.privacy.random import (
    NO_NOISE,
    RandomSource,
    SeededRandomSource,
    SystemRandomSource,
    resolve_random_state,
)
from dpcube.privacy.samplers import (
    _grid_exponent,
    add_discrete_gaussian,
    add_discrete_laplace,
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussian_variance,
    discrete_laplace,
    discrete_laplace_variance,
    gaussian_grid_exponent,
    gaussian_sigma,
    laplace_scale_rational,
    snapped_gaussian,
    snapped_laplace,
    zcdp_rho,
)

#: Significance level of every statistical test here (false alarm rate over seeds).
ALPHA = 1e-4
#: Two-sided normal quantile for ALPHA (about 3.9 standard errors).
Z = float(stats.norm.ppf(1 - ALPHA / 2))
N = 10**6

# ---------------------------------------------------------------------------------------------
# Chi-square goodness of fit with binned tails
# ---------------------------------------------------------------------------------------------


def binned_chi_square(
    samples: NDArray[np.int64], edges: NDArray[np.int64], probs: NDArray[np.float64]
) -> tuple[float, float]:
    """Pearson's statistic over the bins ``(-inf, e1), [e1, e2), ..., [e_last, inf)`` and its
    critical value ``chi2.ppf(1 - ALPHA, bins - 1)``. ``probs`` are the exact bin probabilities."""
    observed = np.bincount(np.searchsorted(edges, samples, side="right"), minlength=edges.size + 1)
    expected = probs * samples.size
    assert expected.min() >= 5, "bins too thin for the chi-square approximation"
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    return statistic, float(stats.chi2.ppf(1 - ALPHA, edges.size))


def edges_from_cdf(
    cdf: Callable[[NDArray[np.float64]], NDArray[np.float64]], lo: int, hi: int, bins: int
) -> NDArray[np.int64]:
    """Integer bin edges between lo and hi with roughly equal probability (>= 1/(2 bins) each)."""
    candidates = np.unique(np.linspace(lo, hi, 20 * bins).round().astype(np.int64))
    c = cdf(candidates.astype(np.float64) - 1)  # P(Z < edge)
    chosen: list[int] = []
    last = 0.0
    for e, ce in zip(candidates, c, strict=True):
        if ce - last >= 1.0 / (2 * bins) and 1 - ce >= 1.0 / (2 * bins):
            chosen.append(int(e))
            last = ce
    return np.asarray(chosen, dtype=np.int64)


def bin_probs(
    cdf: Callable[[NDArray[np.float64]], NDArray[np.float64]], edges: NDArray[np.int64]
) -> NDArray[np.float64]:
    c = np.concatenate([[0.0], cdf(edges.astype(np.float64) - 1), [1.0]])
    return np.diff(c)


def laplace_cdf(scale: Fraction) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    """Exact CDF P(Z <= x) of the discrete Laplace, P(z) = (1-p)/(1+p) p^|z|, p = exp(-1/scale)."""
    p = math.exp(-1 / float(scale))

    def cdf(x: NDArray[np.float64]) -> NDArray[np.float64]:
        x = np.floor(x)
        return np.where(x < 0, p ** (-x) / (1 + p), 1 - p ** (np.maximum(x, 0) + 1) / (1 + p))

    return cdf


def gaussian_cdf(sigma2: float) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    """CDF of the discrete Gaussian, P(z) ~ exp(-z^2 / (2 sigma^2)), by summing its pmf."""
    m = int(14 * math.sqrt(sigma2)) + 10  # mass beyond 14 sigma is below 1e-40
    z = np.arange(-m, m + 1)
    w = np.exp(-(z.astype(np.float64) ** 2) / (2 * sigma2))
    cum = np.cumsum(w) / w.sum()

    def cdf(x: NDArray[np.float64]) -> NDArray[np.float64]:
        i = np.clip(np.floor(x).astype(np.int64) + m, -1, 2 * m)
        return np.where(i < 0, 0.0, cum[np.maximum(i, 0)])

    return cdf


def assert_fits(
    samples: NDArray[np.int64],
    cdf: Callable[..., NDArray[np.float64]],
    wrong: Callable[..., NDArray[np.float64]],
    spread: float,
) -> None:
    span = math.ceil(6 * spread) + 2
    edges = edges_from_cdf(cdf, -span, span, 60)
    statistic, critical = binned_chi_square(samples, edges, bin_probs(cdf, edges))
    assert statistic < critical, f"chi-square {statistic:.1f} >= critical {critical:.1f}"
    wrong_statistic, _ = binned_chi_square(samples, edges, bin_probs(wrong, edges))
    assert wrong_statistic > critical, "the test cannot tell a 3% error in scale"


# ---------------------------------------------------------------------------------------------
# Discrete Laplace and discrete Gaussian: 10^6 draws each against the exact pmf
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "s"),
    [
        (1, 4),  # scale 1/4 < 1: mostly zeros
        (2, 3),  # scale 2/3
        (1, 1),
        laplace_scale_rational(10 / 3),  # t/s with s = 2^k: the add_discrete_laplace path
        (5000, 1),  # scale > 1000
        (2**24 + 12345, 1),  # the snapped_laplace regime (t in [2^24, 2^25))
        (3 * 2**31 + 1, 2**10),  # t >= 2^32: the 64-bit path of the acceptance coins
    ],
)
def test_discrete_laplace_matches_pmf(t: int, s: int) -> None:
    scale = Fraction(t, s)
    samples = discrete_laplace(SeededRandomSource(1000 + t % 97 + s), t, s, size=N)
    assert samples.dtype == np.int64 and samples.shape == (N,)
    assert_fits(
        samples, laplace_cdf(scale), laplace_cdf(scale * Fraction(103, 100)), float(scale) + 1
    )


def test_discrete_laplace_with_a_scale_per_sample() -> None:
    """Elementwise t: even positions scale 3, odd positions scale 2^24 + 1, each fits its own pmf."""
    t = np.tile(np.array([3, 2**24 + 1]), N // 2)
    samples = discrete_laplace(SeededRandomSource(7), t, 1)
    for offset, scale in ((0, Fraction(3)), (1, Fraction(2**24 + 1))):
        assert_fits(
            samples[offset::2],
            laplace_cdf(scale),
            laplace_cdf(scale * Fraction(103, 100)),
            float(scale),
        )


def test_discrete_laplace_shape_and_validation() -> None:
    src = SeededRandomSource(0)
    assert discrete_laplace(src, 3, size=(4, 5)).shape == (4, 5)
    assert discrete_laplace(src, np.full((2, 3), 7)).shape == (2, 3)
    assert discrete_laplace(src, 3, size=0).shape == (0,)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="t >= 1"):
            discrete_laplace(src, bad, size=3)
    with pytest.raises(ValueError, match="s >= 1"):
        discrete_laplace(src, 3, 0, size=3)


@pytest.mark.parametrize(
    ("num", "den"),
    [
        (1, 4),  # sigma = 1/2 < 1
        (2, 1),
        (10**4, 1),  # sigma = 100
        (1500**2, 1),  # sigma = 1500 > 1000: the 64-bit path of the acceptance coins
    ],
)
def test_discrete_gaussian_matches_pmf(num: int, den: int) -> None:
    sigma2 = num / den
    samples = discrete_gaussian(SeededRandomSource(2000 + num % 101), num, den, size=N)
    assert samples.dtype == np.int64
    assert_fits(
        samples, gaussian_cdf(sigma2), gaussian_cdf(sigma2 * 1.03**2), math.sqrt(sigma2) + 1
    )


def test_discrete_gaussian_variance_is_the_pmf_variance() -> None:
    for sigma2 in (0.25, 2.0, 1e4):
        m = int(40 * math.sqrt(sigma2)) + 20
        z = np.arange(-m, m + 1, dtype=np.float64)
        w = np.exp(-(z**2) / (2 * sigma2))
        assert discrete_gaussian_variance(sigma2) == pytest.approx(
            float(np.sum(z**2 * w) / w.sum()), rel=1e-12
        )
    assert discrete_gaussian_variance(0.25) < 0.25  # well below sigma^2 for small sigma


def test_discrete_laplace_variance_formula() -> None:
    for scale in (0.25, 1.0, 7.5):
        p = math.exp(-1 / scale)
        z = np.arange(-2000, 2001, dtype=np.float64)
        pmf = (1 - p) / (1 + p) * p ** np.abs(z)
        assert float(discrete_laplace_variance(scale)) == pytest.approx(
            float(np.sum(z**2 * pmf)), rel=1e-10
        )


# ---------------------------------------------------------------------------------------------
# Bernoulli(exp(-gamma)) and exact uniform integers
# ---------------------------------------------------------------------------------------------


def test_bernoulli_exp_frequencies() -> None:
    pairs = [
        (0, 1),
        (1, 3),
        (1, 1),
        (5, 2),
        (7, 3),
        (3, 2**40),
    ]  # gamma = 0, 1/3, 1, 2.5, 7/3, tiny
    per = 200_000
    num = np.repeat([p[0] for p in pairs], per)
    den = np.repeat([p[1] for p in pairs], per)
    draws = bernoulli_exp(SeededRandomSource(11), num, den).reshape(len(pairs), per)
    for (a, b), row in zip(pairs, draws, strict=True):
        p = math.exp(-a / b)
        se = math.sqrt(p * (1 - p) / per)
        assert abs(row.mean() - p) <= Z * se + 1e-12, f"gamma = {a}/{b}: {row.mean()} vs {p}"
    with pytest.raises(ValueError):
        bernoulli_exp(SeededRandomSource(0), -1, 2)
    with pytest.raises(ValueError):
        bernoulli_exp(SeededRandomSource(0), 1, 0)


def uniform_chi_square(values: NDArray[np.int64], high: int, bins: int) -> tuple[float, float]:
    """Chi-square of ``values`` (claimed uniform on [0, high)) over ``bins`` bins of the range.

    Bin i is ``[high i // bins, high (i+1) // bins)``, found by exact integer comparison.
    """
    assert values.min() >= 0 and values.max() < high
    bins = min(bins, high)
    edges = np.array([high * i // bins for i in range(bins + 1)], dtype=np.int64)
    observed = np.bincount(np.searchsorted(edges, values, side="right") - 1, minlength=bins)
    expected = np.diff(edges).astype(np.float64) / high * values.size
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    return statistic, float(stats.chi2.ppf(1 - ALPHA, bins - 1))


@pytest.mark.parametrize(
    "high",
    [
        1,
        2,
        7,  # 32-bit path, small
        3
        * 2
        ** 30,  # 32-bit path: 25% of words rejected; plain modulo would make the low third twice as likely
        2**32 + 1,  # 64-bit path, just past 32 bits
        3 * 2**61,  # 64-bit path: 25% of words rejected
    ],
)
def test_integers_exactly_uniform(high: int) -> None:
    n = 200_000 if high >= 2**32 else N
    values = SeededRandomSource(high % 1009).integers(np.full(n, high))
    assert values.dtype == np.int64 and values.shape == (n,)
    if high == 1:
        assert not values.any()
        return
    statistic, critical = uniform_chi_square(values, high, 48)
    assert statistic < critical


def test_integers_elementwise_and_bounds() -> None:
    src = SeededRandomSource(3)
    high = np.array([[1, 2, 3], [2**40, 5, 2**62]])
    values = src.integers(high)
    assert values.shape == high.shape
    assert np.all((values >= 0) & (values < high))
    with pytest.raises(ValueError):
        src.integers(np.array([3, 0]))
    # Mixed ranges in one call (64-bit path for all): each column is uniform on its own range.
    cols = src.integers(np.tile(np.array([5, 2**33]), (200_000, 1)))
    for j, h in enumerate((5, 2**33)):
        statistic, critical = uniform_chi_square(cols[:, j], h, min(h, 16))
        assert statistic < critical


def test_biased_modulo_would_be_detected() -> None:
    """The uniformity check has power: naive ``word mod high`` with high = 3 * 2^30 fails it."""
    high = 3 * 2**30
    words = SeededRandomSource(5).words32(N).astype(np.int64)
    statistic, critical = uniform_chi_square(words % high, high, 3)
    assert statistic > critical


def test_coins_and_words32_are_fair() -> None:
    src = SeededRandomSource(9)
    coins = src.coins(N)
    assert coins.dtype == np.bool_ and coins.shape == (N,)
    assert abs(coins.mean() - 0.5) <= Z * math.sqrt(0.25 / N)
    w = src.words32(N)
    assert w.dtype == np.uint32
    statistic, critical = uniform_chi_square(w.astype(np.int64), 2**32, 32)
    assert statistic < critical


# ---------------------------------------------------------------------------------------------
# Snapped (grid) Laplace and Gaussian for real values
# ---------------------------------------------------------------------------------------------


def grid_of(scale: float, bits: int) -> float:
    """The largest power of two at most scale * 2^-bits, from the float's exponent (exact)."""
    return math.ldexp(1.0, math.frexp(scale)[1] - 1 - bits)


def test_snapped_laplace_outputs_on_grid_scale_and_variance() -> None:
    rng = np.random.default_rng(0)
    values = rng.normal(0, 1000, N)
    scale, epsilon, bits = 3.7, 0.5, 24
    noisy, draw = snapped_laplace(
        values, scale, epsilon=epsilon, support=1, source=SeededRandomSource(21), bits=bits
    )
    g = grid_of(scale, bits)
    assert g <= scale * 2.0**-bits < 2 * g
    # Every output is a multiple of g (exact in float: |output| / g < 2^53).
    assert np.all(np.ldexp(noisy, -(math.frexp(scale)[1] - 1 - bits)) % 1 == 0)
    # The realised scale is never below the requested one, enlarged by c = 1 + support 2^-bits / epsilon.
    c = 1 + 2.0**-bits / epsilon
    assert np.all(draw.scale >= c * scale) and np.all(draw.scale < c * scale + g)
    t = draw.scale / g
    assert np.all(t == np.round(t))
    assert np.allclose(draw.variance, discrete_laplace_variance(t) * g * g, rtol=1e-12)
    # Monte-Carlo variance of the noise: tolerance Z * sd of the sample variance, where
    # Var(s^2) ~ (mu4 - var^2) / n = 20 b^4 / n for the Laplace (mu4 = 24 b^4, var = 2 b^2).
    noise = noisy - np.ldexp(np.rint(np.ldexp(values, -int(math.log2(g)))), int(math.log2(g)))
    b = float(draw.scale.flat[0])
    assert abs(noise.var() - float(draw.variance.flat[0])) <= Z * b * b * math.sqrt(20 / N)


def test_grid_exponent_exact_near_powers_of_two() -> None:
    """log2 in floating point rounds 2^k (1 - 2^-52) up to k; the grid must still be <= b 2^-bits."""
    for k in range(-30, 60):
        for b in (math.ldexp(1.0, k), math.ldexp(1.0 - 2.0**-52, k), math.ldexp(1.5, k)):
            g_exp = int(_grid_exponent(np.asarray(b), 24))
            assert math.ldexp(1.0, g_exp) <= b * 2.0**-24 < math.ldexp(1.0, g_exp + 1)


def test_snapped_laplace_per_value_scales() -> None:
    scales = np.array([1e-3, 0.75, 1.0, 2.0 - 2**-40, 2.0, 5e6, 2.0**30 * (1 - 2**-52)])
    values = np.linspace(-5, 5, scales.size)
    for epsilon, support in ((1.0, 1), (0.1, 3)):
        noisy, draw = snapped_laplace(
            values, scales, epsilon=epsilon, support=support, source=SeededRandomSource(2)
        )
        c = 1 + support * 2.0**-24 / epsilon
        for i, b in enumerate(scales):
            g = grid_of(float(b), 24)
            assert g <= b * 2.0**-24
            assert draw.scale[i] >= c * b, (b, draw.scale[i])
            assert (noisy[i] / g) % 1 == 0
    with pytest.raises(ValueError):
        snapped_laplace([1.0], [0.0], epsilon=1.0, support=1, source=SeededRandomSource(0))
    with pytest.raises(ValueError):
        snapped_laplace([np.nan], [1.0], epsilon=1.0, support=1, source=SeededRandomSource(0))


@settings(max_examples=60, deadline=None)
@given(
    scale=st.floats(min_value=1e-6, max_value=1e9, allow_nan=False),
    epsilon=st.floats(min_value=1e-3, max_value=10),
    support=st.integers(1, 8),
)
def test_snapped_laplace_scale_never_below_requested(
    scale: float, epsilon: float, support: int
) -> None:
    _, draw = snapped_laplace(
        np.zeros(2), [scale, scale * 3], epsilon=epsilon, support=support, source=NO_NOISE
    )
    c = 1 + support * 2.0**-24 / epsilon
    assert np.all(draw.scale >= c * np.array([scale, scale * 3]))


def test_snapped_gaussian_grid_scale_and_variance() -> None:
    values = np.random.default_rng(1).uniform(-50, 50, N)
    sigma, l2, support, bits = 12.3, 1.0, 2, 8
    noisy, draw = snapped_gaussian(
        values, sigma, l2_sensitivity=l2, support=support, source=SeededRandomSource(4), bits=bits
    )
    k = gaussian_grid_exponent(sigma, l2, support, bits)
    g = math.ldexp(1.0, k)
    assert g <= min(sigma, l2 / math.sqrt(support)) * 2.0**-bits
    assert np.all(np.ldexp(noisy, -k) % 1 == 0)
    # Never below the enlarged sigma; the enlargement is at most 1 + 2^-bits here.
    assert float(draw.scale) >= sigma * (1 + g * math.sqrt(support) / l2)
    assert float(draw.scale) <= sigma * (1 + 2.0**-bits) * (1 + 1e-6)
    assert float(draw.variance) == pytest.approx(
        discrete_gaussian_variance((float(draw.scale) / g) ** 2) * g * g, rel=1e-9
    )
    # Gaussian: Var(s^2) ~ 2 var^2 / n.
    noise = noisy - np.ldexp(np.rint(np.ldexp(values, -k)), k)
    var = float(draw.variance)
    assert abs(noise.var() - var) <= Z * var * math.sqrt(2 / N)


# ---------------------------------------------------------------------------------------------
# Calibration helpers
# ---------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1e-6, max_value=1e12, allow_nan=False, allow_infinity=False))
def test_laplace_scale_rational_rounds_up(scale: float) -> None:
    t, s = laplace_scale_rational(scale)
    assert t >= 1 and s >= 1 and math.gcd(t, s) == 1
    assert Fraction(t, s) >= Fraction(scale)
    assert Fraction(t, s) - Fraction(scale) < Fraction(1, 2**20)
    assert 2**20 % s == 0


def test_laplace_scale_rational_examples_and_errors() -> None:
    assert laplace_scale_rational(2.0) == (2, 1)
    assert laplace_scale_rational(0.25) == (1, 4)
    t, s = laplace_scale_rational(0.1)  # 0.1 is not dyadic: rounded up, never down
    assert Fraction(t, s) == Fraction(math.ceil(Fraction(0.1) * 2**20), 2**20) > Fraction(1, 10)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            laplace_scale_rational(bad)


@settings(max_examples=200, deadline=None)
@given(
    epsilon=st.floats(min_value=1e-3, max_value=20),
    delta=st.floats(min_value=1e-15, max_value=0.5),
    l2=st.floats(min_value=0.1, max_value=100),
)
def test_zcdp_rho_and_gaussian_sigma_closed_form(epsilon: float, delta: float, l2: float) -> None:
    rho = zcdp_rho(epsilon, delta)
    log_term = math.log(1 / delta)
    assert rho == pytest.approx(
        (math.sqrt(log_term + epsilon) - math.sqrt(log_term)) ** 2, rel=1e-12
    )
    # Bun-Steinke Prop. 1.3 with this rho gives back exactly epsilon.
    assert rho + 2 * math.sqrt(rho * log_term) == pytest.approx(epsilon, rel=1e-9)
    sigma = gaussian_sigma(l2, epsilon, delta)
    assert l2**2 / (2 * sigma**2) == pytest.approx(rho, rel=1e-9)


def test_zcdp_rho_example_and_errors() -> None:
    # epsilon = 1, delta = 1e-5: rho = (sqrt(ln 1e5 + 1) - sqrt(ln 1e5))^2.
    assert zcdp_rho(1.0, 1e-5) == pytest.approx(0.02081994, rel=1e-6)
    for bad in (0.0, 1.0, -1e-3):
        with pytest.raises(ValueError):
            zcdp_rho(1.0, bad)


def test_add_helpers_report_the_realised_noise() -> None:
    counts = np.arange(12).reshape(3, 4)
    noisy, draw = add_discrete_laplace(counts, 10 / 3, SeededRandomSource(0))
    t, s = laplace_scale_rational(10 / 3)
    assert noisy.dtype == np.int64 and noisy.shape == counts.shape
    assert float(draw.scale) == t / s >= 10 / 3
    assert float(draw.variance) == pytest.approx(float(discrete_laplace_variance(t / s)))
    noisy, draw = add_discrete_gaussian(counts, 2.5, SeededRandomSource(0))
    assert noisy.shape == counts.shape and float(draw.scale) >= 2.5
    noisy, draw = add_discrete_gaussian(counts, 5000.0, SeededRandomSource(0))
    assert noisy.dtype == np.int64 and 5000.0 <= float(draw.scale) <= 5000.0 * (1 + 1e-8)


# ---------------------------------------------------------------------------------------------
# Sources of randomness
# ---------------------------------------------------------------------------------------------


def test_seeded_source_reproducible_system_source_not() -> None:
    a, b = SeededRandomSource(5), SeededRandomSource(5)
    assert np.array_equal(a.words(1000), b.words(1000))
    assert np.array_equal(discrete_laplace(a, 3, size=1000), discrete_laplace(b, 3, size=1000))
    assert not np.array_equal(SeededRandomSource(5).words(100), SeededRandomSource(6).words(100))
    s1, s2 = SystemRandomSource(), SystemRandomSource()
    assert not np.array_equal(s1.words(100), s2.words(100))
    assert not np.array_equal(s1.words(100), s1.words(100))  # the stream moves on
    assert not s1.seeded and not s1.noiseless
    assert a.seeded and not a.noiseless
    # The system source's words are uniform and writable, for any count (chunked keystream).
    for n in (0, 1, 3, 2**16 + 5):
        w = s1.words(n)
        assert w.shape == (n,) and w.dtype == np.uint64 and w.flags.writeable
    bits = np.unpackbits(s1.words(N // 64).view(np.uint8))
    assert abs(bits.mean() - 0.5) <= Z * math.sqrt(0.25 / bits.size)


def test_resolve_random_state() -> None:
    assert isinstance(resolve_random_state(None), SystemRandomSource)
    for seed in (0, 7, np.int64(7), np.random.SeedSequence(3), np.random.default_rng(1)):
        src = resolve_random_state(seed)
        assert isinstance(src, SeededRandomSource) and src.seeded
    assert np.array_equal(
        resolve_random_state(np.int64(7)).words(5), resolve_random_state(7).words(5)
    )
    custom = SeededRandomSource(1)
    assert resolve_random_state(custom) is custom
    assert resolve_random_state(NO_NOISE) is NO_NOISE
    for bad in (True, "seed", 1.5):
        with pytest.raises(TypeError):
            resolve_random_state(bad)


def test_no_noise() -> None:
    assert NO_NOISE.noiseless and NO_NOISE.seeded and repr(NO_NOISE) == "NO_NOISE"
    with pytest.raises(RuntimeError):
        NO_NOISE.words(1)
    assert not discrete_laplace(NO_NOISE, 5, size=(3, 2)).any()
    assert discrete_laplace(NO_NOISE, 5, size=(3, 2)).shape == (3, 2)
    assert not discrete_gaussian(NO_NOISE, 4, 1, size=4).any()
    values = np.array([0.1, 2.5, -3.0])
    out, _ = snapped_laplace(values, 1.0, epsilon=1.0, support=1, source=NO_NOISE)
    assert np.array_equal(out, values)
    out, _ = snapped_gaussian(values, 2.0, l2_sensitivity=1.0, support=1, source=NO_NOISE)
    assert np.array_equal(out, values)
    counts, _ = add_discrete_laplace(np.array([3, 4]), 2.0, NO_NOISE)
    assert counts.tolist() == [3, 4]


def test_custom_source_is_used() -> None:
    """Samplers draw only through the RandomSource interface (a counting source sees the calls)."""

    class Counting(SeededRandomSource):
        calls = 0

        def words(self, n: int) -> NDArray[np.uint64]:
            Counting.calls += 1
            return super().words(n)

    src: RandomSource = Counting(0)
    discrete_laplace(src, 7, size=100)
    assert Counting.calls > 0


def test_discrete_gaussian_big_number_path() -> None:
    """sigma = 40000: 2 n t^2 >= 2^62, so every acceptance coin takes the Python-integer path."""
    sigma2 = 40_000**2
    samples = discrete_gaussian(SeededRandomSource(77), sigma2, 1, size=20_000)
    cdf, wrong = gaussian_cdf(sigma2), gaussian_cdf(sigma2 * 1.1**2)
    edges = edges_from_cdf(cdf, -6 * 40_000, 6 * 40_000, 12)
    statistic, critical = binned_chi_square(samples, edges, bin_probs(cdf, edges))
    assert statistic < critical
    assert binned_chi_square(samples, edges, bin_probs(wrong, edges))[0] > critical
