"""The exact exponential mechanism sampler (dpcube.privacy.samplers.exponential_mechanism)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpcube.privacy.random import NO_NOISE, SeededRandomSource
from dpcube.privacy.samplers import exponential_mechanism, exponential_mechanism_coefficient


def target(scores: list[float], epsilon: float, sensitivity: float) -> np.ndarray:
    """The distribution the sampler promises: ``P(i) ~ exp(c S_i)`` on the snapped scores."""
    k, a, j = exponential_mechanism_coefficient(epsilon, sensitivity)
    snapped = np.rint(np.ldexp(np.asarray(scores, dtype=np.float64), -k))
    logw = snapped * a / 2.0**j
    w = np.exp(logw - logw.max())
    return w / w.sum()


def test_coefficient_never_exceeds_the_private_one() -> None:
    # c = a / 2^j must be at most epsilon g / (2 (sensitivity + g)), exactly (rounded down),
    # and within one part in 2^23 of it (not needlessly smaller).
    for epsilon in (1e-4, 0.01, 0.3, 1.0, 7.5):
        for sensitivity in (0.5, 1.0, 3.0):
            k, a, j = exponential_mechanism_coefficient(epsilon, sensitivity)
            g = Fraction(2) ** k
            bound = Fraction(epsilon) * g / (2 * (Fraction(sensitivity) + g))
            c = Fraction(a, 2**j)
            assert c <= bound
            assert c >= bound * (1 - Fraction(1, 2**23))
            assert g <= Fraction(sensitivity) / 2**16


def test_distribution_matches_the_exponential_mechanism() -> None:
    scores = [0.0, 1.0, 2.0, 3.5, -2.0]
    p = target(scores, 1.0, 1.0)
    # the snapped target is the textbook exp(eps u / 2) up to the coefficient's rounding
    textbook = np.exp(np.array(scores) / 2)
    np.testing.assert_allclose(p, textbook / textbook.sum(), rtol=1e-4)
    n = 10_000
    source = SeededRandomSource(11)
    draws = [
        exponential_mechanism(scores, epsilon=1.0, sensitivity=1.0, source=source) for _ in range(n)
    ]
    counts = np.bincount(draws, minlength=len(scores))
    # Pearson's chi-square with 4 degrees of freedom: P(chi2_4 > 33.4) = 1e-6, so a correct
    # sampler fails this once in a million runs, while a wrong exponent (eps u instead of
    # eps u / 2 puts 0.72 instead of 0.46 on the best candidate) adds about
    # (2,600^2 / 4,600) = 1,470, and a sampler off by 10 % on it adds (460^2 / 4,600) = 46.
    chi2 = float(np.sum((counts - n * p) ** 2 / (n * p)))
    assert chi2 < 33.4, (counts.tolist(), (n * p).round(1).tolist())


def test_neighbouring_scores_change_each_probability_by_at_most_e_epsilon() -> None:
    # The privacy argument on the sampled distribution itself: every score moved by at most the
    # sensitivity (all combinations of -1, 0, +1 on three candidates, fractional scores included,
    # so that rounding to the grid is exercised) moves each probability by at most e^epsilon.
    rng = np.random.default_rng(3)
    base = rng.uniform(-5, 5, size=3)
    epsilon = 0.7
    p = target(list(base), epsilon, 1.0)
    worst = 0.0
    for shift in np.array(np.meshgrid(*[[-1.0, 0.0, 1.0]] * 3)).reshape(3, -1).T:
        q = target(list(base + shift), epsilon, 1.0)
        worst = max(worst, float(np.max(np.abs(np.log(p / q)))))
    assert worst <= epsilon + 1e-12
    assert worst >= 0.9 * epsilon  # the loss is nearly all used: the rounding is not wasteful


def test_a_far_better_candidate_always_wins_and_noiseless_is_argmax() -> None:
    source = SeededRandomSource(5)
    picks = {
        exponential_mechanism([0.0, 1e6, 3.0], epsilon=0.5, sensitivity=1.0, source=source)
        for _ in range(50)
    }
    assert picks == {1}
    assert (
        exponential_mechanism([2.0, 7.0, 7.0], epsilon=1.0, sensitivity=1.0, source=NO_NOISE) == 1
    )


def test_tiny_epsilon_uses_the_big_integer_path_and_stays_uniform() -> None:
    # epsilon 1e-12: j >= 62, the Python-integer Bernoulli; scores 0..3 are nearly equal in
    # weight, so the draws are close to uniform (chi-square, 3 d.f., P(> 27.9) = 4e-6).
    _, _, j = exponential_mechanism_coefficient(1e-12, 1.0)
    assert j >= 62
    source = SeededRandomSource(2)
    n = 2000
    draws = [
        exponential_mechanism([0.0, 1.0, 2.0, 3.0], epsilon=1e-12, sensitivity=1.0, source=source)
        for _ in range(n)
    ]
    counts = np.bincount(draws, minlength=4)
    assert float(np.sum((counts - n / 4) ** 2 / (n / 4))) < 27.9


@pytest.mark.parametrize("bad", [[], [math.inf], [math.nan]])
def test_refuses_bad_scores(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        exponential_mechanism(bad, epsilon=1.0, sensitivity=1.0, source=SeededRandomSource(0))


def test_exponent_split_is_exact_on_88_bit_products() -> None:
    from dpcube.privacy.samplers import _split_exponent

    rng = np.random.default_rng(4)
    d = rng.integers(0, 2**62, size=2000, dtype=np.int64)
    for a, j in ((2**25 - 1, 61), (2**24 + 12345, 31), (33553920, 42)):
        whole, frac = _split_exponent(d, a, j)
        for v, w, f in zip(
            d[:300].tolist(), whole[:300].tolist(), frac[:300].tolist(), strict=True
        ):
            assert (w, f) == divmod(a * v, 2**j)


def test_large_scores_keep_the_distribution() -> None:
    # Scores of ten million (a count-scale error): the gaps are 2^16 times larger on the grid
    # and the products a * gap need more than 64 bits. Three close candidates and a far one
    # (weight e^-5,000,000, never drawn): chi-square with 2 d.f., P(> 27.6) = 1e-6.
    scores = [1e7, 1e7 - 1.0, 1e7 - 3.0, 0.0]
    p = target(scores, 1.0, 1.0)
    n = 4000
    source = SeededRandomSource(8)
    draws = [
        exponential_mechanism(scores, epsilon=1.0, sensitivity=1.0, source=source) for _ in range(n)
    ]
    counts = np.bincount(draws, minlength=4)
    assert counts[3] == 0
    chi2 = float(np.sum((counts[:3] - n * p[:3]) ** 2 / (n * p[:3])))
    assert chi2 < 27.6
