"""Implicit operators agree with their dense matrices; solves agree with dense linear algebra."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpcube.linalg import (
    Explicit,
    GramSolver,
    Identity,
    Kronecker,
    Prefix,
    Sum,
    Total,
    VStack,
    Weighted,
    box_rows,
    kron_matvec,
    least_squares,
)


def _check(op, dense) -> None:
    rng = np.random.default_rng(0)
    np.testing.assert_allclose(op.dense(), dense, atol=1e-12)
    x = rng.normal(size=op.cols)
    y = rng.normal(size=op.rows)
    np.testing.assert_allclose(op.matvec(x), dense @ x, atol=1e-10)
    np.testing.assert_allclose(op.rmatvec(y), dense.T @ y, atol=1e-10)
    block = rng.normal(size=(op.cols, 3))
    np.testing.assert_allclose(op.matvec(block), dense @ block, atol=1e-10)
    np.testing.assert_allclose(op.gram().dense(), dense.T @ dense, atol=1e-10)
    np.testing.assert_allclose(op.column_l1(), np.abs(dense).sum(axis=0), atol=1e-12)
    np.testing.assert_allclose(op.column_l2_squared(), (dense**2).sum(axis=0), atol=1e-12)
    np.testing.assert_array_equal(op.column_support(), np.count_nonzero(dense, axis=0))
    np.testing.assert_allclose(op.l1_sensitivity(), np.abs(dense).sum(axis=0).max())
    np.testing.assert_allclose(op.l2_sensitivity(), np.sqrt((dense**2).sum(axis=0).max()))
    assert op.nonnegative() == bool(dense.min() >= 0)


def test_basic_operators() -> None:
    _check(Identity(4), np.eye(4))
    _check(Total(5), np.ones((1, 5)))
    _check(Prefix(5), np.tril(np.ones((5, 5))))
    m = np.array([[1.0, -2.0, 0.0], [0.0, 3.0, 1.0]])
    _check(Explicit(m), m)
    _check(Explicit(sp.csr_matrix(m)), m)
    _check(Weighted(Explicit(m), [2.0, -1.0]), np.diag([2.0, -1.0]) @ m)
    _check(VStack([Identity(3), Explicit(m), Total(3)]), np.vstack([np.eye(3), m, np.ones((1, 3))]))
    _check(
        Kronecker([Prefix(2), Explicit(m), Total(2)]),
        np.kron(np.kron(np.tril(np.ones((2, 2))), m), np.ones((1, 2))),
    )
    _check(Sum([Identity(3), Explicit(np.ones((3, 3)))]), np.eye(3) + 1)


def test_box_rows_are_indicators() -> None:
    op = box_rows([[[0, 1], [1, 2]], [[2, 2], [0, 0]]], (3, 3), weights=[1.0, 2.0])
    want = np.zeros((2, 3, 3))
    want[0, 0:2, 1:3] = 1.0
    want[1, 2, 0] = 2.0
    np.testing.assert_array_equal(op.dense(), want.reshape(2, 9))


@settings(max_examples=25, deadline=None)
@given(
    dims=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    seed=st.integers(0, 10_000),
)
@example(
    dims=[1, 1], seed=92
)  # two all-negative factors: a non-negative product (found by hypothesis)
def test_kronecker_products_and_solves(dims: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    factors = [rng.normal(size=(d + 1, d)) for d in dims]
    dense = factors[0]
    for f in factors[1:]:
        dense = np.kron(dense, f)
    op = Kronecker([Explicit(f) for f in factors])
    _check(op, dense)
    x = rng.normal(size=dense.shape[1])
    np.testing.assert_allclose(kron_matvec(factors, x), dense @ x, atol=1e-9)
    # several columns, the transpose, and sparse factors (the path without the batched products)
    xs = rng.normal(size=(dense.shape[1], 3))
    np.testing.assert_allclose(kron_matvec(factors, xs), dense @ xs, atol=1e-9)
    ys = rng.normal(size=(dense.shape[0], 2))
    np.testing.assert_allclose(kron_matvec(factors, ys, transpose=True), dense.T @ ys, atol=1e-9)
    sparse_factors = [sp.csr_matrix(f) for f in factors]
    np.testing.assert_allclose(kron_matvec(sparse_factors, xs), dense @ xs, atol=1e-9)
    solver = GramSolver.for_strategy(op)
    gram = dense.T @ dense
    b = rng.normal(size=dense.shape[1])
    np.testing.assert_allclose(solver.solve(b), np.linalg.solve(gram, b), rtol=1e-6, atol=1e-8)
    w = Kronecker([Explicit(rng.normal(size=(2, d))) for d in dims])
    want = np.trace(w.gram().dense() @ np.linalg.inv(gram))
    np.testing.assert_allclose(solver.trace_with(w.gram()), want, rtol=1e-6)
    lo = [int(rng.integers(0, d)) for d in dims]
    box = np.array([[[a, int(rng.integers(a, d))] for a, d in zip(lo, dims, strict=True)]])
    q = box_rows(box, dims).dense()[0]
    np.testing.assert_allclose(
        solver.box_quadratic(box, dims), q @ np.linalg.solve(gram, q), rtol=1e-6
    )


def test_dense_solver_and_pseudo_inverse() -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(size=(7, 4))
    solver = GramSolver.for_strategy(Explicit(a))
    assert not solver.singular
    y = rng.normal(size=7)
    np.testing.assert_allclose(
        least_squares(Explicit(a), y, solver), np.linalg.lstsq(a, y, rcond=None)[0], atol=1e-10
    )
    box = np.array([[[1, 2]]])
    q = np.array([0.0, 1.0, 1.0, 0.0])
    np.testing.assert_allclose(solver.box_quadratic(box, (4,)), q @ np.linalg.solve(a.T @ a, q))
    deficient = np.vstack([np.ones(4), [1.0, 1.0, 0.0, 0.0]])
    s2 = GramSolver.for_strategy(Explicit(deficient))
    assert s2.singular
    np.testing.assert_allclose(
        least_squares(Explicit(deficient), [4.0, 3.0], s2),
        np.linalg.pinv(deficient) @ [4.0, 3.0],
        atol=1e-10,
    )
