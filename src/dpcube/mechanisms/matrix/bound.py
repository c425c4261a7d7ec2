"""The singular value bound (SVDB) and the error formulas of the matrix mechanism.

Li, Miklau, "Efficient Batch Query Answering Under Differential Privacy" (2011 preprint),
Props. 2.2-2.4, Eqs. 1 and 4, and Sec. 3 (Thm 3.3, Cor 3.1). All
error functions return the value with ``P(ε,δ) = 1`` unless a factor is passed: ratios to the
bound never depend on it.

>>> from dpcube.workloads import allrange
>>> round(svdb(allrange((4,)).gram), 8)
16.31224283
>>> round(P(1.0, 1e-4), 4)
19.807
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from dpcube.linalg.boxes import MAX_DENSE_BOX_GRAM, BoxGram
from dpcube.linalg.marginal import MarginalSpectrum
from dpcube.linalg.operators import Kronecker, LinearOperator, Sum
from dpcube.linalg.solve import GramSolver

#: Eigenvalues of WᵀW below this fraction of the largest are rounding noise of a zero (rank < n).
ZERO = 1e-12


def P(epsilon: float, delta: float, constant: float = 2.0) -> float:
    """``P(ε,δ) = 2 ln(constant/δ)/ε²``: the Gaussian matrix mechanism's noise variance per unit of
    squared L2 sensitivity, with the paper's classic constant 2 (Li & Miklau, Props. 2.2 and
    2.4)."""
    return 2.0 * math.log(constant / delta) / epsilon**2


def svdb(gram: LinearOperator, factor: float = 1.0) -> float:
    """``svdb(W) = factor · (1/n) · (Σᵢ sqrt(μᵢ))²`` with μ the eigenvalues of ``G = WᵀW``
    (Thm 3.3: equal to ``(1/n)(Σ σᵢ(W))²``). Kronecker Grams factorise (Sec. 3.3).

    NaN (not computed) for a box workload's Gram over more than
    :data:`~dpcube.linalg.boxes.MAX_DENSE_BOX_GRAM` cells: its eigenvalues would need the dense
    n x n matrix, and a sum of boxes has no per-axis spectrum.
    """
    if isinstance(gram, BoxGram) and gram.cols > MAX_DENSE_BOX_GRAM:
        return math.nan
    if isinstance(gram, Kronecker):
        return factor * math.prod(svdb(f) for f in gram.factors)
    spectrum = MarginalSpectrum.from_gram(gram) if isinstance(gram, Sum) else None
    if spectrum is not None:  # marginal algebra: eigenvalue g(R) with multiplicity rank(R)
        root = np.sqrt(np.maximum(spectrum.eigenvalues, 0.0))
        return factor * float(np.dot(spectrum.rank, root)) ** 2 / gram.cols
    mu = np.linalg.eigvalsh(gram.dense())
    mu[mu < ZERO * max(float(mu.max()), 0.0)] = 0.0
    return factor * float(np.sqrt(mu).sum()) ** 2 / gram.cols


def svdb_from_matrix(w: ArrayLike, factor: float = 1.0) -> float:
    """The same bound from the workload's rows by SVD (Cor. 3.1)."""
    m = np.asarray(w, dtype=np.float64)
    return factor * float(np.linalg.svd(m, compute_uv=False).sum()) ** 2 / m.shape[1]


def trace_term(
    gram: LinearOperator, strategy: LinearOperator, solver: GramSolver | None = None
) -> float:
    """``tr(G (AᵀA)⁻¹)`` (``(AᵀA)⁺`` for a rank-deficient A that spans W, Prop. 2.3)."""
    s = solver or GramSolver.for_strategy(strategy)
    return s.trace_with(gram)


def gaussian_error(gram: LinearOperator, strategy: LinearOperator, factor: float = 1.0) -> float:
    """Total squared error of the (ε,δ) matrix mechanism, Eq. 1: ``P·‖A‖₂²·tr(G(AᵀA)⁻¹)``."""
    return factor * strategy.l2_sensitivity() ** 2 * trace_term(gram, strategy)


def laplace_error(
    gram: LinearOperator, strategy: LinearOperator, epsilon: float | None = None
) -> float:
    """Total squared error of the ε matrix mechanism, Eq. 4: ``(2/ε²)·‖A‖₁²·tr(G(AᵀA)⁻¹)``
    (without the ``2/ε²`` factor when ``epsilon`` is None, the paper's P(ε,δ) = 1)."""
    factor = 1.0 if epsilon is None else 2.0 / epsilon**2
    return factor * strategy.l1_sensitivity() ** 2 * trace_term(gram, strategy)


def eigen_error_ratio(gram: LinearOperator) -> float:
    """Error/svdb of any A with ``AᵀA = G^{1/2}``: ``n·max diag(G^{1/2}) / tr(G^{1/2})`` (App.
    C)."""
    mu, v = np.linalg.eigh(gram.dense())
    root = (v * np.sqrt(np.clip(mu, 0.0, None))) @ v.T
    return gram.cols * float(np.diag(root).max()) / float(np.trace(root))


__all__ = [
    "P",
    "eigen_error_ratio",
    "gaussian_error",
    "laplace_error",
    "svdb",
    "svdb_from_matrix",
    "trace_term",
]
