"""The matrix mechanism (Li, Hay, Rastogi, Miklau, McGregor; Li & Miklau 2011, Prop. 2.3).

1. Measure the strategy ``y = A x + noise``: Laplace of scale ``Δ₁/ε`` (ε-DP) or Gaussian with
   ``σ = gaussian_sigma(Δ₂, ε, δ)`` ((ε,δ)-DP), through the floating-point-safe samplers of
   :mod:`dpcube.privacy.samplers`;
2. estimate ``x̂ = argmin ‖A z − y‖₂`` by least squares (post-processing; the pseudo-inverse for a
   rank-deficient A that spans the workload, Prop. 2.3);
3. release ``x̂`` as a :class:`~dpcube.release.cells.CellRelease`: every range query is answered
   from ``x̂`` (answers are mutually consistent) with exact variance ``v · qᵀ(AᵀA)⁻¹q``
   (:class:`MatrixVariance`, v = the realised per-row noise variance).

Sensitivity (Li & Miklau, Sec. 2.2, Prop. 2.1): under ``add_remove`` one cell changes by 1, so the
L1 (L2) sensitivity of ``A x`` is the largest column L1 (L2) norm of A. Under ``replace`` one cell
loses 1 and another gains 1: ``‖A(eᵢ − eⱼ)‖₁ ≤ 2·max‖A[:,j]‖₁``, and ``‖A(eᵢ − eⱼ)‖₂² = Gᵢᵢ + Gⱼⱼ −
2Gᵢⱼ`` is at most ``2·max Gⱼⱼ`` when A has no negative entry (then ``Gᵢⱼ ≥ 0``) and at most ``4·max
Gⱼⱼ`` otherwise; these bounds are declared (not tight). At most ``support`` rows change, with
support the largest number of non-zero entries in a column (twice that under ``replace``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import BudgetError, QueryError
from dpcube.histogram import Histogram
from dpcube.linalg.boxes import interval_quadratic
from dpcube.linalg.solve import GramSolver, least_squares
from dpcube.mechanisms.base import Mechanism, SensitivityClaim
from dpcube.mechanisms.matrix.bound import svdb as svdb_of
from dpcube.mechanisms.matrix.lsa import MODES, lsa
from dpcube.mechanisms.matrix.scaling import generalized_lsa, separated_lsa
from dpcube.mechanisms.matrix.strategies import (
    Strategy,
    build_strategy,
    eigen,
    hierarchical,
    identity,
    kron,
    wavelet,
)
from dpcube.mechanisms.params import ParamSpec
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import NO_NOISE, RandomSource
from dpcube.privacy.samplers import gaussian_sigma, snapped_gaussian, snapped_laplace
from dpcube.release.base import ReleaseMetadata
from dpcube.release.cells import CellRelease
from dpcube.release.variance import Selection, VarianceModel, separable_variance
from dpcube.schema import Schema
from dpcube.workloads import (
    Workload,
    allrange,
    marginal_range_parts,
    parse_dims,
    resolve_workload,
)

#: Strategy names the mechanism and ``dpcube plan`` know.
STRATEGIES = (
    "identity",
    "hierarchical",
    "wavelet",
    "eigen",
    "lsa",
    "lsa-separated",
    "lsa-generalized",
    "opt",
    "opt-grid",
    "gauss-opt",
)

#: Largest domain on which the dense strategies (eigen, LSA) are built.
MAX_DENSE_CELLS = 4096


def _power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def make_strategy(
    name: str,
    dims: tuple[int, ...],
    workload: Workload | None = None,
    *,
    branching: int = 2,
    lsa_mode: str = "paper",
    max_levels: int | None = None,
) -> Strategy:
    """Build a named strategy for the grid ``dims`` (and the workload, for the workload-aware ones).

    ``hierarchical`` and ``wavelet`` are Kronecker products of the 1-D strategies in several
    dimensions (Li & Miklau, Sec. 5.2); ``eigen`` and ``lsa`` need the workload (AllRange(dims) by
    default).

    >>> make_strategy("wavelet", (4, 4)).operator.shape
    (16, 16)
    """
    n = math.prod(dims)
    w = workload or allrange(dims)
    if w.dims != dims and w.n == n:
        w = Workload(w.name, dims, w.gram, w.size, w.spec, None, w.rows)
    if w.n != n:
        raise QueryError(
            f"the workload {w.name!r} has {w.n} cells but the data's grid {dims} has {n}"
        )
    if name in CACHED_STRATEGIES:  # built once per (workload, grid), reused at every epsilon
        from dpcube.mechanisms.matrix.cache import cached

        options = {"branching": branching, "lsa_mode": lsa_mode, "max_levels": max_levels}
        return cached(
            name,
            dims,
            w,
            options,
            lambda: _build(name, dims, w, branching, lsa_mode, max_levels),
        )
    return _build(name, dims, w, branching, lsa_mode, max_levels)


#: Strategies that depend on the workload and take seconds to minutes to build: kept by
#: :mod:`dpcube.mechanisms.matrix.cache` (the fixed ones are rebuilt, in milliseconds).
CACHED_STRATEGIES = frozenset(
    {"eigen", "lsa", "lsa-generalized", "lsa-separated", "opt", "opt-grid", "gauss-opt"}
)


def _build(
    name: str,
    dims: tuple[int, ...],
    w: Workload,
    branching: int,
    lsa_mode: str,
    max_levels: int | None,
) -> Strategy:
    n = math.prod(dims)
    if name == "identity":
        return identity(n)
    if name == "hierarchical":
        return kron([hierarchical(d, branching) for d in dims], name="hierarchical")
    if name == "wavelet":
        bad = [d for d in dims if not _power_of_two(d)]
        if bad:
            raise QueryError(
                f"strategy 'wavelet' needs power-of-two axis sizes, got {bad[0]}; use 'hierarchical' or 'lsa'"
            )
        return kron([wavelet(d) for d in dims], name="wavelet")
    if name in ("eigen", "lsa", "lsa-generalized") and n > MAX_DENSE_CELLS:
        raise QueryError(
            f"strategy {name!r} builds a dense {n}x{n} matrix; the grid has more than {MAX_DENSE_CELLS} "
            "cells: use 'hierarchical' or 'wavelet' (Kronecker) or a coarser schema"
        )
    if name == "opt":
        from dpcube.mechanisms.matrix.optimize import optimized_strategy

        return optimized_strategy(w)
    if name == "opt-grid":
        from dpcube.mechanisms.matrix.optimize import optimized_strategy

        return optimized_strategy(w, refine_grid=True)
    if name == "gauss-opt":
        from dpcube.mechanisms.matrix.optimize import gaussian_optimal_strategy

        return gaussian_optimal_strategy(w)
    if name == "eigen":
        return eigen(w.gram, w.to_dict())
    if name == "lsa":
        return lsa(w.gram.dense(), dims, k=max_levels, mode=lsa_mode).strategy("lsa")
    if name == "lsa-generalized":
        return generalized_lsa(w.gram.dense(), dims, k=max_levels, mode=lsa_mode).strategy
    if name == "lsa-separated":
        if w.spec is None or not w.spec.startswith("marginal-ranges:"):
            raise QueryError(
                "strategy 'lsa-separated' needs a workload separable by the total, e.g. 'marginal-ranges:16x16'"
            )
        parts = [
            (axis, part.gram.dense())
            for axis, part in marginal_range_parts(parse_dims(w.spec.split(":")[1]))
        ]
        return separated_lsa(parts, dims, k=max_levels, mode=lsa_mode).strategy
    raise QueryError(f"unknown strategy {name!r}; use one of {', '.join(STRATEGIES)}")


class MatrixVariance(VarianceModel):
    """Exact variance of a range query q: ``v · qᵀ(AᵀA)⁻¹q`` (Li & Miklau, Prop. 2.4, per query),
    with the strategy rebuilt from its spec after loading; Kronecker strategies never form
    ``AᵀA``."""

    kind = "matrix"

    def __init__(
        self, strategy: Mapping[str, Any], dims: tuple[int, ...], noise_variance: float
    ) -> None:
        self.spec = dict(strategy)
        self.dims = tuple(int(d) for d in dims)
        self.noise_variance = float(noise_variance)
        self._solver: GramSolver | None = None

    @property
    def solver(self) -> GramSolver:
        if self._solver is None:
            self._solver = GramSolver.for_strategy(build_strategy(self.spec).operator)
        return self._solver

    def variance_many(self, boxes: NDArray[np.int64]) -> NDArray[np.float64]:
        if len(boxes) == 0:
            return np.zeros(0)
        return self.noise_variance * self.solver.box_quadratic(boxes, self.dims)

    def selection_variance_many(self, selections: Sequence[Selection]) -> NDArray[np.float64]:
        """Exact variance of a set query ``q`` (the indicator of a product of unions of
        intervals): ``v · qᵀ(AᵀA)⁻¹q`` as for a box. Per axis where the strategy is a Kronecker
        product (:func:`~dpcube.release.variance.separable_variance`); otherwise ``q`` is built
        as a vector over the domain and solved."""
        solver = self.solver
        if solver.identity:
            return separable_variance(
                selections, lambda _axis, iv: iv[:, 1] - iv[:, 0] + 1.0, self.noise_variance
            )
        if solver.kron is not None and solver.dims == self.dims:
            inverses = [f.inverse() for f in solver.kron]
            return separable_variance(
                selections,
                lambda axis, iv: interval_quadratic(inverses[axis], iv),
                self.noise_variance,
            )
        out = np.empty(len(selections))
        for k, selection in enumerate(selections):
            vector = np.ones(1)
            for runs, size in zip(selection, self.dims, strict=True):
                axis = np.zeros(size)
                for lo, hi in runs:
                    axis[lo : hi + 1] = 1.0
                vector = np.multiply.outer(vector, axis).ravel()
            out[k] = self.noise_variance * float(solver.quadratic(vector[None, :])[0])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.spec,
            "dims": list(self.dims),
            "noise_variance": self.noise_variance,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MatrixVariance:
        return cls(d["strategy"], tuple(d["dims"]), float(d["noise_variance"]))


class MatrixMechanism(Mechanism):
    """The matrix mechanism with a chosen strategy; releases least-squares cell estimates.

    ``strategy``: one of :data:`STRATEGIES`, a :class:`Strategy`, or a strategy spec dict.
    ``workload``: a spec string (``allrange:1024``, ``random-range:10000:32x32``, …), a JSON/CSV file
    of range queries over the schema, a list of query dicts, or a :class:`Workload`; it drives the
    workload-aware strategies (eigen, LSA) and the reported expected error, svdb and ratio.
    ``noise``: ``"laplace"`` (default without delta) or ``"gaussian"`` (default with delta).

    >>> from dpcube import Schema, Histogram
    >>> from dpcube.privacy import NO_NOISE
    >>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 3], "width": 1}]})
    >>> r = MatrixMechanism(1.0, strategy="wavelet").release(Histogram(s, [1, 2, 3, 4]), random_state=NO_NOISE)
    >>> round(r.answer({"x": [1, 2]}), 9), round(r.variance({"x": [1, 2]}) / r.metadata.noise["noise_variance"], 9)
    (5.0, 0.75)
    """

    name = "matrix"
    #: Peak memory of a release per cell: 43 to 101 bytes measured with the identity strategy (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 160.0
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "strategy",
            "structured",
            "the strategy: " + ", ".join(STRATEGIES) + ", or a strategy spec",
            accepts=(str, Mapping, Strategy),
        ),
        ParamSpec(
            "workload",
            "structured",
            "the workload the strategy is chosen for (a spec like allrange, or a query file)",
            optional=True,
            accepts=(str, Path, list, Workload),
        ),
        ParamSpec(
            "noise",
            "choice",
            "the noise; null: gaussian with --delta, else laplace",
            choices=("laplace", "gaussian"),
            optional=True,
        ),
        ParamSpec("lsa_mode", "choice", "how LSA orders its levels", choices=MODES),
        ParamSpec(
            "max_levels",
            "int",
            "most levels of the LSA strategy; null: as many as useful",
            low=1,
            high=64,
            optional=True,
        ),
        ParamSpec(
            "branching", "int", "branching factor of the hierarchical strategy", low=2, high=1024
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        strategy: Any = "lsa",
        workload: Any = None,
        noise: str | None = None,
        neighbour: str = "add_remove",
        lsa_mode: str = "paper",
        max_levels: int | None = None,
        branching: int = 2,
    ) -> None:
        super().__init__(epsilon, delta, neighbour)
        noise = noise or ("gaussian" if self.delta is not None else "laplace")
        if noise == "gaussian" and self.delta is None:
            raise BudgetError("Gaussian noise needs delta > 0 (for example delta=1e-6)")
        if isinstance(strategy, str) and strategy not in STRATEGIES:
            raise QueryError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
        self.strategy = strategy
        self.workload = workload
        self.noise = noise
        self.lsa_mode = lsa_mode
        self.max_levels = max_levels
        self.branching = int(branching)
        self._cache: dict[tuple[Any, ...], tuple[Strategy, Workload | None]] = {}
        # The factored AᵀA of the last strategy released (and the strategy, so that its id is not
        # reused): a mechanism released many times (a benchmark, a leaderboard over trials and
        # data sets) factors it once; a dense 4,096-cell strategy's Cholesky is ~2 CPU s.
        self._solver: tuple[Strategy, GramSolver] | None = None

    @property
    def norm(self) -> str:
        return "l1" if self.noise == "laplace" else "l2"

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        if isinstance(self.workload, Workload):
            params["workload"] = self.workload.to_dict()
        if isinstance(self.strategy, Strategy):
            params["strategy"] = self.strategy.name
        return params

    # -- strategy ------------------------------------------------------------------------------
    def resolve(self, schema: Schema) -> tuple[Strategy, Workload | None]:
        """The strategy for this schema's grid (built once and cached) and the workload, if any."""
        key = (schema.shape, repr(schema.to_dict()))
        if key not in self._cache:
            dims = schema.shape
            w = None if self.workload is None else resolve_workload(self.workload, schema)
            if w is not None and w.n != math.prod(dims):
                raise QueryError(
                    f"the workload {w.name!r} has {w.n} cells but the schema's grid {dims} has {math.prod(dims)}"
                )
            if isinstance(self.strategy, Strategy):
                s = self.strategy
            elif isinstance(self.strategy, Mapping):
                s = build_strategy(self.strategy)
            else:
                s = make_strategy(
                    self.strategy,
                    dims,
                    w,
                    branching=self.branching,
                    lsa_mode=self.lsa_mode,
                    max_levels=self.max_levels,
                )
            if s.n != math.prod(dims):
                raise QueryError(
                    f"the strategy has {s.n} columns but the schema's grid {dims} has {math.prod(dims)} cells"
                )
            self._cache[key] = (s, w)
        return self._cache[key]

    def _strategy_solver(self, strategy: Strategy) -> GramSolver:
        """The factored ``AᵀA`` of ``strategy``, kept for the next release of the same strategy
        (it depends on the strategy only: no data, no epsilon)."""
        if self._solver is None or self._solver[0] is not strategy:
            self._solver = (strategy, GramSolver.for_strategy(strategy.operator))
        return self._solver[1]

    def sensitivity(self, strategy: Strategy) -> float:
        """Sensitivity of ``A x`` in this mechanism's norm and neighbour notion (module docstring),
        times the rows of one privacy unit m = min(K, C R): a unit changes the histogram by
        ``v`` with ``||v||_1 <= m``, and ``||A v|| <= sum_j |v_j| ||A_j|| <= m max_j ||A_j||``
        in either norm (``A_j`` the columns)."""
        op = strategy.operator
        rows = float(self.privacy_unit.rows)
        if self.norm == "l1":
            base = op.l1_sensitivity() * rows
            return base if self.neighbour == Neighbour.ADD_REMOVE.value else 2.0 * base
        base = op.l2_sensitivity() * rows
        if self.neighbour == Neighbour.ADD_REMOVE.value:
            return base
        return (math.sqrt(2.0) if op.nonnegative() else 2.0) * base

    def release_noise_variance(self, strategy: Strategy) -> float:
        """Per-row noise variance a release with this strategy will have: the snapped sampler's
        (enlarged sigma / discrete Laplace) variance, not the nominal ``2(Δ/ε)²`` or ``σ²``."""
        return row_noise_variance(
            self.noise, self.sensitivity(strategy), self.support(strategy), self.epsilon, self.delta
        )

    def support(self, strategy: Strategy) -> int:
        s = int(strategy.operator.column_support().max()) * self.privacy_unit.cells
        return s if self.neighbour == Neighbour.ADD_REMOVE.value else 2 * s

    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        strategy, _ = self.resolve(schema)
        op = strategy.operator
        return [
            SensitivityClaim(
                "strategy answers",
                lambda x: op.matvec(np.asarray(x, dtype=np.float64).ravel()),
                self.norm,
                self.sensitivity(strategy),
                tight=self.neighbour == Neighbour.ADD_REMOVE.value and self.privacy_unit.is_row,
            )
        ]

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        one = Schema.from_dict(
            {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 3], "width": 1}]}
        )
        two = Schema.from_dict(
            {
                "attributes": [
                    {"name": "a", "kind": "ordinal", "range": [0, 1], "width": 1},
                    {"name": "b", "kind": "ordinal", "range": [0, 1], "width": 1},
                ]
            }
        )
        q1 = [{}, {"x": [0, 1]}, {"x": [1, 3]}, {"x": [2, 2]}]
        q2 = [{}, {"a": [0, 0]}, {"a": [1, 1], "b": [0, 1]}, {"a": [0, 1], "b": [1, 1]}]
        eight = Schema.from_dict(
            {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 7], "width": 1}]}
        )

        def make(epsilon: float, **options: Any) -> Callable[[str], MatrixMechanism]:
            return lambda neighbour: cls(epsilon, neighbour=neighbour, **options)

        cases = []
        for strategy in STRATEGIES[:5]:
            cases.append(Case(f"matrix-{strategy}-laplace", one, make(1.0, strategy=strategy), q1))
            gaussian = make(0.5, delta=1e-5, strategy=strategy, workload="allrange:2x2")
            cases.append(Case(f"matrix-{strategy}-gaussian", two, gaussian, q2))
        separated = make(0.5, delta=1e-5, strategy="lsa-separated", workload="marginal-ranges:2x2")
        cases.append(
            Case(
                "matrix-lsa-separated-gaussian", two, separated, [{"a": [0, 0]}, {"b": [1, 1]}, {}]
            )
        )
        generalized = make(1.0, strategy="lsa-generalized", workload="allrange:8")
        cases.append(
            Case(
                "matrix-lsa-generalized-laplace",
                eight,
                generalized,
                [{}, {"x": [0, 1]}, {"x": [3, 6]}],
            )
        )
        grid = Schema.from_dict(
            {
                "attributes": [
                    {"name": "a", "kind": "ordinal", "range": [0, 3], "width": 1},
                    {"name": "b", "kind": "ordinal", "range": [0, 3], "width": 1},
                ]
            }
        )
        generalized_2d = make(0.5, delta=1e-5, strategy="lsa-generalized", workload="allrange:4x4")
        cases.append(
            Case(
                "matrix-lsa-generalized-2d-gaussian",
                grid,
                generalized_2d,
                [{}, {"a": [0, 1]}, {"a": [1, 2], "b": [2, 3]}],
            )
        )
        return cases

    # -- releasing -----------------------------------------------------------------------------
    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> CellRelease:
        strategy, workload = self.resolve(data.schema)
        op = strategy.operator
        sensitivity = self.sensitivity(strategy)
        support = self.support(strategy)
        answers = op.matvec(data.counts.astype(np.float64).ravel())
        if self.noise == "laplace":
            noisy, draw = snapped_laplace(
                answers,
                sensitivity / self.epsilon,
                epsilon=self.epsilon,
                support=support,
                source=source,
            )
        else:
            assert self.delta is not None
            sigma = gaussian_sigma(sensitivity, self.epsilon, self.delta)
            noisy, draw = snapped_gaussian(
                answers, sigma, l2_sensitivity=sensitivity, support=support, source=source
            )
        solver = self._strategy_solver(strategy)
        estimate = least_squares(op, noisy, solver).reshape(data.schema.shape)
        noise_variance = float(np.max(draw.variance))
        metadata.noise = {
            "distribution": draw.distribution,
            "scale": float(np.max(draw.scale)),
            "noise_variance": noise_variance,
            "strategy": strategy.name,
            "strategy_measured_rows": op.rows,
            "strategy_l1": op.l1_sensitivity(),
            "strategy_l2": op.l2_sensitivity(),
            **{f"strategy_{k}": v for k, v in strategy.info.items()},
        }
        if workload is not None:
            metadata.noise.update(expected_error(workload, op, noise_variance, solver))
        variance = MatrixVariance(strategy.spec, data.schema.shape, noise_variance)
        variance._solver = solver
        return CellRelease(data.schema, metadata, estimate, variance)


def row_noise_variance(
    noise: str, sensitivity: float, support: int, epsilon: float, delta: float | None
) -> float:
    """Variance of the snapped sampler a release draws per strategy row (see
    :meth:`MatrixMechanism.release_noise_variance`); depends on the strategy only through its
    sensitivity and its support, so a planner can evaluate it at any epsilon."""
    zero = np.zeros(1)
    if noise == "laplace":
        _, draw = snapped_laplace(
            zero, sensitivity / epsilon, epsilon=epsilon, support=support, source=NO_NOISE
        )
    else:
        assert delta is not None
        sigma = gaussian_sigma(sensitivity, epsilon, delta)
        _, draw = snapped_gaussian(
            zero, sigma, l2_sensitivity=sensitivity, support=support, source=NO_NOISE
        )
    return float(np.max(draw.variance))


def expected_error(
    workload: Workload, strategy_op: Any, noise_variance: float, solver: GramSolver | None = None
) -> dict[str, Any]:
    """Expected total squared error of the workload at per-row noise variance v: ``v·tr(G(AᵀA)⁻¹)``;
    the bound at the same noise level per unit of squared L2 sensitivity,
    ``svdb = v/‖A‖₂² · (1/n)(Σσᵢ)²``, and their ratio ``‖A‖₂²·tr(G(AᵀA)⁻¹)/svdb₁`` (≥ 1, Li &
    Miklau, Thm 3.3)."""
    s = solver or GramSolver.for_strategy(strategy_op)
    trace = s.trace_with(workload.gram)
    bound1 = svdb_of(workload.gram)
    l2sq = strategy_op.l2_sensitivity() ** 2
    known = math.isfinite(bound1)  # not computed for box workloads on large grids
    return {
        "workload": workload.name,
        "workload_queries": workload.size,
        "expected_total_squared_error": noise_variance * trace,
        "svdb": noise_variance / l2sq * bound1 if known else None,
        "ratio": l2sq * trace / bound1 if known else None,
    }


__all__ = [
    "CACHED_STRATEGIES",
    "MAX_DENSE_CELLS",
    "STRATEGIES",
    "MatrixMechanism",
    "MatrixVariance",
    "expected_error",
    "make_strategy",
    "row_noise_variance",
]
