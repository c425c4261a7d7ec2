"""The DP data cube mechanism (Ding, Winslett, Han, Li, "Differentially Private Data Cubes:
Optimizing Noise Sources and Consistency", SIGMOD 2011, Secs. 2-6 and 7.2).

Framework K_part (Sec. 3): measure a set L_pre of cuboids (chosen by ``method``), add
independent noise to every cell of each, compute every published cuboid from its least-noisy
measured superset (level-wise, Sec. 3), optionally enforce consistency (Sec. 5).

Privacy. Each record adds 1 to exactly one cell of every cuboid, so the vector of the exact
counts of s cuboids has L1 sensitivity exactly s under ``add_remove`` neighbours; under
``replace`` one cell of each cuboid loses 1 and another gains 1, so it is 2s (attained when the
two records differ on every dimension; a cuboid with a single cell, such as the total, never
changes, so then the bound 2s is safe but not tight). Uniform budgets add discrete Laplace noise of
scale ``Delta / epsilon`` to every cell (epsilon-DP, the discrete Laplace mechanism). Non-uniform
budgets (``budget="optimal"``) measure cuboid j alone with sensitivity 1 (2 under replace) and
budget ``epsilon_j``, ``sum epsilon_j = epsilon`` (sequential composition). Aggregation and
consistency read only the noisy cells: post-processing. With a privacy unit of at most K rows (C
cells, R rows a cell), one unit changes each cuboid by at most min(K, C R) in L1 (its rows, rolled
up: cells of one sign add), so every sensitivity above is multiplied by min(K, C R).

Methods: ``"all"`` (K_all, L_pre = the published cuboids), ``"base"`` (K_base), ``"bmax"``
(Algorithm 1), ``"pmost"`` (Algorithm 2 with ``theta0 = theta0 * theta'``, theta' = BMax's bound).
Consistency: ``None``, ``"l2"`` (exact weighted least squares; BLUE), ``"l1"`` / ``"linf"`` (LPs).
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube.engine import get_engine
from dpcube.errors import DataError
from dpcube.histogram import BoundCandidates, Histogram, contribution_bound
from dpcube.mechanisms.base import Mechanism, SensitivityClaim
from dpcube.mechanisms.datacube.consistency import l2_consistent, l2_variance, lp_consistent
from dpcube.mechanisms.datacube.counting import counts_from_histogram, counts_from_source
from dpcube.mechanisms.datacube.geometry import CubeGeometry
from dpcube.mechanisms.datacube.lattice import Lattice, best_sources, parse_publish, rollup, shape
from dpcube.mechanisms.datacube.measures import MEASURES, SumMeasure
from dpcube.mechanisms.datacube.release import CuboidRelease
from dpcube.mechanisms.datacube.selection import (
    Coverage,
    Selection,
    allocate,
    allocated_bound,
    bound_max_variance,
    optimal_budgets,
    publish_most,
)
from dpcube.mechanisms.params import ParamSpec
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace
from dpcube.privacy.unit import PrivacyUnit
from dpcube.privacy.unit_choice import (
    DEFAULT_SELECTION_SHARE,
    LARGEST_CANDIDATE_BITS,
    UnitSizeBins,
    candidates,
    check_share,
)
from dpcube.release.base import ReleaseMetadata
from dpcube.schema import Schema

METHODS = ("all", "base", "bmax", "pmost")
CONSISTENCY = (None, "l2", "l1", "linf")
BUDGETS = ("uniform", "optimal")


@dataclass(frozen=True)
class CubeSource:
    """A data source (path, DataFrame, Arrow table, relation, :class:`dpcube.SQL`, Spark DataFrame)
    with its schema: :class:`DataCube` counts only the measured cuboids, with GROUPING SETS, in
    ``engine`` (default: Spark for a Spark DataFrame, else DuckDB)."""

    source: Any
    schema: Schema
    on_out_of_domain: str = "error"
    #: The data set's name for its budget ledger (default: the fingerprint of ``source``).
    name: str | None = None
    #: Print the commonest out-of-domain values (private data) in the error message.
    show_values: bool = False
    #: ``"duckdb"``, ``"spark"`` or an :class:`dpcube.engine.Engine` (``None``: by the source).
    engine: Any = None
    #: The column of the privacy unit (a plane, a patient), or a
    #: :class:`~dpcube.privacy.unit.PrivacyUnit`; None: the row. Each unit keeps at most
    #: ``max_rows_per_unit`` rows (and ``max_cells_per_unit`` cells, ``max_rows_per_cell`` rows
    #: a cell), chosen at random in the engine before the cuboids are counted.
    privacy_unit: Any = None
    max_rows_per_unit: int | None = None
    max_cells_per_unit: int | None = None
    max_rows_per_cell: int | None = None
    #: Makes the choice of the kept rows reproducible (tests; default: a fresh random key).
    bounding_seed: int | float | str | None = None

    def __post_init__(self) -> None:
        unit = self.privacy_unit
        if not isinstance(unit, PrivacyUnit):
            unit = PrivacyUnit.parse(
                unit, self.max_rows_per_unit, self.max_cells_per_unit, self.max_rows_per_cell
            )
        object.__setattr__(self, "privacy_unit", unit)

    @property
    def report(self) -> dict[str, Any]:
        return {}

    @property
    def dataset(self) -> str | None:
        """The data set identity that selects the budget ledger (never released)."""
        from dpcube.histogram import data_set_identity

        return data_set_identity(self.source, self.name)


@dataclass(frozen=True)
class CubeBoundCandidates(BoundCandidates):
    """A data source to count at every candidate bound K of a privacy unit, for a data cube whose
    K is chosen privately (``max_rows_per_unit="auto"``, :mod:`dpcube.privacy.unit_choice`):
    ``at_bound[K]`` is the source bounded to K rows per unit (every K with the same key, so the
    kept rows are nested), counted by :meth:`DataCube.prepare` for each K before the charge.
    Build it with :func:`cube_bound_candidates`."""

    at_bound: dict[int, CubeSource]
    unit_sizes: UnitSizeBins
    selection_share: float
    schema: Schema

    @property
    def dataset(self) -> str | None:
        """The data set identity that selects the budget ledger (never released)."""
        return self.at_bound[max(self.at_bound)].dataset


def cube_bound_candidates(
    source: Any,
    schema: Schema,
    privacy_unit: str,
    *,
    on_out_of_domain: str = "error",
    name: str | None = None,
    show_values: bool = False,
    engine: Any = None,
    bounding_seed: int | float | str | None = None,
    selection_share: float = DEFAULT_SELECTION_SHARE,
) -> CubeBoundCandidates:
    """``source`` ready to be counted as a data cube at every candidate bound ``1, 2, 4, ...,
    1024`` rows per unit of the column ``privacy_unit``, with the units' sizes binned by
    ``log2`` in the engine (exact, the curator's only): :meth:`DataCube.release` of the result
    chooses K privately with ``selection_share`` of its epsilon and releases the cube at K.
    ``bounding_seed`` makes the choice of the kept rows reproducible (tests; by default a fresh
    random 128-bit key, one for every candidate)."""
    share = check_share(selection_share)
    if not privacy_unit:
        raise DataError(
            "--max-rows-per-unit auto chooses the rows kept per unit: name the unit's column "
            "with --privacy-unit COLUMN (privacy_unit='COLUMN')"
        )
    PrivacyUnit.parse(privacy_unit, 1)  # the column name, checked
    key = secrets.token_hex(16) if bounding_seed is None else str(bounding_seed)
    bits = LARGEST_CANDIDATE_BITS
    counts, rows = get_engine(engine, source).unit_sizes(source, privacy_unit, bits)
    at_bound = {
        k: CubeSource(
            source,
            schema,
            on_out_of_domain=on_out_of_domain,
            name=name,
            show_values=show_values,
            engine=engine,
            privacy_unit=PrivacyUnit(privacy_unit, k),
            bounding_seed=key,
        )
        for k in candidates(bits)
    }
    return CubeBoundCandidates(at_bound, UnitSizeBins(counts, rows), share, schema)


@dataclass(frozen=True)
class CountedCuboids:
    """The exact counts of the measured cuboids, taken by :meth:`DataCube.prepare` (before any
    charge); only :meth:`DataCube._release` reads them, to add the noise."""

    schema: Schema
    counts: dict[int, NDArray[np.int64]]
    report: dict[str, Any]
    #: The data set identity of the counted input (selects the budget ledger; never released).
    dataset: str | None = None


@dataclass(frozen=True)
class Plan:
    """What a DataCube measures for a schema: independent of the data and of epsilon."""

    geometry: CubeGeometry
    published: tuple[int, ...]
    selection: Selection


def select(
    lattice: Lattice,
    published: list[int],
    method: str,
    theta0: float = 0.5,
    budget: str = "uniform",
) -> Selection:
    """The measured cuboids and budget shares of a method (Sec. 6).

    >>> lat = Lattice((2, 7, 5))
    >>> [lat.label(c) for c in select(lat, list(range(8)), "pmost", theta0=40 / 64).sources]
    ['C111', 'C101']
    """
    if method == "all":  # every cuboid its own source: 2 |L|^2 (Theorem 2)
        n = len(published)
        sel = Selection(
            tuple(published), Fraction(2 * n * n), tuple(Fraction(1, n) for _ in published)
        )
    elif method == "base":  # 2 deg(C) (Theorem 3)
        bound = Fraction(2 * max(lattice.deg(c) for c in published))
        sel = Selection((lattice.base,), bound, (Fraction(1),))
    else:
        bmax = bound_max_variance(lattice, published)
        if method == "bmax":
            if budget == "optimal":
                return optimal_budgets(lattice, published, bmax)
            return bmax
        sel = publish_most(
            lattice, published, Fraction(theta0).limit_denominator(10**6) * bmax.bound_u
        )
        sel.info["theta_prime_u"] = bmax.bound_u
    if budget == "optimal":
        cov = Coverage(lattice, published)
        sources, shares = allocate(cov, sel.sources)
        info = dict(sel.info, uniform_bound_u=sel.bound_u)
        return Selection(
            sources, allocated_bound(cov, sources, shares), shares, sel.theta_star_u, info
        )
    return sel


class DataCube(Mechanism):
    """Differentially private data cube: publish cuboids (marginal count tables).

    >>> from dpcube import Schema, Histogram
    >>> from dpcube.privacy import NO_NOISE
    >>> s = Schema.from_dict({"attributes": [{"name": n, "kind": "nominal", "categories": ["0", "1"]}
    ...                                      for n in "ab"]})
    >>> r = DataCube(1.0, method="bmax", consistency="l2").release(Histogram(s, [[1, 2], [3, 4]]),
    ...                                                              random_state=NO_NOISE)
    >>> r.cuboid(["b"]).tolist(), r.answer({"a": "1"})
    ([4.0, 6.0], 7.0)
    """

    name = "datacube"
    #: Peak memory of a release per cell: 24 to 72 bytes per measured or published cell measured (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 112.0
    neighbours = (Neighbour.ADD_REMOVE, Neighbour.REPLACE)
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("method", "choice", "how the measured cuboids are selected", choices=METHODS),
        ParamSpec(
            "consistency",
            "choice",
            "post-processing that makes the cuboids agree (null or 'none': none)",
            choices=("none", "l2", "l1", "linf"),
            optional=True,
        ),
        ParamSpec(
            "publish",
            "structured",
            "the cuboids to publish: 'all', 'k=K' (1 <= K <= attributes), or groups of "
            "distinct attribute names like 'a,b;b,c'",
            accepts=(str, int, list, tuple),
        ),
        ParamSpec(
            "theta0",
            "float",
            "BMax's bound as a fraction of theta'",
            low=0,
            high=1,
            low_open=True,
        ),
        ParamSpec(
            "budget", "choice", "the split of epsilon over the measured cuboids", choices=BUDGETS
        ),
        ParamSpec("nonnegative", "bool", "clip negative cells to 0 after consistency"),
        ParamSpec("integral", "bool", "round the cells to integers after consistency"),
        ParamSpec(
            "measure", "choice", "what a cell holds: a count or a clipped sum", choices=MEASURES
        ),
        ParamSpec("value", "text", "the summed column (measure='sum' only)", optional=True),
        ParamSpec(
            "bounds",
            "structured",
            "[low, high], the integer clipping range of the summed column (measure='sum' only)",
            optional=True,
            accepts=(list, tuple),
        ),
    )

    def __init__(
        self,
        epsilon: float,
        method: str = "bmax",
        consistency: str | None = None,
        publish: Any = "all",
        neighbour: str = "add_remove",
        theta0: float = 0.5,
        budget: str = "uniform",
        nonnegative: bool = False,
        integral: bool = False,
        measure: str = "count",
        value: str | None = None,
        bounds: Sequence[int] | None = None,
    ) -> None:
        super().__init__(epsilon, None, neighbour)
        #: ``None`` for counts, else the summed column and its clipping bounds (Sec. 7.3).
        self.sum_measure = SumMeasure.build(measure, value, bounds)
        self.measure = measure
        self.value = value
        self.bounds = None if bounds is None else [int(b) for b in bounds]
        if consistency == "none":
            consistency = None
        self.method = method
        self.consistency = consistency
        self.publish = publish
        self.theta0 = float(theta0)
        self.budget = budget
        self.nonnegative = bool(nonnegative)
        self.integral = bool(integral)
        self._plans: dict[str, Plan] = {}

    # -- planning (data independent) -----------------------------------------------------------
    def plan(self, schema: Schema) -> Plan:
        """The published cuboids and the selection for ``schema`` (cached)."""
        key = json.dumps(schema.to_dict(), sort_keys=True)
        if key not in self._plans:
            geo = CubeGeometry(schema)
            published = parse_publish(self.publish, geo.names)
            sel = select(geo.lattice, published, self.method, self.theta0, self.budget)
            self._plans[key] = Plan(geo, tuple(published), sel)
        return self._plans[key]

    def integer_unavailable(self, schema: Schema | None) -> str | None:
        """Why the release cannot be made whole (:meth:`CuboidRelease.to_integer`), known from
        the parameters and the schema before the data is read: a sum measure, or a finest table
        over the published attributes larger than the integer fit holds."""
        from dpcube.release.integer import MAX_FINEST_CELLS, MAX_FITTED_CELLS

        if self.measure != "count":
            return (
                "a sum measure's cells are clipped sums of a column, not counts of records; "
                "whole numbers apply to counts (measure='count')"
            )
        if schema is not None:
            plan = self.plan(schema)
            finest = 0
            for m in plan.published:
                finest |= m
            cells = plan.geometry.lattice.cells(finest)
            if cells > MAX_FINEST_CELLS:
                return (
                    f"the finest table over the published attributes has {cells:,} cells, more "
                    f"than the {MAX_FINEST_CELLS:,} the integer fit holds; publish fewer or "
                    "smaller cuboids"
                )
            if finest not in plan.published and cells > MAX_FITTED_CELLS:
                return (
                    f"the finest table over the published attributes is not published and has "
                    f"{cells:,} cells, more than the {MAX_FITTED_CELLS:,} the least-squares fit "
                    "holds; publish it or fewer attributes"
                )
        return None

    @property
    def unit(self) -> int:
        """L1 sensitivity of one cuboid: 1 (add_remove) or 2 (replace), times Delta =
        max(|low|, |high|) for a sum (Sec. 7.3), times the rows of one privacy unit min(K, C R)
        (a unit's rows change a cuboid's cells by at most their number in L1: a roll-up adds
        cells of the same sign)."""
        count = int(self.histogram_sensitivity("l1"))
        return count * (self.sum_measure.delta if self.sum_measure else 1)

    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        plan = self.plan(schema)
        lat = plan.geometry.lattice
        shape_all = shape(lat, lat.base)

        # For a sum, the histogram's records are taken at the worst-case value Delta (the
        # brute force over records with values is tests/datacube/test_measures.py).
        weight = float(self.sum_measure.delta) if self.sum_measure else 1.0

        def counts_of(masks: tuple[int, ...]) -> Any:
            def function(x: NDArray[np.int64]) -> NDArray[np.float64]:
                base = np.asarray(x).reshape(shape_all)
                return weight * np.concatenate(
                    [rollup(base, lat.base, m).ravel() for m in masks]
                ).astype(np.float64)

            return function

        def tight(masks: tuple[int, ...]) -> bool:
            return self.unit == 1 or all(lat.cells(m) > 1 for m in masks)

        sources = plan.selection.sources
        if self.budget == "uniform":
            return [
                SensitivityClaim(
                    "cuboids",
                    counts_of(sources),
                    "l1",
                    float(self.unit * len(sources)),
                    tight(sources),
                )
            ]
        names = plan.geometry.attributes
        return [
            SensitivityClaim(
                f"cuboid({','.join(names(m))})",
                counts_of((m,)),
                "l1",
                float(self.unit),
                tight((m,)),
            )
            for m in sources
        ]

    # -- input ---------------------------------------------------------------------------------
    def prepare(self, data: Any) -> CountedCuboids:
        """Plan for the data's schema and count the measured cuboids (all before the charge)."""
        if isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], Schema):
            data = CubeSource(data[0], data[1])
        if not isinstance(data, Histogram | CubeSource):
            raise DataError(
                "DataCube.release needs a dpcube.Histogram, a CubeSource(source, schema) or a tuple "
                "(source, schema) of a data source (path, DataFrame, Spark DataFrame) and its schema"
            )
        if self.sum_measure is not None and isinstance(data, Histogram):
            raise DataError(
                f"measure='sum' needs the records to sum column {self.sum_measure.column!r}: pass "
                "CubeSource(source, schema) or (source, schema), not a Histogram of counts"
            )
        plan = self.plan(data.schema)
        true, report = self._true_counts(data, plan)
        return CountedCuboids(data.schema, true, report, data.dataset)

    def materialised_cells(self, data: Any) -> float:
        """The cells of the measured and the published cuboids (never the base cuboid unless
        one of them is)."""
        plan = self.plan(data.schema)
        lattice = plan.geometry.lattice
        cuboids = set(plan.selection.sources) | set(plan.published)
        return sum(float(np.prod(shape(lattice, c), dtype=np.float64)) for c in cuboids)

    def noise_per_row(self, data: Any) -> float:
        """The noise per row of the bound K for the choice of K (:mod:`dpcube.privacy.unit_choice`,
        step 4), from the cube's own per-cuboid noise: a dropped row lowers one cell of every
        published cuboid, so each cuboid's bias adds up to the rows dropped, against its noise
        summed over its cells, ``cells(C) sqrt(v(C))`` with ``v(C)`` the per-cell variance of
        the K_part estimate of C at K = 1 (eq. 2 of Ding et al., :func:`best_sources`, from
        measured cuboids of per-cell variance ``2 b^2``, b the discrete Laplace scale of
        :func:`measure` at one row per unit; L2 consistency only lowers it). The figure is the
        mean over the published cuboids (the total error over them is their number times the
        bias plus K times their summed noise, minimised by the same K). A sum measure's noise is
        taken in rows (divided by its Delta, a dropped row's largest bias)."""
        plan = self.plan(data.schema)
        sel = plan.selection
        lattice = plan.geometry.lattice
        per_row = int(Neighbour.parse(self.neighbour) is Neighbour.REPLACE) + 1
        variances = {
            m: Fraction(2.0 * cell_scale(per_row, sel, share, self.epsilon, self.budget) ** 2)
            for m, share in zip(sel.sources, sel.shares, strict=True)
        }
        best = best_sources(lattice, variances, plan.published)
        noise = [lattice.cells(m) * math.sqrt(float(best[m][0])) for m in plan.published]
        return sum(noise) / len(noise)

    def noise_support(self, data: Any) -> float:
        """One neighbour changes one cell of each measured cuboid (a unit: at most its cells;
        integer noise, no snapping)."""
        return float(len(self.plan(data.schema).selection.sources) * self.privacy_unit.cells)

    def _true_counts(
        self, data: Histogram | CubeSource, plan: Plan
    ) -> tuple[dict[int, NDArray[np.int64]], dict[str, Any]]:
        sources = list(plan.selection.sources)
        if isinstance(data, Histogram):
            return counts_from_histogram(plan.geometry, data, sources), dict(data.report)
        return counts_from_source(
            plan.geometry,
            data.source,
            sources,
            data.on_out_of_domain,
            self.sum_measure,
            show_values=data.show_values,
            engine=data.engine,
            bound=contribution_bound(data.privacy_unit, data.bounding_seed),
        )

    # -- releasing -----------------------------------------------------------------------------
    def _release(
        self, data: CountedCuboids, source: RandomSource, metadata: ReleaseMetadata
    ) -> CuboidRelease:
        plan = self.plan(data.schema)
        sel = plan.selection
        true = data.counts
        noisy, variances, scales = measure(true, sel, self.epsilon, self.unit, self.budget, source)
        est = estimate(
            plan.geometry.lattice,
            noisy,
            variances,
            list(plan.published),
            self.consistency,
            self.nonnegative,
        )
        cuboids, cell_var, mode = est.cuboids, est.cell_variances, est.mode
        if self.nonnegative or self.integral:
            cuboids = {
                m: postprocess(a, self.nonnegative, self.integral) for m, a in cuboids.items()
            }
            cell_var = {m: float("nan") for m in cuboids}
            mode = "unknown"
        names = plan.geometry.attributes
        metadata.noise = {
            "distribution": "discrete_laplace",
            "measured": [list(names(m)) for m in sel.sources],
            "scales": [scales[m] for m in sel.sources],
            "cell_variances": [variances[m] for m in sel.sources],
            "budget_shares": [float(s) for s in sel.shares],
            "selection_bound_theta_eps2": float(sel.bound_u),
            "consistency": self.consistency,
        }
        if self.sum_measure is not None:
            m = self.sum_measure
            metadata.noise["measure"] = {
                "kind": "sum",
                "column": m.column,
                "bounds": [m.low, m.high],
                "sensitivity_per_cuboid": self.unit,
            }
        return CuboidRelease(
            data.schema,
            metadata,
            cuboids,
            sel.sources,
            [variances[m] for m in sel.sources],
            cell_var,
            mode,
            max(est.bounds.values()),
        )

    # -- conformance -----------------------------------------------------------------------------
    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        schema = Schema.from_dict(
            {
                "attributes": [
                    {"name": "a", "kind": "ordinal", "range": [0, 2], "width": 1},
                    {"name": "b", "kind": "nominal", "categories": ["x", "y"]},
                    {"name": "c", "kind": "nominal", "hierarchy": {"p": ["p1", "p2"], "q": None}},
                ]
            }
        )
        queries: list[dict[str, Any]] = [
            {},
            {"a": [0, 1]},
            {"b": "y"},
            {"a": [1, 2], "c": "p"},
            {"a": [2, 2], "b": "x", "c": "q"},
        ]
        pair: list[dict[str, Any]] = [{}, {"a": [0, 1]}, {"a": [1, 1], "b": "y"}, {"b": "x"}]
        return [
            Case("datacube-bmax", schema, lambda n: cls(1.0, neighbour=n), queries),
            Case(
                "datacube-all-l2",
                schema,
                lambda n: cls(2.0, method="all", consistency="l2", neighbour=n),
                queries,
            ),
            Case(
                "datacube-pmost-l2",
                schema,
                lambda n: cls(1.0, method="pmost", consistency="l2", neighbour=n),
                queries,
            ),
            Case("datacube-base", schema, lambda n: cls(0.5, method="base", neighbour=n), queries),
            Case(
                "datacube-bmax-l1",
                schema,
                lambda n: cls(1.0, consistency="l1", neighbour=n),
                queries,
            ),
            Case(
                "datacube-bmax-linf",
                schema,
                lambda n: cls(1.0, consistency="linf", neighbour=n),
                queries,
            ),
            Case(
                "datacube-k1-optimal",
                schema,
                lambda n: cls(
                    1.0,
                    publish=[("a", "b"), ("b",), ()],
                    budget="optimal",
                    consistency="l2",
                    neighbour=n,
                ),
                pair,
            ),
        ]


def postprocess(
    array: NDArray[np.float64], nonnegative: bool, integral: bool
) -> NDArray[np.float64]:
    """Optional post-processing after consistency (off by default: the paper's L2 optimality and
    unbiasedness need real values): clamp at 0, then round to integers.

    Both keep the guarantee (they read only released values) but make the estimate biased, break
    exact consistency (except LP non-negativity, which is a constraint of the LP) and make the
    variance unknown.

    >>> postprocess(np.array([-1.4, 2.6]), True, True).tolist()
    [0.0, 3.0]
    """
    out = np.maximum(array, 0.0) if nonnegative else array
    return np.rint(out) if integral else out


def measure(
    true: dict[int, NDArray[np.int64]],
    selection: Selection,
    epsilon: float,
    unit: int,
    budget: str,
    source: RandomSource,
) -> tuple[dict[int, NDArray[np.int64]], dict[int, float], dict[int, float]]:
    """Noise on every cell of every measured cuboid (K_part, first loop; Sec. 3).

    Uniform budgets: discrete Laplace of scale ``unit * s / epsilon`` on every cell (sensitivity
    ``unit * s``, ``unit`` = 1 or 2 by neighbour notion). Non-uniform: scale ``unit / epsilon_j``
    with ``epsilon_j = share_j * epsilon``. Returns the noisy cuboids, their exact per-cell noise
    variances and the realised scales.
    """
    noisy: dict[int, NDArray[np.int64]] = {}
    variances: dict[int, float] = {}
    scales: dict[int, float] = {}
    for mask, share in zip(selection.sources, selection.shares, strict=True):
        scale = cell_scale(unit, selection, share, epsilon, budget)
        noisy[mask], draw = add_discrete_laplace(true[mask], scale, source)
        variances[mask] = float(draw.variance)
        scales[mask] = float(draw.scale)
    return noisy, variances, scales


def cell_scale(
    unit: int, selection: Selection, share: Fraction, epsilon: float, budget: str
) -> float:
    """The discrete Laplace scale on every cell of a measured cuboid of budget ``share``
    (:func:`measure`):
    ``unit * s / epsilon`` for uniform budgets over s cuboids, ``unit / (share * epsilon)``
    otherwise."""
    if budget == "uniform":
        return unit * len(selection.sources) / epsilon
    return unit / (epsilon * float(share))


@dataclass(frozen=True)
class Estimate:
    """Published cuboids (lattice layout), their per-cell variances, the variance model, and the
    per-cell variance of the inconsistent K_part estimate (``bounds``, eq. 2)."""

    cuboids: dict[int, NDArray[np.float64]]
    cell_variances: dict[int, float]
    mode: str
    bounds: dict[int, float]


def estimate(
    lattice: Lattice,
    noisy: dict[int, NDArray[np.int64]],
    variances: dict[int, float],
    published: list[int],
    consistency: str | None,
    nonnegative: bool = False,
) -> Estimate:
    """The published cuboids from the noisy measured ones: K_part aggregation (no consistency),
    L2 consistency with weights ``1 / Var`` (exact variances), or the L1 / L-infinity LPs."""
    best = best_sources(lattice, {m: Fraction(v) for m, v in variances.items()}, published)
    bounds = {m: float(best[m][0]) for m in published}
    if consistency is None:
        return Estimate(aggregate(noisy, best, published), dict(bounds), "sources", bounds)
    weights = {m: 1.0 / v for m, v in variances.items()}
    if consistency == "l2":
        cuboids = l2_consistent(lattice, noisy, weights, published)
        return Estimate(
            cuboids, {m: l2_variance(lattice, weights, m) for m in published}, "l2", bounds
        )
    cuboids = lp_consistent(lattice, noisy, weights, published, consistency, nonnegative)
    return Estimate(cuboids, {m: float("nan") for m in published}, "unknown", bounds)


def aggregate(
    noisy: dict[int, NDArray[np.int64]], best: dict[int, tuple[Fraction, int]], published: list[int]
) -> dict[int, NDArray[np.float64]]:
    """K_part aggregation (Sec. 3): each cuboid summed (exactly, in integers) from the parent the
    level-wise programme :func:`best_sources` chose."""
    memo: dict[int, NDArray[np.int64]] = dict(noisy)

    def compute(mask: int) -> NDArray[np.int64]:
        if mask not in memo:
            parent = best[mask][1]
            memo[mask] = np.asarray(rollup(compute(parent), parent, mask))
        return memo[mask]

    return {m: compute(m).astype(np.float64) for m in published}
