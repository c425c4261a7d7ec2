"""Solves with a Gram matrix ``X = AᵀA`` (least squares, error traces, query variances).

:class:`GramSolver` factors ``X`` once and then gives ``X⁻¹ b`` (or ``X⁺ b`` when ``X`` is
singular: the pseudo-inverse extension of Li & Miklau 2011, Prop. 2.3), ``tr(G X⁻¹)`` for a
workload Gram ``G`` and the quadratic forms ``qᵀ X⁻¹ q`` of box queries.

A Kronecker ``X = X₁ ⊗ … ⊗ X_k`` is never formed: ``X⁻¹ = X₁⁻¹ ⊗ … ⊗ X_k⁻¹`` (same for ``⁺``),
``tr((G₁⊗G₂)(X₁⊗X₂)⁻¹) = tr(G₁X₁⁻¹)·tr(G₂X₂⁻¹)`` and a box is a Kronecker product of intervals,
so its quadratic form is a product of per-axis interval sums (Li & Miklau, Sec. 3.3). A 256 x 256
grid (65,536 cells) therefore costs two 256 x 256 factorisations.

>>> from dpcube.linalg.operators import Explicit, Identity, Kronecker
>>> s = GramSolver(Kronecker([Explicit([[2.0, 1.0], [1.0, 2.0]]), Identity(2)]))
>>> np.round(s.solve(np.ones(4)), 6).tolist()
[0.333333, 0.333333, 0.333333, 0.333333]
>>> round(s.trace_with(Kronecker([Identity(2), Identity(2)])), 6)
2.666667
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike

from dpcube.linalg.boxes import BoxGram, interval_quadratic
from dpcube.linalg.marginal import RCOND, MarginalSpectrum
from dpcube.linalg.operators import (
    FloatArray,
    Identity,
    Kronecker,
    LinearOperator,
    Sum,
    kron_matvec,
)


class _DenseFactor:
    """Cholesky of a positive-definite matrix, or an eigen pseudo-inverse of a singular one."""

    def __init__(self, x: FloatArray) -> None:
        x = 0.5 * (x + x.T)
        self.n = x.shape[0]
        self.cho: tuple[FloatArray, bool] | None = None
        self.pinv: FloatArray | None = None
        try:
            self.cho = sla.cho_factor(x, lower=True, check_finite=False)
            diag = np.diag(self.cho[0])
            if diag.min() <= math.sqrt(RCOND) * diag.max():
                raise np.linalg.LinAlgError("nearly singular")
        except (np.linalg.LinAlgError, sla.LinAlgError):
            self.cho = None
            w, v = np.linalg.eigh(x)
            keep = w > RCOND * max(float(w.max()), 1e-300)
            self.pinv = (v[:, keep] / w[keep]) @ v[:, keep].T
        self.singular = self.cho is None

    def solve(self, b: FloatArray) -> FloatArray:
        if self.cho is not None:
            return np.asarray(sla.cho_solve(self.cho, b, check_finite=False), dtype=np.float64)
        assert self.pinv is not None
        return np.asarray(self.pinv @ b, dtype=np.float64)

    def inverse(self) -> FloatArray:
        """``X⁻¹`` (``X⁺``), computed once: a Kronecker solve reads every factor's inverse."""
        if self.pinv is None:
            self.pinv = self.solve(np.eye(self.n))
        return self.pinv


def operator_trace(op: LinearOperator) -> float:
    """``tr(M)`` of a square operator: per axis for Kronecker products, per part for sums.

    >>> from dpcube.linalg.operators import Explicit
    >>> operator_trace(Kronecker([Identity(3), Explicit([[1.0, 2.0], [3.0, 4.0]])]))
    15.0
    """
    if isinstance(op, Identity):
        return float(op.cols)
    if isinstance(op, BoxGram):
        return op.trace()
    if isinstance(op, Kronecker):
        return math.prod(operator_trace(f) for f in op.factors)
    if isinstance(op, Sum):
        return sum(operator_trace(p) for p in op.parts)
    return float(np.trace(op.dense()))


class GramSolver:
    """Factor a Gram operator ``X`` (n x n, symmetric PSD) for repeated solves.

    Kronecker Grams are factored per axis; sums of Kronecker products in the marginal algebra
    (stacks of weighted marginals, :mod:`dpcube.linalg.marginal`) are solved on their common
    eigenspaces; anything else is made dense (n up to a few thousand).
    """

    def __init__(self, gram: LinearOperator) -> None:
        self.shape = gram.shape
        self.kron: list[_DenseFactor] | None = None
        self.dense_factor: _DenseFactor | None = None
        self.marginal: MarginalSpectrum | None = None
        self.identity = isinstance(gram, Identity)
        spectrum = MarginalSpectrum.from_gram(gram) if isinstance(gram, Sum) else None
        if isinstance(gram, Kronecker):
            self.kron = [_DenseFactor(f.dense()) for f in gram.factors]
            self.dims: tuple[int, ...] = tuple(f.cols for f in gram.factors)
        elif spectrum is not None and len(spectrum.dims) > 1:
            self.marginal = spectrum
            self.dims = spectrum.dims
        elif self.identity:
            self.dims = (gram.cols,)
        else:
            self.dense_factor = _DenseFactor(gram.dense())
            self.dims = (gram.cols,)

    @classmethod
    def for_strategy(cls, strategy: LinearOperator) -> GramSolver:
        """Factor ``AᵀA`` of a strategy."""
        return cls(strategy.gram())

    @property
    def singular(self) -> bool:
        """True when the pseudo-inverse is used (rank-deficient strategy, Li & Miklau, Prop.
        2.3)."""
        if self.kron is not None:
            return any(f.singular for f in self.kron)
        if self.marginal is not None:
            return self.marginal.singular
        if self.identity:
            return False
        assert self.dense_factor is not None
        return self.dense_factor.singular

    def solve(self, b: ArrayLike) -> FloatArray:
        """``X⁻¹ b`` (``X⁺ b`` if singular) for a vector or an (n, k) block."""
        v = np.asarray(b, dtype=np.float64)
        if self.kron is not None:
            return kron_matvec([f.inverse() for f in self.kron], v)
        if self.marginal is not None:
            return self.marginal.solve(v)
        if self.identity:
            return v.copy()
        assert self.dense_factor is not None
        return self.dense_factor.solve(v)

    def trace_with(self, workload_gram: LinearOperator) -> float:
        """``tr(G X⁻¹)``: the strategy-dependent factor of the total error (Li & Miklau, Eq. 1)."""
        if self.identity:
            return operator_trace(workload_gram)
        if isinstance(workload_gram, BoxGram) and self.kron is not None:
            if self.dims == workload_gram.dims:  # Σ_q w_q Πᵢ r_qiᵀ Xᵢ⁻¹ r_qi, never n x n
                return workload_gram.kron_trace([f.inverse() for f in self.kron])
        parts = workload_gram.parts if isinstance(workload_gram, Sum) else [workload_gram]
        terms = [t for t in parts if isinstance(t, Kronecker)]
        if (
            self.kron is not None
            and len(terms) == len(parts)
            and all(tuple(f.cols for f in t.factors) == self.dims for t in terms)
        ):
            # tr((Σ_j ⊗ᵢ G_ij)(⊗ᵢ Xᵢ)⁻¹) = Σ_j Πᵢ tr(G_ij Xᵢ⁻¹): per axis, never n x n
            total = 0.0
            for t in terms:
                total += math.prod(
                    float(np.sum(g.dense() * f.inverse()))
                    for g, f in zip(t.factors, self.kron, strict=True)
                )
            return total
        if self.marginal is not None:
            other = MarginalSpectrum.from_gram(workload_gram)
            if other is not None and other.dims == self.dims:
                return self.marginal.trace_with(other)
        g = workload_gram.dense()
        if self.kron is not None or self.marginal is not None:
            return float(np.sum(g * self.solve(np.eye(self.shape[0]))))
        assert self.dense_factor is not None
        return float(np.trace(self.dense_factor.solve(g)))

    def quadratic(self, queries: ArrayLike) -> FloatArray:
        """``qᵀ X⁻¹ q`` for every row q of a (k, n) array of query vectors."""
        q = np.atleast_2d(np.asarray(queries, dtype=np.float64))
        return np.einsum("ij,ji->i", q, self.solve(q.T))

    def box_quadratic(self, boxes: ArrayLike, dims: Sequence[int]) -> FloatArray:
        """``qᵀ X⁻¹ q`` for 0/1 box queries (shape (q, k, 2), inclusive bounds) on grid ``dims``.

        With per-axis factors matching ``dims`` this is the product over axes of interval sums of
        ``Xᵢ⁻¹`` (2-D prefix sums: O(k) per box); otherwise the boxes become vectors and are solved.
        """
        b = np.asarray(boxes, dtype=np.int64).reshape(-1, len(dims), 2)
        if self.identity:  # qᵀq: the box's cells
            return np.prod(b[:, :, 1] - b[:, :, 0] + 1, axis=1).astype(np.float64)
        if self.kron is not None and tuple(dims) == self.dims:
            out = np.ones(len(b))
            for axis, f in enumerate(self.kron):
                out *= interval_quadratic(f.inverse(), b[:, axis, :])
            return out
        n = math.prod(dims)
        result = np.empty(len(b))
        for start in range(0, len(b), 256):
            chunk = b[start : start + 256]
            vectors = np.zeros((len(chunk), *dims))
            for r, box in enumerate(chunk):
                index: tuple[int | slice, ...] = (r, *(slice(lo, hi + 1) for lo, hi in box))
                vectors[index] = 1.0
            result[start : start + len(chunk)] = self.quadratic(vectors.reshape(len(chunk), n))
        return result


def least_squares(
    strategy: LinearOperator, answers: ArrayLike, solver: GramSolver | None = None
) -> FloatArray:
    """``x̂ = (AᵀA)⁻¹ Aᵀ y`` (``A⁺ y`` when A is rank-deficient): step 2 of the matrix mechanism
    (Li & Miklau, Prop. 2.3), by the normal equations through :class:`GramSolver`.

    >>> from dpcube.linalg.operators import Explicit
    >>> least_squares(Explicit([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), [1.0, 2.0, 3.0]).round(9).tolist()
    [1.0, 2.0]
    """
    s = solver or GramSolver.for_strategy(strategy)
    return s.solve(strategy.rmatvec(np.asarray(answers, dtype=np.float64)))


__all__ = ["RCOND", "GramSolver", "least_squares", "operator_trace"]
