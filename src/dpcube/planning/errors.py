"""Exact expected error of the data-independent mechanisms on a workload, before any data is seen.

Every mechanism here adds independent noise and post-processes it linearly, so the noise of the
answers ``W x̂`` has covariance ``v · W C Wᵀ`` with ``C`` the cell covariance per unit of noise
variance, and the expected total squared error over the workload is ``v · tr(G C)`` with
``G = WᵀW`` (Li, Miklau, "Efficient Batch Query Answering Under Differential Privacy", 2011, Eqs. 1
and 4). ``v`` is the variance the release's sampler will really have (snapped or discrete samplers,
rounded scales), not the nominal ``2(Δ/ε)²``.

- Identity: ``C = I`` (one draw per cell).
- Privelet / Privelet+ (Xiao, Wang, Gehrke, ICDE 2010, Theorem 3): the HN transform is a Kronecker
  product of per-axis transforms and every weighted coefficient gets the same variance, so
  ``C = ⊗ᵢ Mᵢ Mᵢᵀ`` with ``Mᵢ`` the weighted inverse transform of axis i
  (:func:`privelet_cell_covariance`).
- Matrix mechanism: ``C = (AᵀA)⁻¹`` per unit of row variance (through ``mechanisms.matrix.plan``).
- Data cubes (Ding et al. 2011): per published cuboid the per-cell variance of its estimate
  (eq. 2 without consistency, the exact BLUE variance with L2 consistency).

``tr(G C)`` never forms G when both are Kronecker products (or sums of them):
``tr((⊗Gᵢ)(⊗Cᵢ)) = ∏ tr(Gᵢ Cᵢ)`` (:func:`kron_trace`); a workload of boxes is the sum of one
Kronecker product per box, ``tr(G ⊗Cᵢ) = Σ_q ∏ᵢ r_qiᵀ Cᵢ r_qi`` (:class:`~dpcube.linalg.boxes.BoxGram`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from dpcube.linalg.boxes import BoxGram
from dpcube.linalg.operators import Kronecker, LinearOperator, Sum
from dpcube.privacy.random import NO_NOISE
from dpcube.privacy.samplers import (
    add_discrete_gaussian,
    add_discrete_laplace,
    gaussian_sigma,
    snapped_laplace,
)
from dpcube.privacy.unit import ROW, PrivacyUnit

FloatArray = NDArray[np.float64]
#: A per-axis cell covariance; ``None`` stands for the identity (no need to form it).
Factor = FloatArray | None

#: Largest grid on which :func:`kron_trace` multiplies dense n x n matrices.
MAX_DENSE_TRACE_CELLS = 4096


def _trace_product(g: LinearOperator, c: Factor) -> float:
    """``tr(G C)`` for one axis (C symmetric).

    >>> from dpcube.linalg.operators import Explicit
    >>> _trace_product(Explicit(np.array([[2.0, 1.0], [1.0, 2.0]])), None)
    4.0
    """
    dense = g.dense()
    if c is None:
        return float(np.trace(dense))
    return float(np.sum(dense * c))


def kron_trace(gram: LinearOperator, factors: Sequence[Factor]) -> float:
    """``tr(G (⊗ᵢ Cᵢ))`` for a workload Gram G (a Kronecker product, a sum of them, or any
    operator on a small grid) and per-axis symmetric factors ``Cᵢ`` (``None`` = identity).

    >>> from dpcube.workloads import allrange, marginals
    >>> kron_trace(allrange((3, 2)).gram, [None, None]) == 10 * 4
    True
    >>> kron_trace(marginals(1, (2, 3)).gram, [None, None])  # 5 cells of marginals, each sums 3 or 2
    12.0
    """
    if isinstance(gram, BoxGram) and len(gram.dims) == len(factors):
        return gram.kron_trace(factors)  # Σ_q Πᵢ r_qiᵀ Cᵢ r_qi: interval sums per axis
    if isinstance(gram, Sum):
        return sum(kron_trace(part, factors) for part in gram.parts)
    if isinstance(gram, Kronecker) and len(gram.factors) == len(factors):
        return math.prod(_trace_product(g, c) for g, c in zip(gram.factors, factors, strict=True))
    if len(factors) == 1:
        return _trace_product(gram, factors[0])
    n = gram.cols
    if n > MAX_DENSE_TRACE_CELLS:
        from dpcube.errors import QueryError

        raise QueryError(
            f"the workload's Gram matrix is not a Kronecker product over the {len(factors)} axes "
            f"and the grid has {n:,} cells (more than {MAX_DENSE_TRACE_CELLS:,}): use a coarser "
            "schema or a workload spec (allrange, prefix, marginals, upto)"
        )
    full: FloatArray = np.ones((1, 1))
    for c, axis in zip(factors, _axis_sizes(gram, factors), strict=True):
        full = np.asarray(np.kron(full, np.eye(axis) if c is None else c), dtype=np.float64)
    return float(np.sum(gram.dense() * full))


def _axis_sizes(gram: LinearOperator, factors: Sequence[Factor]) -> list[int]:
    sizes = [c.shape[0] if c is not None else 0 for c in factors]
    known = math.prod(s for s in sizes if s) or 1
    missing = [i for i, s in enumerate(sizes) if not s]
    if len(missing) > 1:
        raise ValueError("at most one identity factor can be sized implicitly; give the sizes")
    if missing:
        sizes[missing[0]] = gram.cols // known
    return sizes


def identity_factors(dims: Sequence[int]) -> list[Factor]:
    """The cell covariance of the Identity mechanism: the identity on every axis."""
    return [np.eye(d) if len(dims) > 1 else None for d in dims]


# -- realised noise variances (what the samplers will really draw) -------------------------------


def discrete_laplace_release_variance(scale: float) -> float:
    """Variance of :func:`add_discrete_laplace` at ``scale`` (the scale is rounded up first).

    >>> round(discrete_laplace_release_variance(1.0), 6)  # 2p/(1-p)^2, p = exp(-1/t), t >= 1
    1.841347
    """
    _, draw = add_discrete_laplace(np.zeros(1, dtype=np.int64), scale, NO_NOISE)
    return float(np.max(draw.variance))


def discrete_laplace_release_scale(scale: float) -> float:
    """The scale ``t/s`` :func:`add_discrete_laplace` really uses (``scale`` rounded up).

    >>> discrete_laplace_release_scale(1.0)
    1.0
    """
    _, draw = add_discrete_laplace(np.zeros(1, dtype=np.int64), scale, NO_NOISE)
    return float(np.max(draw.scale))


def discrete_gaussian_release_sigma2(sigma: float) -> float:
    """The variance parameter sigma² :func:`add_discrete_gaussian` really uses (rounded up)."""
    _, draw = add_discrete_gaussian(np.zeros(1, dtype=np.int64), sigma, NO_NOISE)
    return float(np.max(draw.scale)) ** 2


def discrete_gaussian_release_variance(sigma: float) -> float:
    """Variance of :func:`add_discrete_gaussian` at ``sigma`` (sigma² rounded up first)."""
    _, draw = add_discrete_gaussian(np.zeros(1, dtype=np.int64), sigma, NO_NOISE)
    return float(np.max(draw.variance))


def identity_cell_variance(
    epsilon: float,
    delta: float | None,
    noise: str,
    neighbour: str,
    unit: PrivacyUnit = ROW,
) -> float:
    """Per-cell variance of an :class:`dpcube.Identity` release (its ``cell_variance``), for
    the privacy ``unit`` (L1 sensitivity for Laplace noise, its L2 for Gaussian noise)."""
    norm = "l1" if noise == "laplace" else "l2"
    sensitivity = unit.histogram_sensitivity(neighbour, norm)
    if noise == "laplace":
        return discrete_laplace_release_variance(sensitivity / epsilon)
    assert delta is not None
    return discrete_gaussian_release_variance(gaussian_sigma(sensitivity, epsilon, delta))


def privelet_coefficient_variance(epsilon: float, mechanism: object, schema: object) -> float:
    """The noise variance of every weighted coefficient of a Privelet(+) release on ``schema``,
    as :meth:`PriveletPlus._noisy_cells` realises it on the exact-integer path (``Lap(lambda)`` on
    ``W c`` through the snapped sampler at scale ``D lambda``, divided by ``D²``)."""
    from dpcube.mechanisms.privelet.mechanism import PriveletPlus
    from dpcube.mechanisms.privelet.transforms import common_denominator
    from dpcube.schema import Schema

    assert isinstance(mechanism, PriveletPlus) and isinstance(schema, Schema)
    plan = mechanism.plan(schema)
    lam = plan.noise_scale(epsilon)
    if plan.all_plain:
        return discrete_laplace_release_variance(lam)
    den = common_denominator(plan.axes)
    scale = float(np.nextafter(plan.neighbour_factor * plan.rho * den / epsilon, np.inf))
    _, draw = snapped_laplace(
        np.zeros(1),
        scale,
        epsilon=epsilon,
        support=plan.support * plan.neighbour_factor,
        source=NO_NOISE,
    )
    return float(np.max(draw.variance)) / den**2


def privelet_cell_covariance(axes: Sequence[object]) -> list[Factor]:
    """Per-axis cell covariance ``Mᵢ Mᵢᵀ`` per unit of coefficient noise variance, with ``Mᵢ``
    the weighted inverse transform of axis i (``None`` for an untransformed axis).

    >>> from dpcube.mechanisms.privelet.transforms import HaarAxis
    >>> c = privelet_cell_covariance([HaarAxis(2)])[0]
    >>> c.tolist()  # cells x0 = c0 + c1, x1 = c0 - c1 with weights 2 and 2: Var 1/2, Cov 0
    [[0.5, 0.0], [0.0, 0.5]]
    """
    from dpcube.mechanisms.privelet.transforms import AxisTransform

    out: list[Factor] = []
    for ax in axes:
        assert isinstance(ax, AxisTransform)
        if ax.kind == "identity":
            out.append(None if len(axes) == 1 else np.eye(ax.n))
            continue
        m = ax.inverse_weighted(np.eye(ax.size)[None, :, :])[0]  # (n, size)
        out.append(m @ m.T)
    return out


__all__ = [
    "MAX_DENSE_TRACE_CELLS",
    "discrete_gaussian_release_sigma2",
    "discrete_gaussian_release_variance",
    "discrete_laplace_release_scale",
    "discrete_laplace_release_variance",
    "identity_cell_variance",
    "identity_factors",
    "kron_trace",
    "privelet_cell_covariance",
    "privelet_coefficient_variance",
]
