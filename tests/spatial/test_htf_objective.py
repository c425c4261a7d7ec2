"""HTF (Shaham, Ghinita, Ahuja, Krumm and Shahabi, "HTF: Homogeneous Tree Framework for
Differentially-Private Release of Location Data", SIGSPATIAL 2021): the homogeneity objective
(Eqs. 5-7) and its sensitivity, and the near-optimal split point estimator (Sec. 4.1,
Algorithm 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcube.mechanisms.spatial._common import COL, ROW
from dpcube.mechanisms.spatial.homogeneity import (
    LevelObjective,
    exhaustive_split_point,
    get_split_point,
    laplace_perturber,
    objective,
    split_noise_scale,
    split_points,
)
from dpcube.privacy.random import NO_NOISE, SeededRandomSource


def test_worked_example_row_order() -> None:
    F = np.array([[3, 3], [3, 3], [0, 0]])
    assert [objective(F, k, ROW) for k in (1, 2, 3)] == [6.0, 0.0, 8.0]
    assert 1 + int(np.argmin([objective(F, k, ROW) for k in (1, 2)])) == 2
    top_down = F[::-1]
    assert [objective(top_down, k, ROW) for k in (1, 2, 3)] == [0.0, 6.0, 8.0]


def test_small_matrices() -> None:
    F = np.array([[1, 3], [1, 3]])
    assert objective(F, 1, COL) == 0.0
    assert objective(F, 1, ROW) == 4.0
    assert objective(F, 2, ROW) == 4.0
    G = np.array([[0, 0, 4, 4]])
    got = [objective(G, k, COL) for k in (1, 2, 3, 4)]
    np.testing.assert_allclose(got, [16 / 3, 0, 16 / 3, 8], rtol=1e-12)


def test_level_objective_matches_reference_on_a_tiling() -> None:
    rng = np.random.default_rng(3)
    F = rng.poisson(3.0, size=(7, 9)).astype(np.int64)
    rects = np.array([[0, 4, 0, 9], [4, 7, 0, 5], [4, 7, 5, 9]])
    axes = np.array([ROW, COL, ROW])
    level = LevelObjective(F, rects, axes)
    for ks in ([1, 1, 1], [3, 4, 2], [2, 2, 1]):
        got = level(np.array(ks))
        want = [
            objective(F[r0:r1, c0:c1], k, a)
            for (r0, r1, c0, c1), k, a in zip(rects, ks, axes, strict=True)
        ]
        np.testing.assert_allclose(got, want, rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 9),
    st.integers(1, 9),
    st.integers(0, 2**31),
    st.sampled_from([ROW, COL]),
)
def test_level_objective_equals_eq5(rows: int, cols: int, seed: int, axis: int) -> None:
    """Property: the vectorised exact objective equals Eq. 5 for every k."""
    rng = np.random.default_rng(seed)
    F = rng.poisson(rng.uniform(0.1, 50), size=(rows, cols)).astype(np.int64)
    L = F.shape[axis]
    if L < 2:
        return
    level = LevelObjective(F, np.array([[0, rows, 0, cols]]), np.array([axis]))
    for k in range(1, L):
        assert level(np.array([k]))[0] == pytest.approx(objective(F, k, axis), rel=1e-12, abs=1e-12)


def test_sensitivity_property() -> None:
    """3,000 random Poisson matrices, one cell +1: |o_k(D) - o_k(D')| <= 2(n-1)/n < 2."""
    rng = np.random.default_rng(4)
    worst = 0.0
    for _ in range(3000):
        U, V = rng.integers(1, 7, size=2)
        F = rng.poisson(rng.uniform(0.2, 6), size=(U, V)).astype(np.int64)
        G = F.copy()
        i, j = rng.integers(0, U), rng.integers(0, V)
        G[i, j] += 1
        for axis, L in ((ROW, U), (COL, V)):
            for k in range(1, L + 1):
                change = abs(objective(G, k, axis) - objective(F, k, axis))
                own = (i if axis == ROW else j) < k
                n = k * (V if axis == ROW else U) if own else (L - k) * (V if axis == ROW else U)
                assert change <= 2 * (n - 1) / n + 1e-9
                worst = max(worst, change)
    assert 1.5 < worst < 2.0


def test_exactly_2t_plus_1_evaluations() -> None:
    for L in (2, 3, 4, 17, 1024):
        for T in (0, 1, 3, 6):
            calls = {"evaluate": 0, "perturb": 0}

            def evaluate(k: np.ndarray, calls: dict = calls, L: int = L) -> np.ndarray:
                calls["evaluate"] += 1
                return np.abs(k - 0.3 * L).astype(np.float64)

            def perturb(v: np.ndarray, calls: dict = calls) -> np.ndarray:
                calls["perturb"] += 1
                return v

            k = split_points(evaluate, np.array([L]), T, perturb)
            assert calls == {"evaluate": 2 * T + 1, "perturb": 2 * T + 1}
            assert 1 <= k[0] <= L - 1
    F = np.ones((3, 2), dtype=np.int64)
    level = LevelObjective(F, np.array([[0, 3, 0, 2]]), np.array([ROW]))
    split_points(level, np.array([3]), 3, laplace_perturber(1.0, 3, SeededRandomSource(0)))
    assert level.calls == 7


def test_noise_scale() -> None:
    assert split_noise_scale(5e-4, 3) == pytest.approx(28_000)
    assert split_noise_scale(1e-3, 3) == pytest.approx(14_000)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 2048), st.integers(0, 12), st.integers(0, 2**31))
def test_output_in_range_with_noise(L: int, T: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    F = rng.poisson(2.0, size=(L, 1)).astype(np.int64)
    k = get_split_point(F, 1e-3, ROW, T, SeededRandomSource(seed))
    assert 1 <= k <= L - 1


def _step(U: int, s: int) -> np.ndarray:
    F = np.ones((U, 8), dtype=np.int64)
    F[:s] = 5
    return F


@pytest.mark.parametrize(
    "U,s", [(1024, 300), (1024, 700), (1024, 512), (1024, 1), (1024, 1023), (64, 37), (3, 2)]
)
def test_noiseless_step_matrices_exact_with_enough_steps(U: int, s: int) -> None:
    F = _step(U, s)
    values = [objective(F, k, ROW) for k in range(1, U)]
    assert int(np.argmin(values)) + 1 == s
    T = math.ceil(math.log2(U)) + 1
    assert get_split_point(F, 1.0, ROW, T, NO_NOISE) == s


@pytest.mark.parametrize(
    "U,s,want",
    [
        (1024, 300, 320),
        (1024, 700, 704),
        (1024, 512, 512),
        (1024, 1, 64),
        (1024, 1023, 960),
        (64, 37, 36),
    ],
)
def test_noiseless_step_matrices_t3(U: int, s: int, want: int) -> None:
    assert get_split_point(_step(U, s), 1.0, ROW, 3, NO_NOISE) == want


def test_selection_quality_and_flattening() -> None:
    """1e6 points on a 1024 x 8 step matrix; 200 seeds at eps'=1 and at eps'=1e-6."""
    rng = np.random.default_rng(9)
    s = 300
    p = np.where(np.arange(1024) < s, 5.0, 1.0)
    rows = rng.choice(1024, size=1_000_000, p=p / p.sum())
    F = np.zeros((1024, 8), dtype=np.int64)
    np.add.at(F, (rows, rng.integers(0, 8, size=rows.size)), 1)

    def outputs(eps: float) -> np.ndarray:
        return np.array(
            [get_split_point(F, eps, ROW, 3, SeededRandomSource(i)) for i in range(200)]
        )

    sharp, flat = outputs(1.0), outputs(1e-6)
    assert np.median(np.abs(sharp - s)) <= 64

    def entropy(x: np.ndarray) -> float:
        _, c = np.unique(x, return_counts=True)
        q = c / c.sum()
        return float(-(q * np.log(q)).sum())

    assert entropy(flat) > entropy(sharp) + 1.0


def test_exhaustive_baseline_noiseless() -> None:
    rng = np.random.default_rng(10)
    for _ in range(20):
        F = rng.poisson(rng.uniform(0.5, 9), size=(rng.integers(2, 12), 5)).astype(np.int64)
        values = [objective(F, k, ROW) for k in range(1, F.shape[0])]
        assert exhaustive_split_point(F, 1.0, ROW, NO_NOISE) == int(np.argmin(values)) + 1
    k = exhaustive_split_point(rng.poisson(3, size=(9, 4)), 1e-3, ROW, SeededRandomSource(1))
    assert 1 <= k <= 8


def test_statistical_dp_smoke_algorithm1() -> None:
    """6x6 D and D' (one cell +1), Algorithm 1 with eps'=1, T=1, 10^5 runs each (vectorised as
    10^5 identical nodes of one level). For outputs with >= 1,000 hits the frequency ratio must
    stay below e * 1.1 (the 10 % covers sampling error: ~3 % relative sd at 1,000 hits)."""
    rng = np.random.default_rng(23)
    D = rng.poisson(3, size=(6, 6)).astype(np.int64)
    D2 = D.copy()
    D2[2, 3] += 1
    runs = 100_000

    def freq(M: np.ndarray, seed: int) -> np.ndarray:
        grid = np.tile(M, (1, runs))
        c0 = 6 * np.arange(runs)
        rects = np.stack([np.zeros(runs, int), np.full(runs, 6), c0, c0 + 6], axis=1)
        level = LevelObjective(grid, rects, np.full(runs, ROW))
        k = split_points(
            level, np.full(runs, 6), 1, laplace_perturber(1.0, 1, SeededRandomSource(seed))
        )
        return np.bincount(k, minlength=6)

    a, b = freq(D, 1), freq(D2, 2)
    hit = (a >= 1000) & (b >= 1000)
    assert hit.sum() >= 2
    ratios = np.maximum(a[hit] / b[hit], b[hit] / a[hit])
    assert ratios.max() <= math.e * 1.1
