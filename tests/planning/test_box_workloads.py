"""Box workloads on large grids: the Gram as a sum of Kronecker products of intervals,
OPT_⊗ on it, the planner at 256 x 256 without dense matrices, and strategies reused across eps."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from dpcube.errors import QueryError
from dpcube.histogram import Histogram
from dpcube.linalg.boxes import BoxGram, interval_gram, spread_over_boxes
from dpcube.linalg.solve import GramSolver
from dpcube.mechanisms.matrix import cache as strategy_cache
from dpcube.mechanisms.matrix import optimize
from dpcube.mechanisms.matrix.mechanism import MatrixMechanism, make_strategy
from dpcube.mechanisms.matrix.optimize import opt_kron_boxes
from dpcube.mechanisms.matrix.plan import plan as matrix_plan
from dpcube.planning import AutoMechanism, plan_mechanisms
from dpcube.schema import Schema
from dpcube.workloads import Workload, box_gram, from_boxes
from experiments.leaderboard import grid_schema


def random_boxes(dims: tuple[int, ...], q: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.zeros((q, len(dims), 2), dtype=np.int64)
    for axis, d in enumerate(dims):
        ends = np.sort(rng.integers(0, d, size=(q, 2)), axis=1)
        out[:, axis] = ends
    return out


def spatial_schema(n: int) -> Schema:
    """One spatial attribute of n x n unit cells (the leaderboard's 2-D schema)."""
    return grid_schema((n, n))


def random_psd(d: int, rng: np.random.Generator) -> np.ndarray:
    m = rng.normal(size=(d, d))
    return np.asarray(m @ m.T)


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(strategy_cache.CACHE_ENV, raising=False)
    strategy_cache.clear_memory()


def test_box_gram_matches_the_dense_gram_and_its_adjoint() -> None:
    boxes = random_boxes((8, 8), 40)
    g = BoxGram(boxes, (8, 8))
    dense = box_gram(boxes, (8, 8))
    assert np.allclose(g.dense(), dense)
    x = np.random.default_rng(1).normal(size=(64, 3))
    assert np.allclose(g.matvec(x), dense @ x)
    # spread_over_boxes is the adjoint of the box sums: <W x, v> = <x, Wᵀ v>
    v = np.arange(40.0)
    w_x = np.array(
        [x[:, 0].reshape(8, 8)[a0 : b0 + 1, a1 : b1 + 1].sum() for (a0, b0), (a1, b1) in boxes]
    )
    assert math.isclose(
        float(w_x @ v), float(x[:, 0] @ spread_over_boxes(v, boxes, (8, 8)).ravel()), rel_tol=1e-12
    )
    assert g.trace() == pytest.approx(np.trace(dense))


def test_interval_gram_is_the_weighted_sum_of_outer_products() -> None:
    intervals = random_boxes((9,), 30)[:, 0, :]
    weights = np.random.default_rng(2).uniform(0.5, 2.0, size=30)
    expected = np.zeros((9, 9))
    for (a, b), w in zip(intervals, weights, strict=True):
        r = np.zeros(9)
        r[a : b + 1] = 1.0
        expected += w * np.outer(r, r)
    assert np.allclose(interval_gram(intervals, 9, weights), expected)


def test_kronecker_sum_error_equals_the_dense_formula_on_8x8() -> None:
    """tr(G (⊗ Xᵢ)⁻¹) = Σ_q Πᵢ r_qiᵀ Xᵢ⁻¹ r_qi against the dense n x n product (64 cells)."""
    boxes = random_boxes((8, 8), 60, seed=3)
    g = BoxGram(boxes, (8, 8))
    dense = box_gram(boxes, (8, 8))
    rng = np.random.default_rng(4)
    factors = [random_psd(8, rng) for _ in range(2)]
    assert g.kron_trace(factors) == pytest.approx(float(np.sum(dense * np.kron(*factors))))
    for name in ("identity", "hierarchical", "wavelet"):
        op = make_strategy(name, (8, 8)).operator
        by_boxes = GramSolver.for_strategy(op).trace_with(g)
        by_dense = float(np.trace(np.linalg.solve(op.dense().T @ op.dense(), dense)))
        assert by_boxes == pytest.approx(by_dense, rel=1e-9), name
    # the planner's rows on the BoxGram workload equal those on the dense-Gram workload
    small = from_boxes(boxes, (8, 8))
    as_boxes = Workload("b", (8, 8), g, len(boxes), boxes=boxes)
    names = ["identity", "hierarchical", "wavelet"]
    a = matrix_plan(small, 1.0, None, names)["strategies"]
    b = matrix_plan(as_boxes, 1.0, None, names)["strategies"]
    for name in names:
        assert b[name]["error"] == pytest.approx(a[name]["error"], rel=1e-9)


def test_opt_kron_boxes_objective_is_the_exact_trace_and_beats_identity() -> None:
    from experiments.leaderboard import dpbench_random_boxes

    boxes = dpbench_random_boxes((16, 16), 100, seed=3)  # wide boxes: identity is not optimal
    g = BoxGram(boxes, (16, 16))
    dense = box_gram(boxes, (16, 16))
    res = opt_kron_boxes(g, seed=0)
    a = np.kron(res.factors[0], res.factors[1])
    exact = float(np.trace(np.linalg.pinv(a.T @ a) @ dense))
    assert res.objective == pytest.approx(exact, rel=1e-6)
    # every factor has column L1 norm 1, so the identity's objective is tr(G): OPT_⊗ starts
    # there and every block step can only lower it
    assert np.allclose(np.abs(a).sum(axis=0), 1.0)
    assert res.objective < 0.8 * g.trace()  # 5,477 against 7,510 when written


def test_planner_on_256x256_boxes_runs_without_dense_matrices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dense Gram would be 65,536² float64 = 32 GiB; the bound below (64 MiB; 9 MiB measured
    when written) allows a few vectors of 65,536 cells and per-axis 256 x 256 matrices, not
    one dense 65,536 x 256 block (128 MiB)."""

    def no_dense(self: BoxGram) -> np.ndarray:
        raise AssertionError("a 65,536-cell box Gram was made dense")

    monkeypatch.setattr(BoxGram, "dense", no_dense)
    boxes = random_boxes((256, 256), 300, seed=6)
    w = from_boxes(boxes, (256, 256), name="boxes 256x256")
    assert isinstance(w.gram, BoxGram) and w.rows is None
    tracemalloc.start()
    try:
        plan = plan_mechanisms(spatial_schema(256), w, 1.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20
    exact = {c.label: c for c in plan.candidates if c.basis == "exact"}
    assert {"matrix(opt)", "matrix(identity)", "matrix(wavelet)", "privelet"} <= set(exact)
    # identity: v · tr(G) with tr(G) = Σ box sizes, per unit of the row variance
    sizes = float(np.prod(boxes[:, :, 1] - boxes[:, :, 0] + 1, axis=1).sum())
    v = MatrixMechanism(1.0).release_noise_variance(make_strategy("identity", (256, 256)))
    assert exact["matrix(identity)"].expected_error == pytest.approx(v * sizes, rel=1e-12)
    assert plan.recommended.label == "matrix(opt)"
    assert exact["matrix(opt)"].expected_error < 0.5 * exact["matrix(identity)"].expected_error
    # --mechanism auto releases with it (the strategy comes from the cache, not re-optimised)
    counts = np.random.default_rng(10).integers(0, 5, size=(256, 256))
    auto = AutoMechanism(1.0, workload=w, mechanisms=["identity", "matrix"])
    release = auto.release(Histogram(spatial_schema(256), counts), random_state=11, account=False)
    assert auto.plan_.recommended.label == "matrix(opt)"
    noise = release.metadata.noise
    assert noise["expected_total_squared_error"] == pytest.approx(
        exact["matrix(opt)"].expected_error, rel=1e-9
    )
    assert noise["svdb"] is None  # not computed: it needs the eigenvalues of the 65,536² Gram


def test_strategy_reused_across_epsilons_without_reoptimising(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    original = optimize.optimized_strategy

    def counting(workload, **kw):  # type: ignore[no-untyped-def]
        calls.append(workload.name)
        return original(workload, **kw)

    monkeypatch.setattr(optimize, "optimized_strategy", counting)
    boxes = random_boxes((32, 32), 200, seed=7)
    errors = []
    for eps in (0.1, 1.0):
        w = from_boxes(boxes, (32, 32), name="q")  # a new object with the same queries
        plan = plan_mechanisms(
            spatial_schema(32), w, eps, mechanisms=["matrix"], strategies=["opt", "identity"]
        )
        errors.append(next(c for c in plan.candidates if c.label == "matrix(opt)").expected_error)
    assert len(calls) == 1
    # same strategy: the error scales as 1/eps² up to the samplers' rounding (well under 1 %)
    assert errors[0] / errors[1] == pytest.approx(100.0, rel=0.01)


def test_disk_cache_rebuilds_the_same_strategy(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(strategy_cache.CACHE_ENV, "disk")
    w = from_boxes(random_boxes((16, 16), 80, seed=8), (16, 16), name="q")
    first = make_strategy("opt", (16, 16), w)
    files = list((tmp_path / "home" / "strategies").glob("*.json"))
    assert len(files) == 1
    strategy_cache.clear_memory()
    calls: list[int] = []
    original = optimize.optimized_strategy
    monkeypatch.setattr(
        optimize, "optimized_strategy", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    second = make_strategy("opt", (16, 16), w)
    assert calls == []
    assert np.allclose(second.operator.dense(), first.operator.dense())
    files[0].write_text("{not json")  # a damaged entry is rebuilt, not trusted
    strategy_cache.clear_memory()
    make_strategy("opt", (16, 16), w)
    assert calls == [1]


def test_cache_mode_refuses_unknown_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcube.errors import UsageError

    monkeypatch.setenv(strategy_cache.CACHE_ENV, "sometimes")
    with pytest.raises(UsageError, match="DPCUBE_STRATEGY_CACHE"):
        make_strategy("opt", (4,), from_boxes([[[0, 1]]], (4,)))


def test_box_grid_too_large_is_refused_in_one_line() -> None:
    with pytest.raises(QueryError, match="use coarser bins") as info:
        from_boxes([[[0, 1], [0, 1]]], (4096, 2048))
    assert "\n" not in str(info.value)


def test_random_range_spec_on_a_large_grid_names_the_alternative() -> None:
    from dpcube.workloads import parse_workload

    with pytest.raises(QueryError, match="query file") as info:
        parse_workload("random-range:100:256x256")
    assert "\n" not in str(info.value)


def test_identity_box_quadratic_is_the_box_size() -> None:
    from dpcube.linalg.operators import Identity

    boxes = random_boxes((6, 7), 20, seed=12)
    vectors = np.zeros((20, 6, 7))
    for r, ((a0, b0), (a1, b1)) in enumerate(boxes):
        vectors[r, a0 : b0 + 1, a1 : b1 + 1] = 1.0
    expected = GramSolver(Identity(42)).quadratic(vectors.reshape(20, 42))
    assert np.array_equal(GramSolver(Identity(42)).box_quadratic(boxes, (6, 7)), expected)
