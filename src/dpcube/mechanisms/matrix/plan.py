"""The expected error of every applicable matrix strategy on a workload, without data (read by
:mod:`dpcube.planning` and so by ``dpcube plan``).

For each strategy A the expected total squared error on the workload W is
``v₁·s(A)²·tr(WᵀW (AᵀA)⁻¹)`` (Li & Miklau 2011, Eqs. 1 and 4), with s(A) the sensitivity of A in the
noise's norm and v₁ the noise variance per unit sensitivity: ``gaussian_sigma(1, ε, δ)²`` with delta
(Gaussian, L2), ``2/ε²`` without (Laplace, L1). ``svdb = v₁·(1/n)(Σσᵢ(W))²`` is the lower bound
of the Gaussian matrix mechanism (Li & Miklau, Sec. 3; it is not a bound for Laplace noise, where it
is still shown for scale).

``error`` is the error the release will have: the per-row variance of the snapped samplers the
release uses (:meth:`MatrixMechanism.release_noise_variance`: a slightly enlarged Gaussian sigma,
the discrete Laplace), times ``tr(WᵀW (AᵀA)⁻¹)``; ``nominal_error`` uses the nominal variance
(``2(Δ₁/ε)²`` or ``σ²``), the scale on which HDMM and the papers report. With delta, ``optimum``
is the optimal Gaussian strategy's nominal error (Yuan et al. 2016, :func:`.optimize.gaussian_optimum`)
with its certified relative duality ``gap``, and each strategy has ``ratio_to_optimum``.
The result of :func:`plan`::

    {"svdb": ..., "strategies": {"lsa": {"error": ..., "ratio": ...}, ...}, "recommended": "lsa"}
"""

from __future__ import annotations

import math
import time
from typing import Any

from dpcube.linalg.boxes import BoxGram
from dpcube.linalg.operators import Kronecker
from dpcube.linalg.solve import GramSolver
from dpcube.mechanisms.matrix.bound import svdb
from dpcube.mechanisms.matrix.mechanism import MAX_DENSE_CELLS, MatrixMechanism, make_strategy
from dpcube.mechanisms.matrix.optimize import gaussian_optimum, kron_terms
from dpcube.privacy.ledger import validate_privacy
from dpcube.privacy.samplers import gaussian_sigma
from dpcube.privacy.unit import ROW, PrivacyUnit
from dpcube.workloads import Workload

#: LSA runs in ``dpcube plan`` only up to this many cells (it is O(k n³)).
MAX_LSA_CELLS = 1024

#: ``eigen`` is listed by default only up to this many cells (a dense n x n eigendecomposition
#: and a dense solve: 4,096 cells took 86 s); ask for it with ``--strategies`` above.
MAX_EIGEN_CELLS = 1024

#: With delta, the Gaussian optimum is solved densely per axis up to this many cells (an
#: eigendecomposition per iteration); ``gauss-opt`` is listed by default up to MAX_GAUSS_OPT_AXIS.
MAX_OPTIMUM_AXIS = 2048
MAX_GAUSS_OPT_AXIS = 256


def applicable(workload: Workload) -> list[str]:
    """Strategies listed by default for the workload's grid (power-of-two axes for the wavelet,
    ``eigen`` up to :data:`MAX_EIGEN_CELLS` cells, LSA up to :data:`MAX_LSA_CELLS`, ``opt`` for
    1-D workloads, Grams that are sums of Kronecker products and box workloads)."""
    n = workload.n
    names = ["identity", "hierarchical"]
    if all(d & (d - 1) == 0 for d in workload.dims):
        names.append("wavelet")
    if n <= min(MAX_DENSE_CELLS, MAX_EIGEN_CELLS):
        names.append("eigen")
    if n <= MAX_LSA_CELLS:
        names.append("lsa")
    if workload.spec and workload.spec.startswith("marginal-ranges:"):
        names.append("lsa-separated")
    terms = kron_terms(workload.gram)
    if (
        (terms is not None and len(terms[0]) == len(workload.dims))
        or (len(workload.dims) == 1 and n <= MAX_DENSE_CELLS)
        or isinstance(workload.gram, BoxGram)
        or workload.boxes is not None
    ):
        names.append("opt")
    gram = workload.gram
    axes = [f.cols for f in gram.factors] if isinstance(gram, Kronecker) else [gram.cols]
    if max(axes) <= MAX_GAUSS_OPT_AXIS and (isinstance(gram, Kronecker) or n <= MAX_DENSE_CELLS):
        names.append("gauss-opt")
    return names


def gaussian_wins_b3(l1: float, l2: float, n: int) -> bool:
    """Li & Miklau App. B.3, corrected here (its printed algebra drops a factor): with delta = 2/n^2
    and the classic Gaussian mechanism (sigma^2 = 2 ln(1/delta) Delta_2^2 / eps^2, so P = 2 ln(n^2)
    / eps^2), (eps, delta)-MM has lower error than eps-MM iff ``||A||_1 > sqrt(2 ln n) ||A||_2``;
    the paper's ``log^{1/4} n`` is wrong. For a binary hierarchy on n = 1024 (11 levels: ||A||_1 =
    11, ||A||_2 = sqrt(11)) Laplace still wins, where the paper's rule would pick Gaussian:

    >>> gaussian_wins_b3(11.0, 11.0**0.5, 1024), 11.0 > 11.0**0.5 * math.log(1024) ** 0.25
    (False, True)
    >>> gaussian_wins_b3(40.0, 40.0**0.5, 1024)  # 40 levels: ||A||_1 / ||A||_2 = 6.3 > 3.7
    True
    """
    return l1 > math.sqrt(2.0 * math.log(n)) * l2


def noise_comparison(
    mech: MatrixMechanism,
    strategy: Any,
    trace: float,
    epsilon: float,
    neighbour: str,
    unit: PrivacyUnit = ROW,
) -> dict[str, Any]:
    """The release errors of one strategy under Gaussian (``mech``, with delta) and Laplace noise
    at the same epsilon, and which is lower (dpcube's samplers, not the B.3 formula, whose algebra
    is corrected above)."""
    laplace = MatrixMechanism(epsilon, None, neighbour=neighbour).with_unit(unit)
    gaussian_error = mech.release_noise_variance(strategy) * trace
    laplace_error = laplace.release_noise_variance(strategy) * trace
    return {
        "laplace_error": laplace_error,
        "laplace_sensitivity": laplace.sensitivity(strategy),
        "laplace_support": laplace.support(strategy),
        "winner": "gaussian" if gaussian_error < laplace_error else "laplace",
        "gaussian_over_laplace": gaussian_error / laplace_error,
    }


def plan(
    workload: Workload,
    epsilon: float,
    delta: float | None = None,
    strategies: list[str] | None = None,
    neighbour: str = "add_remove",
    privacy_unit: PrivacyUnit = ROW,
) -> dict[str, Any]:
    """Expected error, ratio to svdb and build time of each strategy; the recommended one.

    Each strategy's row also has ``trace`` (``tr(G(AᵀA)⁻¹)``), ``sensitivity`` (in the noise's
    norm under ``neighbour`` and for ``privacy_unit``) and ``support``: with
    :func:`~dpcube.mechanisms.matrix.mechanism.row_noise_variance` they give the error at any
    other epsilon (``dpcube.planning``)."""
    validate_privacy(epsilon, delta)
    gaussian = delta is not None and delta > 0
    unit = gaussian_sigma(1.0, epsilon, delta) ** 2 if gaussian and delta else 2.0 / epsilon**2
    # a privacy unit of m rows multiplies every strategy's sensitivity by m (MatrixMechanism.
    # sensitivity), so the bounds below are at m rows too
    unit *= float(privacy_unit.rows) ** 2
    bound = unit * svdb(workload.gram)
    known_bound = math.isfinite(bound)  # svdb is not computed for large box workloads
    out: dict[str, Any] = {
        "workload": workload.name,
        "queries": workload.size,
        "cells": workload.n,
        "noise": "gaussian" if gaussian else "laplace",
        "svdb": bound if known_bound else None,
        "svdb_is_lower_bound": gaussian,
        "strategies": {},
    }
    optimum = None
    gram = workload.gram
    n_ok = workload.n <= MAX_DENSE_CELLS
    axes = [f.cols for f in gram.factors] if isinstance(gram, Kronecker) else [gram.cols]
    if gaussian and max(axes) <= MAX_OPTIMUM_AXIS and (isinstance(gram, Kronecker) or n_ok):
        optimum = gaussian_optimum(gram)
        out["optimum"] = {**optimum.to_dict(), "error": unit * optimum.primal}
    mech = MatrixMechanism(epsilon, delta, neighbour=neighbour).with_unit(privacy_unit)
    for name in strategies or applicable(workload):
        start = time.perf_counter()
        s = make_strategy(name, workload.dims, workload)
        op = s.operator
        sens = mech.sensitivity(s)
        trace = GramSolver.for_strategy(op).trace_with(workload.gram)
        nominal = unit * sens**2 * trace
        error = mech.release_noise_variance(s) * trace
        row: dict[str, Any] = {
            "error": error,
            "nominal_error": nominal,
            "rows": op.rows,
            "trace": trace,
            "sensitivity": sens,
            "support": mech.support(s),
            "seconds": round(time.perf_counter() - start, 3),
        }
        if known_bound:
            row["ratio"] = nominal / bound
        if optimum is not None:
            row["ratio_to_optimum"] = nominal / (unit * optimum.primal)
        if gaussian:
            row.update(noise_comparison(mech, s, trace, epsilon, neighbour, privacy_unit))
        out["strategies"][name] = row
    out["recommended"] = min(out["strategies"], key=lambda k: out["strategies"][k]["error"])
    if gaussian:
        rows = out["strategies"]
        best_laplace = min(rows, key=lambda k: rows[k]["laplace_error"])
        g, lap = rows[out["recommended"]]["error"], rows[best_laplace]["laplace_error"]
        out["noise_comparison"] = {
            "gaussian": {"strategy": out["recommended"], "error": g},
            "laplace": {"strategy": best_laplace, "error": lap},
            "winner": "gaussian" if g < lap else "laplace",
            "ratio": max(g, lap) / min(g, lap),
        }
    return out
