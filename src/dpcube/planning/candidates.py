"""How a workload could be answered: one function per mechanism family, each returning
:class:`~dpcube.planning.plan.Candidate` objects with their exact expected error (or a public
benchmark figure for the data-dependent mechanisms). Nothing here reads data or charges a ledger:
the inputs are the schema, the workload and the privacy parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpcube.errors import DPCubeError
from dpcube.mechanisms.matrix.workloads import Workload
from dpcube.planning.benchmarks import benchmark_candidates
from dpcube.planning.errors import (
    discrete_laplace_release_variance,
    identity_cell_variance,
    identity_factors,
    kron_trace,
    privelet_cell_covariance,
    privelet_coefficient_variance,
)
from dpcube.planning.plan import Candidate
from dpcube.schema import Schema, Spatial

NAN = float("nan")


def _wanted(name: str, wanted: Sequence[str] | None) -> bool:
    return wanted is None or name in wanted


def _not_applicable(name: str, note: str, label: str = "", **common: Any) -> Candidate:
    return Candidate(name, {}, NAN, "not-applicable", note, label=label or name, **common)


def _box_sizes(w: Workload) -> np.ndarray | None:
    if w.boxes is None:
        return None
    return np.prod(w.boxes[:, :, 1] - w.boxes[:, :, 0] + 1, axis=1)


# -- Identity -----------------------------------------------------------------------------------


def identity_candidates(
    w: Workload, epsilon: float, delta: float | None, neighbour: str
) -> list[Candidate]:
    """Identity with Laplace noise, and with Gaussian noise when delta is given:
    error ``v · tr(G)`` with v the realised per-cell variance."""
    trace = kron_trace(w.gram, identity_factors(w.dims))
    sizes = _box_sizes(w)
    out = []
    for noise in ("laplace", "gaussian") if delta else ("laplace",):

        def error_at(eps: float, noise: str = noise) -> float:
            return identity_cell_variance(eps, delta, noise, neighbour) * trace

        v = identity_cell_variance(epsilon, delta, noise, neighbour)
        out.append(
            Candidate(
                "identity",
                {"noise": noise},
                v * trace,
                "exact",
                f"independent {noise} noise on every cell (per-cell variance {v:.4g})",
                epsilon=epsilon,
                delta=delta,
                neighbour=neighbour,
                label=f"identity({noise})",
                max_query_variance=None if sizes is None else float(v * sizes.max()),
                error_at=error_at,
            )
        )
    return out


# -- Privelet -----------------------------------------------------------------------------------


def privelet_candidates(
    schema: Schema, w: Workload, epsilon: float, neighbour: str, wanted: Sequence[str] | None
) -> list[Candidate]:
    """Privelet (every attribute transformed) and Privelet+ (S_A by the rule of spec 6.3): error
    ``v · tr(G ⊗ Mᵢ Mᵢᵀ)`` with v the realised coefficient variance (spec 5.4)."""
    from dpcube.mechanisms.privelet.mechanism import PriveletPlus, PriveletVariance

    common: dict[str, Any] = {"epsilon": epsilon, "neighbour": neighbour}
    out = []
    for name in ("privelet", "privelet-plus"):
        if not _wanted(name, wanted):
            continue
        if w.dims != schema.shape:
            out.append(
                _not_applicable(
                    name,
                    f"the workload's grid {w.dims} is not the schema's axes {schema.shape}",
                    **common,
                )
            )
            continue
        plain = () if name == "privelet" else None
        mech = PriveletPlus(epsilon, plain_attributes=plain, neighbour=neighbour)
        try:
            pplan = mech.plan(schema)
            factors = privelet_cell_covariance(pplan.axes)
            trace = kron_trace(w.gram, factors)
        except DPCubeError as exc:
            out.append(_not_applicable(name, str(exc), **common))
            continue

        def error_at(eps: float, mech: Any = mech, trace: float = trace) -> float:
            return privelet_coefficient_variance(eps, mech, schema) * trace

        v = privelet_coefficient_variance(epsilon, mech, schema)
        params: dict[str, Any] = {}
        note = f"Haar/nominal wavelet noise, generalized sensitivity {pplan.rho}"
        if name == "privelet-plus":
            params["plain_attributes"] = list(pplan.plain)
            note += f"; untransformed S_A = {list(pplan.plain)} (rule |A| <= P(A)^2 H(A))"
        maxvar = None
        if w.boxes is not None:
            maxvar = float(PriveletVariance(v, pplan.axes).variance_many(w.boxes).max())
        out.append(
            Candidate(
                name,
                params,
                v * trace,
                "exact",
                note,
                max_query_variance=maxvar,
                error_at=error_at,
                **common,
            )
        )
    return out


# -- matrix mechanism ---------------------------------------------------------------------------


def matrix_candidates(
    w: Workload,
    epsilon: float,
    delta: float | None,
    neighbour: str,
    strategies: Sequence[str] | None,
) -> list[Candidate]:
    """Every applicable matrix-mechanism strategy, through ``mechanisms.matrix.plan.plan``."""
    from dpcube.mechanisms.matrix.mechanism import make_strategy, row_noise_variance
    from dpcube.mechanisms.matrix.plan import applicable
    from dpcube.mechanisms.matrix.plan import plan as matrix_plan

    common: dict[str, Any] = {"epsilon": epsilon, "delta": delta, "neighbour": neighbour}
    noise = "gaussian" if delta else "laplace"
    names = list(strategies) if strategies else applicable(w)
    out = []
    for name in names:
        label = f"matrix({name})"
        try:
            result = matrix_plan(w, epsilon, delta, [name], neighbour=neighbour)
        except (DPCubeError, MemoryError) as exc:
            out.append(_not_applicable("matrix", str(exc), label=label, **common))
            continue
        row = result["strategies"][name]

        def error_at(eps: float, row: dict[str, Any] = row) -> float:
            v = row_noise_variance(noise, row["sensitivity"], row["support"], eps, delta)
            return float(v * row["trace"])

        maxvar = None
        if w.boxes is not None:
            from dpcube.linalg.solve import GramSolver

            s = make_strategy(name, w.dims, w)
            q = GramSolver.for_strategy(s.operator).box_quadratic(w.boxes, w.dims)
            maxvar = float(row["error"] / row["trace"] * np.max(q))
        note = f"{noise} noise on {row['rows']} strategy rows, ratio to svdb {row['ratio']:.3g}" + (
            f", to the Gaussian optimum {row['ratio_to_optimum']:.3g}"
            if "ratio_to_optimum" in row
            else ""
        )
        out.append(
            Candidate(
                "matrix",
                {"strategy": name, "workload": w, "noise": noise},
                float(row["error"]),
                "exact",
                note,
                label=label,
                max_query_variance=maxvar,
                error_at=error_at,
                **common,
            )
        )
    return out


# -- data cubes ---------------------------------------------------------------------------------

#: (method, consistency) pairs compared for marginal workloads (Ding et al. 2011).
DATACUBE_VARIANTS = (("bmax", None), ("bmax", "l2"), ("pmost", None), ("pmost", "l2"))


def marginal_order(schema: Schema, w: Workload) -> int | None:
    """K when the workload is exactly the K-way marginals of the schema's attributes."""
    if w.spec is None or not w.spec.startswith("marginals:"):
        return None
    if any(len(a.shape) != 1 for a in schema.attributes) or w.dims != schema.shape:
        return None
    return int(w.spec.split(":")[1])


def datacube_candidates(
    schema: Schema, w: Workload, epsilon: float, neighbour: str
) -> list[Candidate]:
    """BMax and PMost, with and without L2 consistency, for a K-way marginal workload: error
    ``Σ_C cells(C) · Var_C`` with Var_C the per-cell variance of the published cuboid C (eq. 2
    without consistency, the exact L2 (BLUE) variance with it), uniform budgets."""
    from dpcube.mechanisms.datacube.consistency import l2_variance
    from dpcube.mechanisms.datacube.lattice import best_sources
    from dpcube.mechanisms.datacube.mechanism import DataCube

    common: dict[str, Any] = {"epsilon": epsilon, "neighbour": neighbour}
    k = marginal_order(schema, w)
    out = []
    for method, consistency in DATACUBE_VARIANTS:
        label = f"datacube({method}{', l2' if consistency else ''})"
        if k is None:
            out.append(
                _not_applicable(
                    "datacube",
                    "data cubes publish marginals: use a marginals:K workload over a schema with "
                    "one axis per attribute",
                    label=label,
                    **common,
                )
            )
            continue
        params = {"method": method, "consistency": consistency, "publish": f"k={k}"}
        mech = DataCube(epsilon, neighbour=neighbour, **params)  # type: ignore[arg-type]
        cplan = mech.plan(schema)
        lattice = cplan.geometry.lattice
        sources = cplan.selection.sources
        published = list(cplan.published)

        def error_at(
            eps: float,
            mech: Any = mech,
            sources: Sequence[int] = sources,
            published: list[int] = published,
            consistency: str | None = consistency,
            lattice: Any = lattice,
        ) -> float:
            v = discrete_laplace_release_variance(mech.unit * len(sources) / eps)
            variances = {m: v for m in sources}
            if consistency is None:
                best = best_sources(
                    lattice, {m: Fraction(x) for m, x in variances.items()}, published
                )
                per_cell = {m: float(best[m][0]) for m in published}
            else:
                weights = {m: 1.0 / x for m, x in variances.items()}
                per_cell = {m: l2_variance(lattice, weights, m) for m in published}
            return float(sum(lattice.cells(m) * per_cell[m] for m in published))

        names = [",".join(cplan.geometry.attributes(m)) or "total" for m in sources]
        out.append(
            Candidate(
                "datacube",
                params,
                error_at(epsilon),
                "exact",
                f"measures {len(sources)} cuboid(s) {names}"
                + ("; L2-consistent (BLUE)" if consistency else "; no consistency"),
                label=label,
                error_at=error_at,
                **common,
            )
        )
    return out


# -- everything ---------------------------------------------------------------------------------


def all_candidates(
    schema: Schema,
    w: Workload,
    epsilon: float,
    delta: float | None,
    neighbour: str,
    wanted: Sequence[str] | None,
    strategies: Sequence[str] | None,
) -> list[Candidate]:
    """Every mechanism in ``wanted`` (default: all registered) as a candidate for ``w``."""
    out: list[Candidate] = []
    builders: list[tuple[str, Callable[[], list[Candidate]]]] = [
        ("identity", lambda: identity_candidates(w, epsilon, delta, neighbour)),
        ("matrix", lambda: matrix_candidates(w, epsilon, delta, neighbour, strategies)),
        ("datacube", lambda: datacube_candidates(schema, w, epsilon, neighbour)),
    ]
    for name, build in builders:
        if _wanted(name, wanted):
            out.extend(build())
    out.extend(privelet_candidates(schema, w, epsilon, neighbour, wanted))
    spatial = any(isinstance(a, Spatial) for a in schema.attributes)
    out.extend(benchmark_candidates(epsilon, delta, neighbour, wanted, spatial=spatial))
    return out


def census_candidates(
    epsilon: float, delta: float | None, neighbour: str, wanted: Sequence[str] | None
) -> list[Candidate]:
    """Census group-size tables: benchmark figures only (their error depends on the data)."""
    return benchmark_candidates(epsilon, delta, neighbour, wanted, census=True)


__all__ = [
    "DATACUBE_VARIANTS",
    "all_candidates",
    "census_candidates",
    "datacube_candidates",
    "identity_candidates",
    "marginal_order",
    "matrix_candidates",
    "privelet_candidates",
]
