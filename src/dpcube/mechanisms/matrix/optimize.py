"""Optimised strategies: HDMM's parameterised strategy search and the Gaussian optimum.

**Pure ε-DP (Laplace, L1).** Following McKenna et al., "Optimizing error of high-dimensional
statistical queries under differential privacy" (VLDB 2018, "HDMM"):

- :func:`opt_pidentity` is OPT_0 (HDMM §6.1, Definition 6): the p-Identity strategy
  ``A(Θ) = [I; Θ] D⁻¹`` with ``Θ ≥ 0`` (p x n) and ``D = diag(1 + 1ᵀΘ)``, so every column of A has
  L1 norm 1 and ``‖A‖₁ = 1``. The objective is ``‖W A⁺‖²_F = tr(D G D X⁻¹)`` with
  ``X = I + ΘᵀΘ``; ``X⁻¹ = I − Θᵀ(I_p + ΘΘᵀ)⁻¹Θ`` (Woodbury) keeps each evaluation at one
  p x n x n product, and the gradient is the closed form of HDMM §6.1 (derived in
  :func:`pidentity_objective`; ``X⁻¹`` is never formed).
  L-BFGS-B with the bound ``Θ ≥ 0`` over several restarts (seeded) and p values.
- :func:`opt_marginals` is OPT_M (HDMM §6.3) for workloads in the marginal algebra
  (``G = Σ_T w_T ⊗ᵢ (I if i ∈ T else J)``): one weight per marginal, ``‖A‖₁ = Σθ``, the error in
  closed form on the common eigenspaces (:mod:`dpcube.linalg.marginal`), 2^d variables.
- :func:`opt_kron` is OPT_⊗ (HDMM §6.2, Theorem 6 / Eq. 8): for a workload whose Gram is a sum
  of Kronecker products ``G = Σ_j ⊗ᵢ G_ij`` (one term for a product workload: AllRange(d₁,…),
  Prefix; several for marginals and unions of products) the strategy ``⊗ᵢ Aᵢ`` has
  ``‖A‖₁ = Πᵢ‖Aᵢ‖₁`` and ``tr(G (AᵀA)⁻¹) = Σ_j Πᵢ tr(G_ij Xᵢ⁻¹)``. With one term the factors are
  independent; with several, block coordinate descent: fixing every factor but i leaves the
  p-Identity problem on ``Σ_j c_j G_ij`` with ``c_j = Π_{k≠i} tr(G_kj X_k⁻¹)``.
- :func:`opt_kron_boxes` is OPT_⊗ for a workload of boxes (random ranges, query files):
  ``G = Σ_q ⊗ᵢ r_qi r_qiᵀ`` is a sum of one Kronecker product per box, kept as the boxes
  (:class:`~dpcube.linalg.boxes.BoxGram`), so a 256 x 256 grid is optimised per axis.
- :func:`opt_union` is OPT_+ (HDMM §6) for unions of products that are not marginal workloads:
  one Kronecker product per term, stacked with the weights that minimise the union bound
  (:func:`union_weights`).

The least-squares reconstruction and the error evaluation stay those of :mod:`dpcube.linalg`
(Kronecker strategies are factored per axis).

**(ε, δ) (Gaussian, L2).** :func:`gaussian_optimum` solves Yuan et al. (2016)'s convex program
``min tr(G X⁻¹) s.t. diag(X) ≤ 1, X ≻ 0`` through its dual: for any ``d > 0``,
``tr(G X⁻¹)·Σd ≥ tr(G X⁻¹)·tr(diag(d) X) ≥ (tr (D^{½} G D^{½})^{½})²`` (Cauchy–Schwarz on
``⟨X^{-½}G^{½}, X^{½}⟩`` weighted by D), so ``L(d) = (tr M(d)^{½})² / Σd`` with
``M(d) = D^{½} G D^{½}`` is a lower bound, and ``X(d) = D^{-½} M(d)^{½} D^{-½}`` scaled to
``max diag = 1`` is feasible. Maximising ``log L`` over ``log d`` (L-BFGS-B) closes the gap; the
returned ``gap = (primal − dual)/dual`` certifies the optimum. For a Kronecker Gram both the
primal (``⊗ Xᵢ``) and the dual (``⊗ dᵢ``) factor, so the per-axis optima certify the product.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse
from numpy.typing import NDArray

from dpcube.linalg.boxes import BoxGram, IntervalGram, interval_quadratic
from dpcube.linalg.marginal import classify_factor, marginal_tables
from dpcube.linalg.operators import Explicit, Kronecker, LinearOperator, Sum, kron_matvec
from dpcube.linalg.solve import GramSolver
from dpcube.linalg.threads import single_blas_thread

FloatArray = NDArray[np.float64]


def pidentity_matrix(theta: FloatArray) -> FloatArray:
    """``A(Θ) = [I; Θ] D⁻¹`` with columns of L1 norm 1 (HDMM Definition 6)."""
    n = theta.shape[1]
    a = np.vstack([np.eye(n), theta])
    return a / (1.0 + theta.sum(axis=0))[None, :]


def pidentity_objective(
    theta_flat: FloatArray, gram: FloatArray | IntervalGram, p: int
) -> tuple[float, FloatArray]:
    """``f(Θ) = tr(D G D X⁻¹)`` and its gradient (HDMM §6.1), with one p x n x n product.

    With ``c = 1 + 1ᵀΘ``, ``D = diag(c)``, ``C = D G D``, ``R = I_p + ΘΘᵀ`` and ``M = R⁻¹Θ``,
    Woodbury gives ``Y = X⁻¹ = I − ΘᵀM``. Everything follows from ``T = (M D) G`` (p x n, the only
    O(p n²) step; ``M C = T D``):

    - ``f = tr(C) − tr(C ΘᵀM) = Σ_k G_kk c_k² − Σ (T D) ∘ Θ``;
    - ``dY = −Y (dΘᵀΘ + ΘᵀdΘ) Y`` gives ``∂f/∂Θ|_c = −2 Θ Y C Y = −2 M C Y`` (as ``ΘY = M``), and
      ``M C Y = T D − ((T D) Θᵀ) M`` is O(p² n);
    - through c: ``∂f/∂c_k = 2 Σ_j G_kj c_j Y_kj = 2 (G_kk c_k − Σ_l Θ_lk T_lk)`` and
      ``∂c_k/∂Θ_lk = 1``.

    G is a dense array, or an :class:`~dpcube.linalg.boxes.IntervalGram` (a 1-D range workload):
    then ``T`` costs O(p (n + q)) and an evaluation O(p² n), without any n x n matrix.

    >>> import numpy as np
    >>> g = np.eye(3)
    >>> f, grad = pidentity_objective(np.zeros(3), g, 1)  # Θ = 0: the identity, tr(G)
    >>> float(f), grad.round(6).tolist()
    (3.0, [2.0, 2.0, 2.0])
    """
    if isinstance(gram, IntervalGram):
        return _pidentity_value_grad(theta_flat, p, gram.left_multiply, gram.diagonal())
    return _pidentity_value_grad(theta_flat, p, lambda x: x @ gram, np.diag(gram))


def kron_pidentity_objective(
    theta_flat: FloatArray, factors: Sequence[FloatArray], p: int
) -> tuple[float, FloatArray]:
    """:func:`pidentity_objective` for a Kronecker Gram ``G = ⊗ᵢ Gᵢ`` (never formed): ``T = (M D) G
    = (G (M D)ᵀ)ᵀ`` (G symmetric) by :func:`~dpcube.linalg.operators.kron_matvec`, so an
    evaluation on 64 x 64 cells costs the O(p² n) steps only."""
    diag = _kron_all([np.diag(f) for f in factors])
    return _pidentity_value_grad(theta_flat, p, lambda x: kron_matvec(factors, x.T).T, diag)


def _kron_all(mats: Sequence[FloatArray]) -> FloatArray:
    """``M₁ ⊗ M₂ ⊗ …`` (vectors or matrices)."""
    out = np.asarray(mats[0], dtype=np.float64)
    for m in mats[1:]:
        out = np.asarray(np.kron(out, m), dtype=np.float64)
    return out


def _pidentity_value_grad(
    theta_flat: FloatArray, p: int, times_gram: Any, diag: FloatArray
) -> tuple[float, FloatArray]:
    """The computation of :func:`pidentity_objective`, with ``x ↦ x G`` given as a function."""
    n = diag.shape[0]
    theta = theta_flat.reshape(p, n)
    c = 1.0 + theta.sum(axis=0)
    r = np.eye(p) + theta @ theta.T
    m = np.linalg.inv(r) @ theta  # R ⪰ I is well conditioned; inv + GEMM beats a p x n solve
    t = times_gram(m * c)
    tc = t * c
    f = float(np.dot(diag, c * c) - np.sum(tc * theta))
    mcy = tc - (tc @ theta.T) @ m
    grad = -2.0 * mcy + (2.0 * (diag * c - np.sum(theta * t, axis=0)))[None, :]
    return f, grad.ravel()


def kron_pidentity_theta(thetas: Sequence[FloatArray]) -> FloatArray:
    """Θ of the p-Identity strategy equal to ``⊗ᵢ [I; Θᵢ] Dᵢ⁻¹`` (rows in another order).

    Expanding ``⊗ᵢ [I; Θᵢ]`` gives one block ``⊗ᵢ (Θᵢ if i ∈ S else I)`` per subset S of the axes;
    S = ∅ is the identity, the others are Θ, and ``⊗ᵢ Dᵢ = diag(1 + 1ᵀΘ)``. So a Kronecker
    product of p-Identities is a point of the p-Identity template on the whole grid, where OPT_0
    can go on from it (:func:`refine_kron_pidentity`).

    >>> import numpy as np
    >>> t = np.array([[1.0, 2.0]])
    >>> a = np.kron(pidentity_matrix(t), pidentity_matrix(t))
    >>> b = pidentity_matrix(kron_pidentity_theta([t, t]))
    >>> bool(np.allclose(a.T @ a, b.T @ b))
    True
    """
    k = len(thetas)
    blocks = []
    for size in range(1, k + 1):
        for subset in itertools.combinations(range(k), size):
            parts = [thetas[i] if i in subset else np.eye(thetas[i].shape[1]) for i in range(k)]
            blocks.append(_kron_all(parts))
    return np.vstack(blocks)


@dataclass
class PIdentityResult:
    """Best p-Identity found: ``Θ``, the objective ``tr(G (AᵀA)⁻¹)`` (``‖A‖₁ = 1``), time."""

    theta: FloatArray
    objective: float
    seconds: float

    @property
    def matrix(self) -> FloatArray:
        return pidentity_matrix(self.theta)


#: Above this axis size OPT_0 runs one restart at p = n/16 (HDMM's default p; each evaluation is
#: one p x n x n product, :func:`pidentity_objective`) for at most 1,000 iterations: 12 CPU seconds
#: on AllRange(1024) with one BLAS thread, under HDMM's 16 s.
LARGE_AXIS = 256


def _schedule(n: int) -> tuple[list[int], int, int]:
    """(p values, restarts, max iterations) of OPT_0 on an axis of n cells.

    Restarts matter more than iterations at moderate n: on Prefix(256) four seeded restarts at
    p = 16 end between 13,769 and 14,114 (ε = 1), while 1,500 iterations from one start reach
    13,961. On 1,024 cells iterations still pay (AllRange(1024): 300 → 64.42e6, 1,000 → 64.11e6).
    """
    if n > LARGE_AXIS:
        return [n // 16], 1, 1000
    if n > 16:
        return [n // 16], 4, 500
    return sorted({max(1, n // 4), max(1, n // 2), n}), 2, 500


def opt_pidentity(
    gram: FloatArray | IntervalGram,
    *,
    p_values: Sequence[int] | None = None,
    restarts: int | None = None,
    seed: int = 0,
    maxiter: int | None = None,
) -> PIdentityResult:
    """OPT_0: minimise ``tr(G (A(Θ)ᵀA(Θ))⁻¹)`` over ``Θ ≥ 0`` (L-BFGS-B, seeded restarts).

    ``Θ = 0`` (the identity strategy) is always a candidate, so the result never loses to identity.
    The objective is run on ``G / tr(G)`` (value 1 at the identity): unscaled, the first L-BFGS-B
    step of a small-p run could overshoot onto ``Θ = 0``, a KKT point, and stop there (AllRange(256),
    p = 4 and 8: one seed in three ended at the identity's 5,658,112; scaled, none did).
    """
    start = time.perf_counter()
    g: FloatArray | IntervalGram
    if isinstance(gram, IntervalGram):
        scale = gram.trace()
        scale = scale if scale > 0 else 1.0
        g = IntervalGram(gram.intervals, gram.n, gram.weights / scale)
        best = g.trace()
    else:
        raw = np.asarray(gram, dtype=np.float64)
        scale = float(np.trace(raw))
        scale = scale if scale > 0 else 1.0
        g = raw / scale
        best = float(np.trace(g))
    n = g.shape[0]
    p_default, r_default, it_default = _schedule(n)
    restarts = r_default if restarts is None else restarts
    maxiter = it_default if maxiter is None else maxiter
    rng = np.random.default_rng(seed)
    best_theta = np.zeros((1, n))
    for p in p_values or p_default:
        for _ in range(restarts):
            x0 = rng.uniform(0.0, 1.0, size=p * n)
            res = scipy.optimize.minimize(
                pidentity_objective,
                x0,
                args=(g, p),
                jac=True,
                method="L-BFGS-B",
                bounds=[(0.0, None)] * (p * n),
                options={"maxiter": maxiter, "gtol": 1e-10},
            )
            if float(res.fun) < best:
                best, best_theta = float(res.fun), np.asarray(res.x).reshape(p, n)
    return PIdentityResult(best_theta, best * scale, time.perf_counter() - start)


def kron_terms(gram: LinearOperator) -> list[list[FloatArray]] | None:
    """``G = Σ_j ⊗ᵢ G_ij`` as dense per-axis factors, or None if G is not such a sum."""
    parts = gram.parts if isinstance(gram, Sum) else [gram]
    terms: list[list[FloatArray]] = []
    for part in parts:
        if isinstance(part, Kronecker):
            terms.append([f.dense() for f in part.factors])
        else:
            return None
    if len({tuple(t.shape[0] for t in term) for term in terms}) != 1:
        return None
    return terms


@dataclass
class KronResult:
    """OPT_⊗: per-axis p-Identity factors and ``tr(G (AᵀA)⁻¹)`` of their product (``‖A‖₁ = 1``).

    ``thetas`` are the factors' Θ (``factors[i] = pidentity_matrix(thetas[i])``) where known."""

    factors: list[FloatArray]
    objective: float
    seconds: float
    thetas: list[FloatArray] | None = None


def _trace_inv(g: FloatArray, a: FloatArray) -> float:
    """``tr(G (AᵀA)⁺)`` (Cholesky, or the pseudo-inverse when AᵀA is singular)."""
    return GramSolver(Explicit(a.T @ a)).trace_with(Explicit(g))


def opt_kron(
    terms: list[list[FloatArray]], *, restarts: int | None = None, seed: int = 0, sweeps: int = 3
) -> KronResult:
    """OPT_⊗ (HDMM §6.2): p-Identity on every axis; block coordinate descent for a sum of terms."""
    start = time.perf_counter()
    k = len(terms[0])
    dims = [t.shape[0] for t in terms[0]]
    factors = [np.eye(d) for d in dims]
    thetas = [np.zeros((1, d)) for d in dims]
    single = len(terms) == 1
    prev = math.inf
    for _ in range(1 if single else sweeps):
        for i in range(k):
            coef = [
                math.prod(_trace_inv(term[m], factors[m]) for m in range(k) if m != i)
                for term in terms
            ]
            g = sum(c * term[i] for c, term in zip(coef, terms, strict=True))
            res = opt_pidentity(np.asarray(g), restarts=restarts, seed=seed + i)
            factors[i], thetas[i] = res.matrix, res.theta
        obj = sum(math.prod(_trace_inv(term[m], factors[m]) for m in range(k)) for term in terms)
        if obj > prev * (1 - 1e-4):
            break
        prev = obj
    objective = sum(math.prod(_trace_inv(term[m], factors[m]) for m in range(k)) for term in terms)
    return KronResult(factors, objective, time.perf_counter() - start, thetas)


@dataclass(frozen=True)
class SparseSupport:
    """The entries of a p x n Θ that may be non-zero: row-major ``rows``, ``cols``."""

    p: int
    n: int
    rows: NDArray[np.int64]
    cols: NDArray[np.int64]

    @classmethod
    def of(cls, theta: FloatArray) -> SparseSupport:
        rows, cols = np.nonzero(theta)
        return cls(theta.shape[0], theta.shape[1], rows.astype(np.int64), cols.astype(np.int64))

    def matrix(self, values: FloatArray) -> Any:
        """Θ as a CSR matrix (``scipy.sparse``) with ``values`` on the support."""
        return scipy.sparse.csr_matrix((values, (self.rows, self.cols)), shape=(self.p, self.n))

    def extended(self, rows: NDArray[np.int64], cols: NDArray[np.int64]) -> SparseSupport:
        return SparseSupport(
            self.p, self.n, np.concatenate([self.rows, rows]), np.concatenate([self.cols, cols])
        )


def _sym_inverse(r: FloatArray) -> FloatArray:
    """``R⁻¹`` of a symmetric positive definite R (Cholesky, LAPACK potrf + potri)."""
    lower, info = scipy.linalg.lapack.dpotrf(r, lower=1, clean=1)
    if info != 0:
        raise np.linalg.LinAlgError("R = I + ΘΘᵀ is not positive definite")
    inv, info = scipy.linalg.lapack.dpotri(lower, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError("R = I + ΘΘᵀ is not positive definite")
    return np.asarray(np.tril(inv) + np.tril(inv, -1).T, dtype=np.float64)


def sparse_pidentity_objective(
    values: FloatArray,
    support: SparseSupport,
    factors: Sequence[FloatArray],
    diag: FloatArray,
    full: bool = False,
) -> tuple[float, FloatArray]:
    """:func:`pidentity_objective` for a Θ that is non-zero only on ``support`` and a Kronecker
    Gram ``G = ⊗ᵢ Gᵢ`` (diagonal ``diag``): the value and the gradient on the support (or, with
    ``full``, the whole p x n gradient, for :func:`refine_kron_pidentity`'s working set).

    Same formulas (HDMM §6.1), in an order that keeps every step O(nnz · p + p³ + p n Σnᵢ)
    instead of four dense p x n x p products: with ``P = R⁻¹`` (Cholesky), ``Mᵀ = Θᵀ P`` (sparse
    times dense), ``Tᵀ = G (c ∘ Mᵀ)`` (:func:`~dpcube.linalg.operators.kron_matvec`), ``Sᵀ = Θ (Tᵀ ∘ c)`` (p x p),
    ``M C Y = T D − S P Θ`` and ``(S P Θ)ᵀ = Θᵀ (P Sᵀ)``. On AllRange(64)², p = 528, about 1 %
    of Θ non-zero: 0.07 CPU s against 0.38 s for :func:`kron_pidentity_objective` (one BLAS
    thread).

    >>> import numpy as np
    >>> g = [np.array([[2.0, 1.0], [1.0, 2.0]])] * 2
    >>> theta = np.array([[0.5, 0.0, 0.0, 1.0], [0.0, 0.3, 0.0, 0.0]])
    >>> support = SparseSupport.of(theta)
    >>> f, grad = sparse_pidentity_objective(theta[theta > 0], support, g, np.full(4, 4.0), True)
    >>> f_ref, grad_ref = kron_pidentity_objective(theta.ravel(), g, 2)
    >>> bool(np.isclose(f, f_ref)), bool(np.allclose(grad.ravel(), grad_ref))
    (True, True)
    """
    theta = support.matrix(values)
    theta_t = theta.T.tocsr()
    rows, cols, n = support.rows, support.cols, support.n
    c = 1.0 + np.bincount(cols, weights=values, minlength=n)
    r = np.asarray((theta @ theta_t).toarray(), dtype=np.float64)
    r[np.diag_indices_from(r)] += 1.0
    p_inv = _sym_inverse(r)
    m_t = np.asarray(theta_t @ p_inv, dtype=np.float64)
    t_t = kron_matvec(factors, m_t * c[:, None])
    tc_t = t_t * c[:, None]
    f = float(diag @ (c * c) - np.dot(tc_t[cols, rows], values))
    s_t = np.asarray(theta @ tc_t, dtype=np.float64)
    correction = np.asarray(theta_t @ (p_inv @ s_t), dtype=np.float64)
    grad_c = 2.0 * (diag * c - np.bincount(cols, weights=values * t_t[cols, rows], minlength=n))
    if full:
        return f, (-2.0 * (tc_t - correction) + grad_c[:, None]).T
    return f, -2.0 * (tc_t[cols, rows] - correction[cols, rows]) + grad_c[cols]


#: OPT_0 on the whole grid, started from OPT_⊗'s product (:func:`refine_kron_pidentity`), is run
#: by the default ``opt`` on product workloads of two axes up to this many cells, for
#: REFINE_PHASES L-BFGS-B runs of at most that many evaluations each; ``opt-grid`` runs
#: REFINE_PHASES_LONG.
REFINE_MAX_CELLS = 4096
REFINE_PHASES = (25, 25, 25, 25)
REFINE_PHASES_LONG = (25, 25, 50, 50, 50, 50, 50)


#: The refinement trusts an evaluation only where ``tr(C) / f`` (``C = D G D``; the Woodbury form
#: subtracts two numbers of about ``tr(C)`` to get f) is at most this: the rounding error of f
#: relative to f is that factor times the products' own (about 1e-16 each), far below the
#: differences L-BFGS-B acts on. AllRange(64)²: 17-25 along the run. Prefix(16)²: OPT_⊗'s
#: product has Θ entries up to 7e6 (the 1-D optimum gives the identity block almost no weight)
#: and f comes out negative: the refinement does not run there.
REFINE_MAX_CANCELLATION = 1e4


#: The refinement runs only where one evaluation of :func:`sparse_pidentity_objective` costs at
#: most this many multiply-adds (:func:`refine_work`). AllRange(64)²: 4.6e8 (about 0.1 CPU s per
#: evaluation with L-BFGS-B's share), AllRange(16 x 256): 7.5e8 (11 CPU s in all, no gain there);
#: AllRange(4 x 1,024) (p = 1,344): 8.2e9, 93 CPU s for a gain of 0.02 %, so it is left out.
REFINE_MAX_WORK = 1e9


def refine_work(p: int, dims: Sequence[int], nonzeros: int) -> int:
    """Multiply-adds of one :func:`sparse_pidentity_objective` evaluation, roughly: G per axis
    (``p n Σnᵢ``), three sparse-times-dense products (``3 nnz p``) and the p x p Cholesky and
    inverse (``p³``).

    >>> refine_work(528, (64, 64), 21504)  # AllRange(64)²: OPT_⊗'s product, p = 4 per axis
    458084352
    """
    n = math.prod(dims)
    return p * n * sum(dims) + 3 * nonzeros * p + p**3


def _trusted(f: float, diag: FloatArray, values: FloatArray, support: SparseSupport) -> bool:
    c = 1.0 + np.bincount(support.cols, weights=values, minlength=support.n)
    return f > 0 and float(diag @ (c * c)) <= REFINE_MAX_CANCELLATION * f


def refine_kron_pidentity(
    factor_grams: Sequence[FloatArray],
    thetas: Sequence[FloatArray],
    *,
    phases: Sequence[int] | None = None,
) -> PIdentityResult | None:
    """OPT_0 (HDMM §6.1) on the whole grid of a product workload ``G = ⊗ᵢ Gᵢ``, started from the
    Kronecker product of the per-axis p-Identities (OPT_⊗'s optimum, :func:`kron_pidentity_theta`),
    on a working set of Θ's entries.

    The product is a KKT point of the whole grid's template (projected gradient 5e-7 against
    0.27 for the whole gradient on AllRange(32)²) but not a minimum: L-BFGS-B drifts off it and
    then goes downhill to strategies that are no Kronecker product. The working set starts as
    the product's support (about 1 % of Θ on AllRange(64)², p = 528; Θ's other entries are
    held at 0, where their gradient is positive). Each phase is one L-BFGS-B run (``Θ ≥ 0``) of
    at most ``phases[k]`` evaluations of :func:`sparse_pidentity_objective`; between phases,
    every entry outside the working set whose gradient is negative (a violated KKT condition)
    joins it at 0, and L-BFGS-B restarts. On AllRange(64)² (per unit, relative to the
    product): 25 evaluations drift without visible gain, the second phase leaves the saddle
    (0.950) and four phases of 25 reach 0.915, where 200 evaluations on the whole dense template
    reached 0.921. Θ stays sparse (about 1.3 % non-zero), so an evaluation costs 0.07 CPU s
    instead of 0.38 s for the dense Θ, and L-BFGS-B works on about 28,000 variables instead of
    2.2 million. The evaluation count is fixed (no time budget), so the result is deterministic
    for a given BLAS.

    Returns the best Θ seen and its objective (the product's if the run does not improve on
    it), or None where the product is the identity, an evaluation would cost more than
    :data:`REFINE_MAX_WORK`, or the product's objective cannot be evaluated accurately
    (:data:`REFINE_MAX_CANCELLATION`); points beyond that bound
    are refused during the run (an infinite value, so the line search steps back).
    """
    start = time.perf_counter()
    phases = REFINE_PHASES if phases is None else phases
    scales = [float(np.trace(g)) or 1.0 for g in factor_grams]
    grams = [np.asarray(g, dtype=np.float64) / s for g, s in zip(factor_grams, scales, strict=True)]
    diag = _kron_all([np.diag(g) for g in grams])
    theta0 = kron_pidentity_theta(list(thetas))
    support = SparseSupport.of(theta0)
    values = theta0[support.rows, support.cols]
    dims = [g.shape[0] for g in grams]
    if not values.size or refine_work(support.p, dims, values.size) > REFINE_MAX_WORK:
        return None
    best, _ = sparse_pidentity_objective(values, support, grams, diag)
    if not _trusted(best, diag, values, support):
        return None
    best_theta = theta0

    def objective(x: FloatArray, support: SparseSupport) -> tuple[float, FloatArray]:
        f, grad = sparse_pidentity_objective(x, support, grams, diag)
        return (f, grad) if _trusted(f, diag, x, support) else (math.inf, grad)

    for k, budget in enumerate(phases):
        if k > 0:
            _, grad = sparse_pidentity_objective(values, support, grams, diag, full=True)
            grad[support.rows, support.cols] = 0.0
            add_rows, add_cols = np.nonzero(grad < 0)
            support = support.extended(add_rows, add_cols)
            values = np.concatenate([values, np.zeros(add_rows.size)])
        res = scipy.optimize.minimize(
            objective,
            values,
            args=(support,),
            jac=True,
            method="L-BFGS-B",
            bounds=scipy.optimize.Bounds(0.0, np.inf),
            options={"maxiter": budget, "maxfun": budget, "gtol": 1e-12, "ftol": 1e-15},
        )
        values = np.asarray(res.x, dtype=np.float64)
        if float(res.fun) < best:
            best = float(res.fun)
            best_theta = support.matrix(values).toarray()
    return PIdentityResult(best_theta, best * math.prod(scales), time.perf_counter() - start)


def _gram_inverse(a: FloatArray) -> FloatArray:
    """``(AᵀA)⁻¹`` (``(AᵀA)⁺`` when singular) of one axis's strategy."""
    n = a.shape[1]
    return GramSolver(Explicit(a.T @ a)).solve(np.eye(n))


def opt_kron_boxes(
    gram: BoxGram, *, restarts: int | None = None, seed: int = 0, sweeps: int = 3
) -> KronResult:
    """OPT_⊗ (HDMM §6.2) for a workload of q boxes, ``G = Σ_q ⊗ᵢ r_qi r_qiᵀ`` (one Kronecker term
    per box, never summed into an n x n matrix: :class:`~dpcube.linalg.boxes.BoxGram`).

    For ``A = ⊗ᵢ Aᵢ``, ``tr(G (AᵀA)⁻¹) = Σ_q Πᵢ r_qiᵀ Xᵢ⁻¹ r_qi`` (``Xᵢ = AᵢᵀAᵢ``, HDMM Theorem 6
    with one term per box). Fixing every axis but i leaves OPT_0 on the per-axis Gram
    ``Σ_q c_q r_qi r_qiᵀ`` with ``c_q = Π_{m≠i} r_qmᵀ X_m⁻¹ r_qm`` (block coordinate descent, as
    :func:`opt_kron` does for a sum of Kronecker terms); each weighted Gram is O(dᵢ² + q)
    (:func:`~dpcube.linalg.boxes.interval_gram`) and each box's factor one interval sum.
    The first sweep starts from the identity on every axis. ``objective`` is the trace (every
    factor has ``‖Aᵢ‖₁ = 1``).
    """
    start = time.perf_counter()
    k = len(gram.dims)
    factors = [np.eye(d) for d in gram.dims]
    quads = gram.axis_quadratics([None] * k)  # (q, k): r_qiᵀ Xᵢ⁻¹ r_qi, identity to start
    prev = math.inf
    objective = float(np.dot(gram.weights, np.prod(quads, axis=1)))
    for _ in range(sweeps):
        for i in range(k):
            others = np.prod(np.delete(quads, i, axis=1), axis=1)
            res = opt_pidentity(gram.axis_gram(i, others), restarts=restarts, seed=seed + i)
            factors[i] = res.matrix
            quads[:, i] = interval_quadratic(_gram_inverse(res.matrix), gram.boxes[:, i, :])
        objective = float(np.dot(gram.weights, np.prod(quads, axis=1)))
        if k == 1 or objective > prev * (1 - 1e-4):
            break
        prev = objective
    return KronResult(factors, objective, time.perf_counter() - start)


# -- unions of Kronecker products (HDMM §6, OPT_+) ------------------------------------------------


@dataclass
class UnionResult:
    """OPT_+: one Kronecker strategy per workload term, stacked with weights ``w`` (``Σw = 1``).

    ``parts[j]`` are term j's per-axis factors (every column of L1 norm 1), so the stack
    ``[w₁ A₁; …; w_k A_k]`` has ``‖A‖₁ = Σw = 1``; ``bound = (Σ_j e_j^{1/3})³`` is an upper bound
    on its ``tr(G (AᵀA)⁺)`` (``e_j = tr(G_j (A_jᵀA_j)⁻¹)``, see :func:`opt_union`).
    """

    parts: list[list[FloatArray]]
    weights: FloatArray
    bound: float
    seconds: float


def union_weights(errors: Sequence[float]) -> tuple[FloatArray, float]:
    """Weights minimising ``(Σ w_j)² Σ_j e_j / w_j²``: ``w_j ∝ e_j^{1/3}``, value ``(Σ e_j^{1/3})³``.

    (Stationarity: ``2 S Σ e/w² = 2 S² e_j / w_j³`` for every j, with ``S = Σw``.)

    >>> w, value = union_weights([1.0, 8.0])
    >>> w.round(6).tolist(), round(value, 6)
    ([0.333333, 0.666667], 27.0)
    """
    e = np.asarray(errors, dtype=np.float64)
    r = np.cbrt(e)
    return r / r.sum(), float(r.sum() ** 3)


def opt_union(
    terms: list[list[FloatArray]], *, restarts: int | None = None, seed: int = 0
) -> UnionResult:
    """OPT_+ (HDMM §6) for ``G = Σ_j ⊗ᵢ G_ij``: a union of Kronecker products.

    Term j gets its own product ``A_j = ⊗ᵢ A_ij``: the total query ``1ᵀ`` on axes where
    ``G_ij`` is a multiple of J (its optimum), OPT_0's p-Identity elsewhere. Stacked with weights
    ``w_j``, ``AᵀA = Σ_j w_j² A_jᵀA_j ⪰ w_j² A_jᵀA_j``, so ``tr(G_j (AᵀA)⁺) ≤ e_j / w_j²`` and the
    error is at most ``(Σw)² Σ_j e_j / w_j²``, minimised by :func:`union_weights`. The exact error
    of the stack (never above the bound) is computed by the caller. Simplified against HDMM: one
    group per term, each term's product optimised for that term alone (no joint refinement).
    """
    start = time.perf_counter()
    parts: list[list[FloatArray]] = []
    errors: list[float] = []
    for j, term in enumerate(terms):
        factors: list[FloatArray] = []
        for i, g in enumerate(term):
            kind = classify_factor(g)
            if kind is not None and kind[0] == "J":
                factors.append(np.ones((1, g.shape[0])))
            else:
                res = opt_pidentity(g, restarts=restarts, seed=seed + 31 * j + i)
                factors.append(res.matrix)
        parts.append(factors)
        errors.append(math.prod(_trace_inv(g, a) for g, a in zip(term, factors, strict=True)))
    weights, bound = union_weights(errors)
    return UnionResult(parts, weights, bound, time.perf_counter() - start)


# -- marginals (HDMM §6.3) ------------------------------------------------------------------------


def marginal_weights(terms: list[list[FloatArray]]) -> dict[frozenset[int], float] | None:
    """``G = Σ_T w_T C_T`` with ``C_T = ⊗ᵢ (I if i ∈ T else J)`` (HDMM §6.3), or None.

    Every factor of every Kronecker term must be a multiple of I or of J (the all-ones matrix).
    """
    out: dict[frozenset[int], float] = {}
    for term in terms:
        coef, axes = 1.0, set()
        for i, f in enumerate(term):
            kind = classify_factor(f)
            if kind is None:
                return None
            if kind[0] == "I":
                axes.add(i)
            coef *= kind[1]
        key = frozenset(axes)
        out[key] = out.get(key, 0.0) + coef
    return out


def marginals_objective(
    theta: FloatArray, rank: FloatArray, g: FloatArray, contain: FloatArray, c: FloatArray
) -> tuple[float, FloatArray]:
    """``(Σθ)² Σ_R rank(R) g(R) / x(R)`` with ``x(R) = Σ_{S ⊇ R} θ_S² c_S`` and its gradient.

    ``A = [θ_S M_S]_S`` (M_S the marginal on S) has ``‖A‖₁ = Σθ`` and ``AᵀA = Σ θ_S² C_S``, so this
    is ``‖A‖₁² tr(G (AᵀA)⁻¹)`` (HDMM §6.3); E_R with ``g(R) = 0`` are skipped (pseudo-inverse).
    """
    live = g > 0
    x = contain[live] @ (theta**2 * c)
    if np.any(x <= 0):
        return math.inf, np.zeros_like(theta)
    terms = rank[live] * g[live] / x
    total = float(terms.sum())
    s1 = float(theta.sum())
    grad = 2.0 * s1 * total - s1**2 * (contain[live].T @ (terms / x)) * 2.0 * theta * c
    return s1**2 * total, grad


def _marginal_start(rng: np.random.Generator, size: int, restart: int) -> FloatArray:
    """Restart ``restart``'s starting θ: dense uniform on even restarts, sparse on odd ones (about
    40 % of the marginals, so that asymmetric optima such as a 3-way marginal plus the pairs it
    misses are reached: 2-way marginals of 8^4, 11,346 against 11,628 for the six pairs)."""
    if restart % 2 == 0:
        return rng.uniform(0.1, 1.0, size=size)
    return rng.uniform(0.0, 1.0, size=size) * (rng.uniform(size=size) < 0.4) + 1e-3


def opt_marginals(
    weights: dict[frozenset[int], float], dims: Sequence[int], *, restarts: int = 64, seed: int = 0
) -> tuple[list[frozenset[int]], FloatArray, float]:
    """OPT_M: the weights θ_S of the marginals strategy (L-BFGS-B, seeded restarts).

    The objective is not convex in θ and has symmetric and asymmetric local optima; 64 restarts
    (half of them sparse, :func:`_marginal_start`) cost 0.3 CPU s on 8^4 (16 weights)."""
    subs, rank, g, contain, c = marginal_tables(weights, dims)
    rng = np.random.default_rng(seed)
    best_theta, best = np.zeros(len(subs)), math.inf
    for restart in range(restarts):
        res = scipy.optimize.minimize(
            marginals_objective,
            _marginal_start(rng, len(subs), restart),
            args=(rank, g, contain, c),
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, None)] * len(subs),
        )
        if float(res.fun) < best:
            best, best_theta = float(res.fun), np.asarray(res.x)
    return subs, best_theta / best_theta.sum(), best


# -- Gaussian optimum ------------------------------------------------------------------------------


@dataclass
class GaussianOptimum:
    """``min tr(G X⁻¹) s.t. diag(X) ≤ 1``: feasible X (per axis for Kronecker), bounds, gap."""

    primal: float
    dual: float
    factors: list[FloatArray]
    seconds: float

    @property
    def gap(self) -> float:
        """Relative duality gap ``(primal − dual) / dual`` (certifies ``primal ≤ (1+gap)·opt``)."""
        return (self.primal - self.dual) / self.dual

    def to_dict(self) -> dict[str, Any]:
        return {"primal": self.primal, "dual": self.dual, "gap": self.gap, "seconds": self.seconds}


def _dual_parts(g: FloatArray, logd: FloatArray) -> tuple[float, FloatArray, FloatArray]:
    """``log L(d)``, its gradient in ``log d``, and the feasible primal ``X(d)`` (unscaled)."""
    d = np.exp(logd - logd.max())
    s = np.sqrt(d)
    m = s[:, None] * g * s[None, :]
    mu, v = np.linalg.eigh(m)
    mu = np.maximum(mu, 0.0)
    root = (v * np.sqrt(mu)) @ v.T  # M^{1/2}
    t = float(np.sum(np.sqrt(mu)))
    value = 2.0 * math.log(t) - math.log(float(d.sum()))
    # d tr(M^{1/2}) / d log d_i = ½ (M^{1/2})_ii  (since M = S G S, dM/dlog s_i symmetric)
    grad = np.diag(root) / t - d / d.sum()
    x = root / s[:, None] / s[None, :]
    return value, grad, x


def gaussian_optimum_dense(gram: FloatArray, *, maxiter: int = 500) -> GaussianOptimum:
    """Solve ``min tr(G X⁻¹), diag(X) ≤ 1`` for a dense Gram (n up to a few thousand)."""
    start = time.perf_counter()
    g = np.asarray(gram, dtype=np.float64)
    n = g.shape[0]

    def neg(logd: FloatArray) -> tuple[float, FloatArray]:
        value, grad, _ = _dual_parts(g, logd)
        return -value, -grad

    res = scipy.optimize.minimize(
        neg, np.zeros(n), jac=True, method="L-BFGS-B", options={"maxiter": maxiter, "gtol": 1e-10}
    )
    value, _, x = _dual_parts(g, np.asarray(res.x))
    x = x / float(np.max(np.diag(x)))
    primal = float(np.sum(g * np.linalg.pinv(x)))
    return GaussianOptimum(primal, math.exp(value), [x], time.perf_counter() - start)


def gaussian_optimum(gram: LinearOperator) -> GaussianOptimum:
    """Per axis for a Kronecker Gram (primal and dual both factor), densely otherwise."""
    if isinstance(gram, Kronecker):
        parts = [gaussian_optimum_dense(f.dense()) for f in gram.factors]
        return GaussianOptimum(
            math.prod(p.primal for p in parts),
            math.prod(p.dual for p in parts),
            [p.factors[0] for p in parts],
            sum(p.seconds for p in parts),
        )
    return gaussian_optimum_dense(gram.dense())


def _kron_l1_error(terms: list[list[FloatArray]], factors: Sequence[FloatArray]) -> float:
    """``‖A‖₁² · tr(G (AᵀA)⁻¹)`` for ``A = ⊗ Aᵢ`` and ``G = Σ_j ⊗ᵢ G_ij`` (per axis, never n x n)."""
    l1 = math.prod(float(np.abs(a).sum(axis=0).max()) for a in factors)
    trace = sum(
        math.prod(_trace_inv(g, a) for g, a in zip(term, factors, strict=True)) for term in terms
    )
    return l1**2 * trace


def _box_l1_error(gram: BoxGram, factors: Sequence[FloatArray]) -> float:
    """``‖A‖₁² · tr(G (AᵀA)⁻¹)`` for ``A = ⊗ Aᵢ`` and a box workload's Gram (interval sums)."""
    l1 = math.prod(float(np.abs(a).sum(axis=0).max()) for a in factors)
    return l1**2 * gram.kron_trace([_gram_inverse(a) for a in factors])


#: OPT_+ is tried up to this many cells (its stacked Gram is solved densely by the mechanism), and
#: its error is computed exactly up to UNION_EXACT_CELLS (above, the upper bound of
#: :func:`opt_union` is compared, so a chosen union is never worse than reported).
UNION_MAX_CELLS = 4096
UNION_EXACT_CELLS = 1024


def interval_form(workload: Any) -> IntervalGram | None:
    """The Gram of a 1-D workload of intervals as an :class:`~dpcube.linalg.boxes.IntervalGram`
    (its boxes, or ``prefix:n``), when its product is cheaper than a dense one, else None.

    A product costs O(p (n + q)) against the dense O(p n²); it is used when ``q ≤ n² / 64`` (a
    dense GEMM runs many times faster per flop than the gathers): Prefix(4096) (q = n) and
    DPBench's 2,000 random ranges qualify, AllRange(1024) (q = n(n+1)/2) does not.

    >>> from dpcube.workloads import parse_workload
    >>> interval_form(parse_workload("prefix:4096")).queries, interval_form(parse_workload("allrange:1024"))
    (4096, None)
    """
    dims = tuple(workload.dims)
    if len(dims) != 1:
        return None
    n = dims[0]
    if workload.boxes is not None:
        intervals = np.asarray(workload.boxes, dtype=np.int64).reshape(-1, 2)
    elif workload.spec is not None and workload.spec.startswith("prefix:"):
        intervals = np.stack([np.zeros(n, dtype=np.int64), np.arange(n, dtype=np.int64)], axis=1)
    else:
        return None
    if len(intervals) > n * n // 64:
        return None
    return IntervalGram(intervals, n)


@single_blas_thread
def optimized_strategy(workload: Any, *, seed: int = 0, refine_grid: bool = False) -> Any:
    """The ``opt`` strategy: OPT_0 / OPT_⊗ under L1, or a fixed strategy when one is better.

    Candidates: the optimised p-Identity (1-D) or Kronecker product of p-Identities (a Gram that
    is a sum of Kronecker products: product workloads, marginals, unions of products; a workload
    of boxes on 2+ axes, one Kronecker term per box, :func:`opt_kron_boxes`), OPT_M
    (marginal workloads), OPT_+ (other unions of products, up to :data:`UNION_MAX_CELLS`), and the
    per-axis identity, hierarchical and (power-of-two axes) Haar wavelet; the least
    ``‖A‖₁² tr(G (AᵀA)⁻¹)`` is kept. Data-independent (no budget); seeded, so reproducible.
    ``info`` records the objective, the winner and the optimisation time.

    On product workloads of two axes up to :data:`REFINE_MAX_CELLS` cells (and
    :data:`REFINE_MAX_WORK` per evaluation) it also runs OPT_0 on
    the whole grid from OPT_⊗'s product (:func:`refine_kron_pidentity`, :data:`REFINE_PHASES`:
    AllRange(64)² 0.636x HDMM instead of 0.695x, about 10 CPU s); ``refine_grid`` (the
    ``opt-grid`` strategy) runs it longer (:data:`REFINE_PHASES_LONG`: 0.630x, about 30 CPU s).
    The refined Θ is sparse and stored as its non-zeros
    (:func:`~dpcube.mechanisms.matrix.strategies.pidentity`).
    """
    from dpcube.mechanisms.matrix.strategies import (
        dense,
        hierarchical,
        identity,
        kron,
        pidentity,
        stack,
        wavelet,
    )

    start = time.perf_counter()
    dims = tuple(workload.dims)
    box = workload.gram if isinstance(workload.gram, BoxGram) else None
    if box is None and workload.boxes is not None and len(dims) > 1:
        box = BoxGram(workload.boxes, dims)  # a small grid's dense Gram is not Kronecker
    terms = None if box is not None else kron_terms(workload.gram)
    if box is None and (terms is None or len(terms[0]) != len(dims)):
        terms = [[workload.gram.dense()]] if len(dims) == 1 else None
        if terms is None:
            raise ValueError(
                f"strategy 'opt' needs a workload whose Gram is a sum of Kronecker products "
                f"(product workloads, marginals, boxes); {workload.name!r} is not"
            )

    def kron_error(factors: Sequence[FloatArray]) -> float:
        if box is not None:
            return _box_l1_error(box, factors)
        assert terms is not None
        return _kron_l1_error(terms, factors)

    fixed: dict[str, list[Any]] = {
        "identity": [identity(d) for d in dims],
        "hierarchical": [hierarchical(d) for d in dims],
    }
    if all(d & (d - 1) == 0 for d in dims):
        fixed["wavelet"] = [wavelet(d) for d in dims]
    errors = {
        name: kron_error([p.operator.dense() for p in parts]) for name, parts in fixed.items()
    }
    intervals = interval_form(workload) if box is None else None
    if box is not None:
        res = opt_kron_boxes(box, seed=seed)
    elif intervals is not None:  # OPT_0 on the intervals, never an n x n product
        single = opt_pidentity(intervals, seed=seed)
        res = KronResult([single.matrix], single.objective, single.seconds)
    else:
        res = opt_kron(terms or [], seed=seed)
    errors["pidentity"] = kron_error(res.factors)
    grid = None
    if (
        terms is not None
        and len(terms) == 1
        and len(dims) == 2
        and workload.n <= REFINE_MAX_CELLS
        and res.thetas is not None
    ):
        phases = REFINE_PHASES_LONG if refine_grid else REFINE_PHASES
        grid = refine_kron_pidentity(terms[0], res.thetas, phases=phases)
        if grid is not None:
            errors["pidentity-grid"] = grid.objective  # every column of L1 norm 1
    mw = marginal_weights(terms) if terms is not None and len(dims) > 1 else None
    if mw is not None:
        subs, theta, errors["marginals"] = opt_marginals(mw, dims, seed=seed)
    union = None
    if terms is not None and len(terms) > 1 and mw is None and workload.n <= UNION_MAX_CELLS:
        union = opt_union(terms, seed=seed)
        union_parts = [
            kron([dense(w * f if i == 0 else f) for i, f in enumerate(factors)])
            for w, factors in zip(union.weights, union.parts, strict=True)
            if w > 0
        ]
        union_strategy = stack(union_parts, name="opt")
        errors["union"] = union.bound
        if workload.n <= UNION_EXACT_CELLS:
            op = union_strategy.operator
            trace = GramSolver.for_strategy(op).trace_with(workload.gram)
            errors["union"] = op.l1_sensitivity() ** 2 * trace
    winner = min(errors, key=lambda k: errors[k])
    if winner == "union":
        out = union_strategy
    elif winner == "pidentity-grid":
        assert grid is not None
        out = pidentity(grid.theta, name="opt")
    elif winner == "pidentity":
        out = kron([dense(f, name="pidentity") for f in res.factors], name="opt")
    elif winner == "marginals":
        parts = []
        for sub, t in zip(subs, theta, strict=True):
            if t <= 0:
                continue
            first = min(sub) if sub else 0
            factors = []
            for i, d in enumerate(dims):
                base = np.eye(d) if i in sub else np.ones((1, d))
                factors.append(dense(t * base) if i == first else dense(base))
            parts.append(kron(factors))
        out = stack(parts, name="opt")
    else:
        out = kron(fixed[winner], name="opt")
    out.name = "opt-grid" if refine_grid else "opt"
    out.info = {
        "opt_winner": winner,
        "opt_l1_error_unit": errors[winner],
        "opt_seconds": round(time.perf_counter() - start, 3),
    }
    return out


def gaussian_optimal_strategy(workload: Any) -> Any:
    """``gauss-opt``: ``A = X^{½}`` for the solved X of :func:`gaussian_optimum` (⊗ per axis).

    ``AᵀA = X`` and ``‖A‖₂² = max diag X = 1``, so its Gaussian error is the primal value, within
    the certified gap of the optimum; ``info`` records the gap.
    """
    from dpcube.mechanisms.matrix.strategies import dense, kron

    opt = gaussian_optimum(workload.gram)
    parts = []
    for x in opt.factors:
        mu, v = np.linalg.eigh(x)
        parts.append(dense((v * np.sqrt(np.maximum(mu, 0.0))) @ v.T, name="gauss-opt"))
    out = kron(parts, name="gauss-opt")
    out.name = "gauss-opt"
    out.info = {"gauss_opt_gap": opt.gap, "gauss_opt_seconds": round(opt.seconds, 3)}
    return out


__all__ = [
    "REFINE_MAX_CANCELLATION",
    "REFINE_MAX_CELLS",
    "REFINE_MAX_WORK",
    "REFINE_PHASES",
    "REFINE_PHASES_LONG",
    "UNION_EXACT_CELLS",
    "UNION_MAX_CELLS",
    "GaussianOptimum",
    "KronResult",
    "PIdentityResult",
    "SparseSupport",
    "UnionResult",
    "gaussian_optimal_strategy",
    "gaussian_optimum",
    "gaussian_optimum_dense",
    "interval_form",
    "kron_pidentity_objective",
    "kron_pidentity_theta",
    "kron_terms",
    "marginal_weights",
    "marginals_objective",
    "opt_kron",
    "opt_kron_boxes",
    "opt_marginals",
    "opt_pidentity",
    "opt_union",
    "optimized_strategy",
    "pidentity_matrix",
    "pidentity_objective",
    "refine_kron_pidentity",
    "refine_work",
    "sparse_pidentity_objective",
    "union_weights",
]
