"""How a workload could be answered: one function per mechanism family, each returning
:class:`~dpcube.planning.plan.Candidate` objects with their exact expected error (or a public
benchmark figure for the data-dependent mechanisms). Nothing here reads data or charges a ledger:
the inputs are the schema, the workload and the privacy parameters.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpcube.errors import DPCubeError, QueryError
from dpcube.linalg.boxes import BoxGram
from dpcube.linalg.operators import Kronecker
from dpcube.planning.benchmarks import SPATIAL_FIGURES, adaptive_candidates, benchmark_candidates
from dpcube.planning.candidate import Candidate
from dpcube.planning.errors import (
    MAX_DENSE_TRACE_CELLS,
    discrete_gaussian_release_sigma2,
    discrete_laplace_release_scale,
    discrete_laplace_release_variance,
    identity_cell_variance,
    identity_factors,
    kron_trace,
    privelet_cell_covariance,
    privelet_coefficient_variance,
)
from dpcube.planning.workload import workload_boxes
from dpcube.privacy.samplers import gaussian_sigma
from dpcube.privacy.unit import ROW, PrivacyUnit
from dpcube.schema import Schema, Spatial
from dpcube.workloads import Workload

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


def largest_query_cells(w: Workload) -> int | None:
    """Cells of the workload's largest query, when its queries are 0/1 boxes of a known kind.

    >>> from dpcube.workloads import parse_workload
    >>> largest_query_cells(parse_workload("allrange:4x4")), largest_query_cells(parse_workload("marginals:1:2x8"))
    (16, 8)
    """
    sizes = _box_sizes(w)
    if sizes is not None:
        return int(np.max(sizes))
    kind = (w.spec or "").split(":")[0]
    if kind in ("allrange", "prefix", "upto"):
        return w.n
    if kind == "marginals":
        k = int((w.spec or "").split(":")[1])
        return max(
            (w.n // math.prod(w.dims[i] for i in subset))
            for subset in itertools.combinations(range(len(w.dims)), k)
        )
    return None


def _pick(aggregate: str, largest: float | None, mean: float, label: str) -> float:
    if aggregate == "mean":
        return mean
    if aggregate != "max":
        raise QueryError(f"aggregate must be 'max' or 'mean', got {aggregate!r}")
    if largest is None:
        raise QueryError(
            f"{label}: the largest query of this workload is not known (give the queries in a "
            "file, or use the mean aggregate)"
        )
    return largest


def discrete_laplace_spread(
    scale_at: Callable[[float], float], largest: float | None, mean: float, label: str
) -> Callable[[float, str], tuple[float, float]]:
    """(sd, margin) of a sum of c independent discrete Laplace draws of scale b: the continuous
    Laplace it is coupled to has sd ``b sqrt(2c)``, the coupling moves each draw by at most 1
    (:mod:`dpcube.planning.inverse`), so the margin is c."""

    def spread_at(eps: float, aggregate: str) -> tuple[float, float]:
        c = _pick(aggregate, largest, mean, label)
        return scale_at(eps) * math.sqrt(2.0 * c), c

    return spread_at


def scale_over(numerator: float) -> Callable[[float], float]:
    """epsilon -> the discrete Laplace scale released for ``numerator / epsilon``."""

    def scale_at(eps: float) -> float:
        return discrete_laplace_release_scale(numerator / eps)

    return scale_at


def identity_candidates(
    w: Workload, epsilon: float, delta: float | None, neighbour: str, unit: PrivacyUnit = ROW
) -> list[Candidate]:
    """Identity with Laplace noise, and with Gaussian noise when delta is given:
    error ``v · tr(G)`` with v the realised per-cell variance."""
    trace = kron_trace(w.gram, identity_factors(w.dims))
    largest = largest_query_cells(w)
    mean_cells = trace / w.size
    out = []
    for noise in ("laplace", "gaussian") if delta else ("laplace",):
        label = f"identity({noise})"

        def error_at(eps: float, noise: str = noise) -> float:
            return identity_cell_variance(eps, delta, noise, neighbour, unit) * trace

        spread_at: Callable[[float, str], tuple[float, float]]
        if noise == "laplace":
            l1 = unit.histogram_sensitivity(neighbour, "l1")
            spread_at = discrete_laplace_spread(scale_over(l1), largest, mean_cells, label)
        else:
            l2 = unit.histogram_sensitivity(neighbour, "l2")
            assert delta is not None

            def spread_at(
                eps: float, aggregate: str, l2: float = l2, label: str = label
            ) -> tuple[float, float]:
                c = _pick(aggregate, largest, mean_cells, label)
                sigma2 = discrete_gaussian_release_sigma2(gaussian_sigma(l2, eps, delta))
                return math.sqrt(sigma2 * c), 0.0

        v = identity_cell_variance(epsilon, delta, noise, neighbour, unit)
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
                privacy_unit=unit,
                label=label,
                max_query_variance=None if largest is None else float(v * largest),
                tail="discrete-laplace" if noise == "laplace" else "subgaussian",
                error_at=error_at,
                spread_at=spread_at,
            )
        )
    return out


# -- Privelet -----------------------------------------------------------------------------------


def privelet_candidates(
    schema: Schema,
    w: Workload,
    epsilon: float,
    neighbour: str,
    wanted: Sequence[str] | None,
    unit: PrivacyUnit = ROW,
) -> list[Candidate]:
    """Privelet (every attribute transformed) and Privelet+ (S_A by the rule of Xiao, Wang, Gehrke,
    ICDE 2010, Sec. VI-D): error ``v · tr(G ⊗ Mᵢ Mᵢᵀ)`` with v the realised coefficient variance
    (Privelet, Theorem 3)."""
    from dpcube.mechanisms.privelet.mechanism import PriveletPlus, PriveletVariance

    common: dict[str, Any] = {"epsilon": epsilon, "neighbour": neighbour, "privacy_unit": unit}
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
        mech = PriveletPlus(epsilon, plain_attributes=plain, neighbour=neighbour).with_unit(unit)
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
        model = PriveletVariance(v, pplan.axes)
        maxvar = None
        if (w.spec or "").startswith("allrange:") and max(w.dims) <= 1024:
            maxvar = model.max_variance()  # the largest over every box: all of allrange
        elif (boxes := workload_boxes(w)) is not None:
            maxvar = float(model.variance_many(boxes).max())
        spread = None
        if pplan.all_plain:  # the Basic method: discrete Laplace of scale lambda on every cell
            largest = largest_query_cells(w)
            spread = discrete_laplace_spread(
                scale_over(float(pplan.neighbour_factor * pplan.rho)),
                largest,
                kron_trace(w.gram, identity_factors(w.dims)) / w.size,
                name,
            )
            note += " (every attribute untransformed: the Basic method)"
        out.append(
            Candidate(
                name,
                params,
                v * trace,
                "exact",
                note,
                max_query_variance=maxvar,
                tail="discrete-laplace" if pplan.all_plain else "laplace",
                error_at=error_at,
                spread_at=spread,
                **common,
            )
        )
    return out


# -- matrix mechanism ---------------------------------------------------------------------------


def _lazy_largest_quadratic(name: str, w: Workload, boxes: np.ndarray) -> Callable[[], float]:
    """``max_q qᵀ(AᵀA)⁻¹q`` over the boxes, computed (strategy rebuilt) on first use only."""
    cache: list[float] = []

    def largest() -> float:
        if not cache:
            from dpcube.linalg.solve import GramSolver
            from dpcube.mechanisms.matrix.mechanism import make_strategy

            s = make_strategy(name, w.dims, w)
            q = GramSolver.for_strategy(s.operator).box_quadratic(boxes, w.dims)
            cache.append(float(np.max(q)))
        return cache[0]

    return largest


def kronecker_strategy_row(
    name: str,
    w: Workload,
    epsilon: float,
    delta: float | None,
    neighbour: str,
    unit: PrivacyUnit = ROW,
) -> dict[str, Any]:
    """The row ``mechanisms.matrix.plan.plan`` gives for a Kronecker strategy, for a workload
    whose Gram is a sum of Kronecker products on a grid too large to make dense:
    ``tr(G (AᵀA)⁻¹) = Σ_terms ∏_axes tr(Gᵢ (AᵢᵀAᵢ)⁻¹)`` (:func:`kron_trace`)."""
    from dpcube.linalg.solve import GramSolver
    from dpcube.mechanisms.matrix.mechanism import MatrixMechanism, make_strategy

    if name not in ("identity", "hierarchical", "wavelet"):
        raise QueryError(
            f"strategy {name!r} needs a dense or Kronecker workload Gram; this one is a sum of "
            f"Kronecker products over {w.n:,} cells (use identity, hierarchical or wavelet)"
        )
    s = make_strategy(name, w.dims, w)
    if name == "identity":  # AᵀA = I
        trace = kron_trace(w.gram, identity_factors(w.dims))
    else:
        solver = GramSolver.for_strategy(s.operator)
        if solver.kron is None or len(solver.kron) != len(w.dims):
            raise QueryError(f"strategy {name!r} is not a Kronecker product over the axes")
        trace = kron_trace(w.gram, [f.inverse() for f in solver.kron])
    mech = MatrixMechanism(epsilon, delta, neighbour=neighbour).with_unit(unit)
    return {
        "error": mech.release_noise_variance(s) * trace,
        "rows": s.operator.rows,
        "trace": trace,
        "sensitivity": mech.sensitivity(s),
        "support": mech.support(s),
    }


def matrix_candidates(
    w: Workload,
    epsilon: float,
    delta: float | None,
    neighbour: str,
    strategies: Sequence[str] | None,
    report: dict[str, Any] | None = None,
    unit: PrivacyUnit = ROW,
) -> list[Candidate]:
    """Every applicable matrix-mechanism strategy, through ``mechanisms.matrix.plan.plan``;
    ``report`` receives that plan's whole output (svdb, Gaussian optimum, nominal errors).

    With delta each strategy is a candidate twice: under Gaussian noise (L2 sensitivity) and
    under Laplace noise (L1 sensitivity, pure epsilon-DP, which is (epsilon, delta)-DP for every
    delta and charges none); which is lower depends on the strategy's two norms (Li et al.,
    VLDB J. 2015, App. B.3)."""
    from dpcube.mechanisms.matrix.plan import applicable
    from dpcube.mechanisms.matrix.plan import plan as matrix_plan

    common: dict[str, Any] = {
        "epsilon": epsilon,
        "delta": delta,
        "neighbour": neighbour,
        "privacy_unit": unit,
    }
    noise = "gaussian" if delta else "laplace"
    names = list(strategies) if strategies else applicable(w)
    out = []
    # Kronecker and box Grams are traced per axis by mechanisms.matrix.plan, never made dense
    dense_ok = isinstance(w.gram, Kronecker | BoxGram) or w.n <= MAX_DENSE_TRACE_CELLS
    together: dict[str, Any] = {}
    if dense_ok:
        try:  # one call (the Gaussian optimum, with delta, is solved once), else one per strategy
            whole = matrix_plan(w, epsilon, delta, names, neighbour=neighbour, privacy_unit=unit)
            together = whole["strategies"]
            if report is not None:
                report.update(whole)
        except (DPCubeError, MemoryError):
            together = {}
    for name in names:
        label = f"matrix({name})"
        try:
            if name in together:
                row = together[name]
            elif dense_ok:
                row = matrix_plan(
                    w, epsilon, delta, [name], neighbour=neighbour, privacy_unit=unit
                )["strategies"][name]
            else:  # a sum of Kronecker products on a large grid: never made dense
                row = kronecker_strategy_row(name, w, epsilon, delta, neighbour, unit)
        except (DPCubeError, MemoryError) as exc:
            out.append(_not_applicable("matrix", str(exc), label=label, **common))
            continue
        out.append(_matrix_candidate(name, w, row, noise, epsilon, delta, neighbour, label, unit))
        if delta:  # the same strategy under Laplace noise: pure DP is a candidate under any delta
            if "laplace_error" in row:
                laplace_row = {
                    "error": row["laplace_error"],
                    "rows": row["rows"],
                    "trace": row["trace"],
                    "sensitivity": row["laplace_sensitivity"],
                    "support": row["laplace_support"],
                }
            else:
                laplace_row = kronecker_strategy_row(name, w, epsilon, None, neighbour, unit)
            out.append(
                _matrix_candidate(
                    name,
                    w,
                    laplace_row,
                    "laplace",
                    epsilon,
                    None,
                    neighbour,
                    f"{label[:-1]}, laplace)",
                    unit,
                )
            )
    return out


def _matrix_candidate(
    name: str,
    w: Workload,
    row: dict[str, Any],
    noise: str,
    epsilon: float,
    delta: float | None,
    neighbour: str,
    label: str,
    unit: PrivacyUnit = ROW,
) -> Candidate:
    """One strategy's candidate under one noise, from its row of the matrix plan (``delta``
    None for Laplace noise, which charges no delta)."""
    from dpcube.mechanisms.matrix.mechanism import row_noise_variance

    def error_at(eps: float) -> float:
        v = row_noise_variance(noise, row["sensitivity"], row["support"], eps, delta)
        return float(v * row["trace"])

    boxes = workload_boxes(w)
    largest = _lazy_largest_quadratic(name, w, boxes) if boxes is not None else None

    def spread_at(eps: float, aggregate: str) -> tuple[float, float]:
        v = row_noise_variance(noise, row["sensitivity"], row["support"], eps, delta)
        if aggregate == "mean":
            return math.sqrt(v * row["trace"] / w.size), 0.0
        if aggregate != "max" or largest is None:
            _pick(aggregate, None, 0.0, label)
        assert largest is not None
        return math.sqrt(v * largest()), 0.0

    note = f"{noise} noise on {row['rows']} strategy rows"
    if "ratio" in row:
        note += f", ratio to svdb {row['ratio']:.3g}"
    if "ratio_to_optimum" in row:
        note += f", to the Gaussian optimum {row['ratio_to_optimum']:.3g}"
    return Candidate(
        "matrix",
        {"strategy": name, "workload": w, "noise": noise},
        float(row["error"]),
        "exact",
        note,
        label=label,
        tail="laplace" if noise == "laplace" else "normal",
        error_at=error_at,
        spread_at=spread_at,
        epsilon=epsilon,
        delta=delta,
        neighbour=neighbour,
        privacy_unit=unit,
    )


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
    schema: Schema, w: Workload, epsilon: float, neighbour: str, unit: PrivacyUnit = ROW
) -> list[Candidate]:
    """BMax and PMost, with and without L2 consistency, for a K-way marginal workload: error
    ``Σ_C cells(C) · Var_C`` with Var_C the per-cell variance of the published cuboid C (eq. 2
    without consistency, the exact L2 (BLUE) variance with it), uniform budgets."""
    from dpcube.mechanisms.datacube.consistency import l2_variance
    from dpcube.mechanisms.datacube.lattice import best_sources
    from dpcube.mechanisms.datacube.mechanism import DataCube

    common: dict[str, Any] = {"epsilon": epsilon, "neighbour": neighbour, "privacy_unit": unit}
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
        mech = DataCube(epsilon, neighbour=neighbour, **params).with_unit(unit)  # type: ignore[arg-type]
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
        spread = None
        maxvar = None
        if consistency is None:
            # each published cell sums m_C cells of its source: variance v m_C, L1 norm m_C
            from dpcube.mechanisms.datacube.lattice import best_sources as best_of

            unit_best = best_of(lattice, {m: Fraction(1) for m in sources}, published)
            summed = {m: float(unit_best[m][0]) for m in published}
            cells = sum(lattice.cells(m) for m in published)
            mean_summed = sum(lattice.cells(m) * summed[m] for m in published) / cells
            spread = discrete_laplace_spread(
                scale_over(float(mech.unit * len(sources))),
                max(summed.values()),
                mean_summed,
                label,
            )
            maxvar = discrete_laplace_release_variance(mech.unit * len(sources) / epsilon) * max(
                summed.values()
            )
        out.append(
            Candidate(
                "datacube",
                params,
                error_at(epsilon),
                "exact",
                f"measures {len(sources)} cuboid(s) {names}"
                + ("; L2-consistent (BLUE)" if consistency else "; no consistency"),
                label=label,
                max_query_variance=maxvar,
                tail="discrete-laplace",
                error_at=error_at,
                spread_at=spread,
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
    report: dict[str, Any] | None = None,
    unit: PrivacyUnit = ROW,
) -> list[Candidate]:
    """Every mechanism in ``wanted`` (default: all registered) as a candidate for ``w``
    (``report["matrix"]``: the matrix-mechanism strategy plan, when it ran in one call)."""
    matrix_report: dict[str, Any] = {}
    out: list[Candidate] = []
    builders: list[tuple[str, Callable[[], list[Candidate]]]] = [
        ("identity", lambda: identity_candidates(w, epsilon, delta, neighbour, unit)),
        (
            "matrix",
            lambda: matrix_candidates(
                w, epsilon, delta, neighbour, strategies, matrix_report, unit
            ),
        ),
        ("datacube", lambda: datacube_candidates(schema, w, epsilon, neighbour, unit)),
    ]
    for name, build in builders:
        if _wanted(name, wanted):
            out.extend(build())
    out.extend(privelet_candidates(schema, w, epsilon, neighbour, wanted, unit))
    spatial = any(isinstance(a, Spatial) for a in schema.attributes)
    out.extend(benchmark_candidates(epsilon, delta, neighbour, wanted, spatial=spatial, unit=unit))
    out.extend(adaptive_candidates(epsilon, delta, neighbour, wanted, len(w.dims), unit))
    if report is not None and matrix_report:
        report["matrix"] = matrix_report
    return out


#: The mechanisms that need a spatial attribute (those the spatial benchmark figures list).
SPATIAL_ONLY = frozenset(name for name, *_ in SPATIAL_FIGURES.values())


def unlisted_candidates(
    found: Sequence[Candidate],
    wanted: Sequence[str] | None,
    *,
    group_sizes: bool,
    axes: int,
    **common: Any,
) -> list[Candidate]:
    """A not-applicable row, with the reason, for every mechanism in ``wanted`` that no planner
    path listed: a mechanism asked for is never dropped in silence."""
    listed = {c.mechanism for c in found}
    out = []
    for name in dict.fromkeys(wanted or ()):
        if name in listed:
            continue
        if name == "auto":
            note = "auto is the planner's own choice among these rows, not a mechanism to weigh"
        elif group_sizes:
            note = "group-size tables are answered by census-hierarchy only"
        elif name == "census-hierarchy":
            note = "answers census group-size tables only: plan it with --workload group-sizes"
        elif name in SPATIAL_ONLY:
            note = "needs a spatial attribute (a point column with a bounding box) in the schema"
        else:
            note = (
                f"data-dependent, and no benchmark figure was measured for {axes} axes: its "
                "error depends on the data"
            )
        out.append(_not_applicable(name, note, **common))
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
    "discrete_laplace_spread",
    "identity_candidates",
    "largest_query_cells",
    "marginal_order",
    "matrix_candidates",
    "privelet_candidates",
    "unlisted_candidates",
]
