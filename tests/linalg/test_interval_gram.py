"""The implicit 1-D interval Gram (:class:`dpcube.linalg.boxes.IntervalGram`) against its dense
form, and OPT_0 on it against OPT_0 on the dense Gram."""

from __future__ import annotations

import numpy as np
import pytest

from dpcube.linalg.boxes import IntervalGram, interval_gram
from dpcube.mechanisms.matrix.optimize import (
    interval_form,
    opt_pidentity,
    optimized_strategy,
    pidentity_objective,
)
from dpcube.workloads import from_boxes, parse_workload


def _random_intervals(rng: np.random.Generator, n: int, q: int) -> np.ndarray:
    ends = np.sort(rng.integers(0, n, size=(q, 2)), axis=1)
    return ends.astype(np.int64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_left_multiply_diagonal_and_trace_match_the_dense_gram(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, q = 37, 50
    intervals = _random_intervals(rng, n, q)
    weights = rng.uniform(0.1, 3.0, size=q)
    dense = interval_gram(intervals, n, weights)
    implicit = IntervalGram(intervals, n, weights)
    b = rng.normal(size=(5, n))
    # Same sums in another order: agreement to rounding (1e-12 of the entries' size).
    assert np.allclose(implicit.left_multiply(b), b @ dense, rtol=1e-12, atol=1e-12 * q)
    assert np.allclose(implicit.diagonal(), np.diag(dense), rtol=1e-12)
    assert implicit.trace() == pytest.approx(float(np.trace(dense)), rel=1e-12)
    assert np.array_equal(implicit.dense(), dense)


def test_pidentity_objective_and_gradient_on_the_implicit_gram() -> None:
    rng = np.random.default_rng(3)
    n, p = 48, 3
    intervals = _random_intervals(rng, n, 40)
    theta = rng.uniform(0.0, 1.0, size=p * n)
    f_dense, g_dense = pidentity_objective(theta, interval_gram(intervals, n), p)
    f_implicit, g_implicit = pidentity_objective(theta, IntervalGram(intervals, n), p)
    assert f_implicit == pytest.approx(f_dense, rel=1e-12)
    assert np.allclose(g_implicit, g_dense, rtol=1e-10, atol=1e-10 * np.abs(g_dense).max())


def test_opt_on_intervals_reaches_the_dense_optimum() -> None:
    # Same seed, same start; the two runs differ only by rounding in the Gram products, which can
    # steer L-BFGS-B to a slightly different point: 1e-3 relative is far below the 1.5-3x gaps
    # between strategies that the planner decides on.
    w = parse_workload("prefix:64")
    dense = opt_pidentity(w.gram.dense(), seed=0)
    implicit_gram = interval_form(w)
    assert implicit_gram is not None and implicit_gram.queries == 64
    implicit = opt_pidentity(implicit_gram, seed=0)
    assert implicit.objective == pytest.approx(dense.objective, rel=1e-3)
    assert implicit.objective < 0.7 * float(np.trace(w.gram.dense()))  # well below identity


def test_optimized_strategy_uses_the_intervals_of_a_1d_range_workload() -> None:
    rng = np.random.default_rng(4)
    boxes = _random_intervals(rng, 64, 20).reshape(-1, 1, 2)
    w = from_boxes(boxes, (64,))
    assert interval_form(w) is not None  # 20 <= 64**2 / 64
    s = optimized_strategy(w, seed=0)
    # The recorded objective is the exact ||A||_1^2 tr(G (A^T A)^-1) of the chosen strategy.
    a = s.operator.dense()
    l1 = float(np.abs(a).sum(axis=0).max())
    exact = l1**2 * float(np.trace(w.gram.dense() @ np.linalg.pinv(a.T @ a)))
    assert s.info["opt_l1_error_unit"] == pytest.approx(exact, rel=1e-8)
    assert interval_form(parse_workload("allrange:64")) is None  # 2,080 > 64 intervals: dense
