"""The matrix mechanism's theory (Li and Miklau, "Efficient Batch Query Answering Under
Differential Privacy", 2011 preprint): sensitivities and error closed forms (Sec. 2, Props. 2.3-2.4),
strategy theory (Sec. 3.1, Defs. 3.1-3.4, Thms. 3.1-3.2), the singular value bound (Secs. 3.2-3.3,
Thm. 3.3, Example 3.1) and the baseline ratios of Sec. 5. Exact values are computed in closed
form or by a reference run (P = 1 unless stated)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcube.linalg import Explicit, Identity, Kronecker
from dpcube.mechanisms.matrix.bound import (
    P,
    gaussian_error,
    laplace_error,
    svdb,
    svdb_from_matrix,
    trace_term,
)
from dpcube.mechanisms.matrix.strategies import (
    eigen,
    fig4,
    hierarchical,
    kron,
    variable_agnostic_optimal,
    wavelet,
)
from dpcube.workloads import (
    allpredicate,
    allrange,
    allrange_gram_1d,
    allrange_rows_1d,
    from_matrix,
)

F4 = fig4()


def g1(n: int) -> Explicit:
    return Explicit(allrange_gram_1d(n))


def err(gram, a) -> float:
    return gaussian_error(gram, a if not isinstance(a, np.ndarray) else Explicit(a))


def test_sensitivities() -> None:
    for name in ("H", "Y", "Y1", "Y2"):
        assert Explicit(F4[name]).l2_sensitivity() ** 2 == pytest.approx(3.0, rel=1e-12)
    assert Explicit(F4["Y2"]).l1_sensitivity() == pytest.approx(1 + math.sqrt(2), rel=1e-12)
    for name in ("H", "Y", "Y1"):
        assert Explicit(F4[name]).l1_sensitivity() == 3.0
    assert Identity(5).l2_sensitivity() == 1.0


def test_privacy_factor() -> None:
    assert P(1.0, 1e-4) == pytest.approx(2 * math.log(20000), rel=1e-12)
    assert round(P(1.0, 1e-4), 4) == 19.8070


def test_allrange4_closed_forms() -> None:
    g = g1(4)
    np.testing.assert_array_equal(
        g.dense(), [[4, 3, 2, 1], [3, 6, 4, 2], [2, 4, 6, 3], [1, 2, 3, 4]]
    )
    assert err(g, Identity(4)) == pytest.approx(20, rel=1e-9)
    assert err(g, allrange_rows_1d(4)) == pytest.approx(24, rel=1e-9)
    assert err(g, F4["H"]) == pytest.approx(146 / 7, rel=1e-9)
    for name in ("Y", "Y1", "Y2"):
        assert err(g, F4[name]) == pytest.approx(18, rel=1e-9)
    assert svdb(g) == pytest.approx(16.31224283, rel=1e-9)
    assert trace_term(g, Explicit(F4["Y"])) == pytest.approx(6, rel=1e-9)
    assert trace_term(g, Explicit(F4["H"])) == pytest.approx(146 / 21, rel=1e-9)


def test_laplace_version() -> None:
    g = g1(4)
    want = {"Y1": 54, "Y2": 34.9706, "Y": 54, "H": 62.5714}
    for name, value in want.items():
        assert laplace_error(g, Explicit(F4[name])) == pytest.approx(value, abs=1e-4)
    assert laplace_error(g, Identity(4)) == pytest.approx(20, rel=1e-12)
    assert laplace_error(g, Explicit(F4["Y2"]), epsilon=0.5) == pytest.approx(
        8 * 34.97056, rel=1e-5
    )


def test_allrange2() -> None:
    g = g1(2)
    for a in (Identity(2), allrange_rows_1d(2), hierarchical(2).operator, wavelet(2).operator):
        assert err(g, a) == pytest.approx(4, rel=1e-9)
    assert svdb(g) == pytest.approx(2 + math.sqrt(3), rel=1e-9)
    r = 3**0.25
    assert err(g, np.array([[r, r], [1, -1]])) == pytest.approx(2 + math.sqrt(3), rel=1e-9)


def test_data_independence_and_scaling() -> None:
    g = g1(8)
    h = hierarchical(8).operator.dense()
    base = err(g, h)
    assert err(g, 3.5 * h) == pytest.approx(base, rel=1e-9)
    assert err(Explicit(4.0 * g.dense()), h) == pytest.approx(4.0 * base, rel=1e-9)
    assert base == pytest.approx(352 / 3, rel=1e-9)


def _random_zero_one(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    return (rng.random((rows, n)) < 0.4).astype(float)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), c1=st.floats(0.1, 3.0))
def test_redundant_queries(seed: int, c1: float) -> None:
    rng = np.random.default_rng(seed)
    n = 6
    a0 = np.vstack([np.eye(n), _random_zero_one(rng, 3, n)])
    q = _random_zero_one(rng, 1, n)
    q[0, int(np.argmax(a0.sum(axis=0)))] = 1.0
    a1 = np.vstack([a0, q, c1 * q])
    a2 = np.vstack([a0, math.sqrt(1 + c1**2) * q])
    np.testing.assert_allclose(a1.T @ a1, a2.T @ a2, atol=1e-12)
    w = Explicit(rng.normal(size=(5, n)))
    assert err(w.gram(), a1) == pytest.approx(err(w.gram(), a2), rel=1e-9)
    assert Explicit(a2).l1_sensitivity() < Explicit(a1).l1_sensitivity()


def test_wavelet_grams() -> None:
    block = np.array([[3.0, 1.0], [1.0, 3.0]])
    want = np.kron(np.eye(2), block)
    for name in ("Y", "Y1", "Y2"):
        np.testing.assert_allclose(F4[name].T @ F4[name], want, atol=1e-12)


def test_column_uniform_repair() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = 6
        a = rng.normal(size=(8, n)) * rng.uniform(0.2, 2.0, size=n)
        norms = (a**2).sum(axis=0)
        repair = np.diag(np.sqrt(norms.max() - norms))
        repaired = np.vstack([a, repair[norms < norms.max()]])
        w = Explicit(rng.normal(size=(5, n)))
        assert err(w.gram(), repaired) <= err(w.gram(), a) * (1 + 1e-9)


def test_equivalent_strategies() -> None:
    rng = np.random.default_rng(4)
    a = rng.normal(size=(9, 5))
    b = np.linalg.cholesky(a.T @ a).T
    for _ in range(5):
        w = Explicit(rng.normal(size=(4, 5)))
        assert err(w.gram(), a) == pytest.approx(err(w.gram(), b), rel=1e-9)


#: The singular value bound of AllRange(n) (the paper's Example 3.1 and Sec. 5.1).
SVDB_ALLRANGE = {
    2: 3.732051,
    4: 16.312243,
    8: 79.172339,
    16: 404.482931,
    32: 2095.566671,
    64: 10787.150314,
    128: 54677.512774,
    256: 272163.034705,
    512: 1330721.650397,
    1024: 6400693.767974,
}


def test_svdb_values() -> None:
    for n, value in SVDB_ALLRANGE.items():
        assert svdb(allrange((n,)).gram) == pytest.approx(value, rel=1e-6)
    assert svdb(allrange((32, 32)).gram) == pytest.approx(SVDB_ALLRANGE[32] ** 2, rel=1e-9)
    assert svdb(allrange((32, 32)).gram) == pytest.approx(4.391400e6, rel=1e-6)
    assert svdb(allrange((16, 8, 8)).gram) == pytest.approx(2.535404e6, rel=1e-6)
    assert svdb(allrange((2,) * 10).gram) == pytest.approx((2 + math.sqrt(3)) ** 10, rel=1e-9)


def test_allpredicate() -> None:
    want = {2: 3.7320508, 4: 27.4164079, 8: 800.0, 16: 374469.8048}
    for n, value in want.items():
        formula = 2 ** (n - 2) / n * (n - 1 + math.sqrt(n + 1)) ** 2
        assert svdb(allpredicate(n).gram) == pytest.approx(formula, rel=1e-9)
        assert formula == pytest.approx(value, rel=1e-8)
    assert svdb(allpredicate(8).gram) == pytest.approx(800.0, rel=1e-12)


def test_variable_agnostic_tightness() -> None:
    for n in (2, 4, 8, 16):
        g = allpredicate(n).gram
        a, b = 2.0 ** (n - 1), 2.0 ** (n - 2)
        opt = variable_agnostic_optimal(a, b, n).operator
        assert err(g, opt) == pytest.approx(svdb(g), rel=1e-9)
        mu = np.full(n, a - b)
        mu[0] = a + (n - 1) * b
        square_roots = (mu**0.5)[:, None] * variable_agnostic_optimal(1.0, 0.0, n).operator.dense()
        assert err(g, square_roots) == pytest.approx(n * a, rel=1e-9)
        assert err(g, Identity(n)) == pytest.approx(n * a, rel=1e-9)
    a, b, n = 5.0, 2.0, 8
    g = Explicit((a - b) * np.eye(n) + b)
    assert err(g, variable_agnostic_optimal(a, b, n).operator) == pytest.approx(svdb(g), rel=1e-9)


def test_lower_bound_on_random_pairs() -> None:
    from dpcube.mechanisms.matrix.lsa import lsa

    rng = np.random.default_rng(16)
    for i in range(200):
        n = int(rng.integers(2, 17))
        w = (
            _random_zero_one(rng, int(rng.integers(1, 20)), n)
            if i % 2
            else rng.normal(size=(int(rng.integers(1, 20)), n))
        )
        g = Explicit(w.T @ w)
        bound = svdb(g)
        kind = i % 6
        if kind == 0:
            a = Identity(n)
        elif kind == 1:
            a = hierarchical(n).operator
        elif kind == 2 and n & (n - 1) == 0:
            a = wavelet(n).operator
        elif kind == 3:
            a = Explicit(rng.normal(size=(n + 2, n)))
        elif kind == 4 and n <= 12:
            a = lsa(g.dense() + 1e-9 * np.eye(n), (n,)).strategy().operator
        else:
            a = eigen(g).operator
        assert err(g, a) >= bound * (1 - 1e-9)


def test_monotonicity_and_equivalence() -> None:
    rng = np.random.default_rng(17)
    for _ in range(20):
        w = rng.normal(size=(5, 6))
        more = np.vstack([w, rng.normal(size=(3, 6))])
        assert svdb_from_matrix(more) >= svdb_from_matrix(w) * (1 - 1e-12)
        q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
        assert svdb_from_matrix(q @ w) == pytest.approx(svdb_from_matrix(w), rel=1e-9)
        dup = np.vstack([w, w[:1]])
        merged = np.vstack([math.sqrt(2) * w[:1], w[1:]])
        assert svdb_from_matrix(dup) == pytest.approx(svdb_from_matrix(merged), rel=1e-9)


def test_kronecker() -> None:
    g4, g8 = g1(4), g1(8)
    assert svdb(Explicit(np.kron(g4.dense(), g8.dense()))) == pytest.approx(
        svdb(g4) * svdb(g8), rel=1e-9
    )
    assert svdb(Kronecker([g4, g8])) == pytest.approx(svdb(g4) * svdb(g8), rel=1e-12)
    a = kron([hierarchical(4), wavelet(8)]).operator
    got = gaussian_error(Kronecker([g4, g8]), a)
    dense = gaussian_error(Explicit(np.kron(g4.dense(), g8.dense())), Explicit(a.dense()))
    want = err(g4, hierarchical(4).operator) * err(g8, wavelet(8).operator)
    assert got == pytest.approx(want, rel=1e-9)
    assert dense == pytest.approx(want, rel=1e-9)


def test_svdb_from_rows_equals_from_gram() -> None:
    rng = np.random.default_rng(19)
    for shape in ((3, 8), (20, 8), (8, 8)):
        w = rng.normal(size=shape)
        assert svdb_from_matrix(w) == pytest.approx(svdb(from_matrix(w).gram), rel=1e-9)


#: Error / svdb on AllRange(n) of Identity, the workload itself, the hierarchical strategy and
#: the wavelet (the baselines of the paper's Sec. 5.2 and Fig. 4).
BASELINE_RATIOS = {
    8: (1.5157, 2.0209, 1.4820, 1.1810),
    16: (2.0174, 2.8481, 1.6258, 1.2709),
    32: (2.8556, 4.1535, 1.7098, 1.3487),
    256: (10.3947, 15.5314, 1.7780, 1.4849),
    1024: (28.0410, 42.0204, 1.7760, 1.5291),
}


def _workload_error(n: int) -> float:
    """A = W (AllRange rows) without materialising W: P·n·max diag(G) (the paper's
    Sec. 5.2: the workload as its own strategy)."""
    return n * float(np.diag(allrange_gram_1d(n)).max())


def test_baseline_ratios() -> None:
    for n, (ident, work, h, y) in BASELINE_RATIOS.items():
        g = g1(n)
        b = svdb(g)
        assert err(g, Identity(n)) / b == pytest.approx(ident, rel=1e-3)
        assert _workload_error(n) / b == pytest.approx(work, rel=1e-3)
        assert err(g, hierarchical(n).operator) / b == pytest.approx(h, rel=1e-3)
        assert err(g, wavelet(n).operator) / b == pytest.approx(y, rel=1e-3)
        assert err(g, Identity(n)) == pytest.approx(n * (n + 1) * (n + 2) / 6, rel=1e-9)
        assert _workload_error(n) == pytest.approx(n * math.ceil(n / 2) * (n // 2 + 1), rel=1e-12)
    g8 = g1(8)
    assert err(g8, hierarchical(8).operator) == pytest.approx(352 / 3, rel=1e-9)
    assert err(g8, wavelet(8).operator) == pytest.approx(93.5, rel=1e-9)
    assert err(g8, Identity(8)) == pytest.approx(120, rel=1e-9)
    assert err(g8, allrange_rows_1d(8)) == pytest.approx(160, rel=1e-9)
    for n in (5, 7):
        assert err(g1(n), allrange_rows_1d(n)) == pytest.approx(
            n * math.ceil(n / 2) * (n // 2 + 1), rel=1e-9
        )


def test_allrange_32x32() -> None:
    w = allrange((32, 32))
    b = svdb(w.gram)
    assert gaussian_error(w.gram, Identity(1024)) / b == pytest.approx(8.154, abs=5e-4)
    assert 32 * 32 * float(np.diag(allrange_gram_1d(32)).max()) ** 2 / b == pytest.approx(
        17.252, abs=5e-4
    )
    hh = kron([hierarchical(32), hierarchical(32)]).operator
    assert gaussian_error(w.gram, hh) / b == pytest.approx(2.923, abs=5e-4)
