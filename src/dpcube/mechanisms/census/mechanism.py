"""CensusHierarchy: consistent, valid, faithful group-size releases (Fioretto, Van Hentenryck, Zhu,
Artificial Intelligence 296, 2021).

``method`` picks the mechanism of the paper's Secs. 5-9 or its TopDown baseline (all share the
budget split epsilon / L):

=============  ==================  ================================  =========
method         noise               post-processing                   exact?
=============  ==================  ================================  =========
``dp``         n^r, Delta 2        M_DP tree DP + slope merge        Model 1
``cdp``        see ``noise_mode``  M_CDP chain (corrected rule)      Model 3
``cdp_approx`` Gamma(n^r), Delta 1 isotonic + round, then M_DP       approx.
``qp``         n^r, Delta 2        relaxed Model 1 QP, rint          no (#CV)
``qp_cumulative`` Gamma(n^r)       relaxed Model 2 QP, rint          no (#CV)
``qip``        n^r, Delta 2        M_H: Model 1 as a HiGHS MIP       Model 1*
``qip_cumulative`` Gamma(n^r)      M_C: Model 2 as a HiGHS MIP       Model 2*
``topdown``    n^r, Delta 2        TopDown (Sec. 11)                 feasible
=============  ==================  ================================  =========

The relaxed QPs run on ``qp_solver`` (``clarabel``, interior point, stopping tolerance
``qp_tolerance``; or ``highs``, active set); their status, tolerance and continuous objective are
in the release's ``noise`` metadata. (*) The exact programs (:mod:`dpcube.mechanisms.census.exact`)
linearise the square exactly inside the same window as ``dp`` (round(y) +- half-width, a
relaxation outside it) and stop at ``qp_time_limit`` with the best integer solution found (never worse than the TopDown warm
start); ``mip_certified`` in the metadata says whether it is proven optimal.

The privacy story (neighbours, sensitivities, noise modes) is in
:mod:`dpcube.mechanisms.census.privacy`. The unit protected is one person (one row) joining or
leaving a group; a privacy unit of several rows is refused (:data:`~dpcube.mechanisms.census.table.UNIT_REFUSAL`). ``noise_mode="as_published"`` is the paper's M_CDP noise
as printed and is NOT epsilon-DP; its releases say so in their metadata and report, and it
cannot be charged to a budget ledger.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import BudgetError, DataError
from dpcube.histogram import Histogram
from dpcube.mechanisms.base import Mechanism, SensitivityClaim
from dpcube.mechanisms.census import privacy as P
from dpcube.mechanisms.census.baselines import (
    DEFAULT_QP_TOLERANCE,
    QP_SOLVERS,
    relaxed_cumulative,
    relaxed_hierarchical,
    topdown,
)
from dpcube.mechanisms.census.chain import (
    chain_isotonic,
    chain_objective,
    counts_from_levels,
    level_chain_values,
)
from dpcube.mechanisms.census.cumulative import approx_counts, gamma
from dpcube.mechanisms.census.dp import noise_half_width, solve_tree, tail_half_width
from dpcube.mechanisms.census.exact import exact_cumulative, exact_hierarchical
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.release import CensusRelease
from dpcube.mechanisms.census.table import UNIT_REFUSAL, GroupSizeTable
from dpcube.mechanisms.params import ParamSpec
from dpcube.privacy.ledger import BudgetLedger, RequestedTotal
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import RandomSource
from dpcube.release.base import Release, ReleaseMetadata
from dpcube.schema import Nominal, Schema

METHODS = ("dp", "cdp", "cdp_approx", "qp", "qp_cumulative", "qip", "qip_cumulative", "topdown")
#: The methods that measure the group-size vectors n^r themselves (sensitivity 2 per person).
GROUP_SIZE_METHODS = ("dp", "qp", "qip", "topdown")
#: Why a table without a declared G is refused, and how to declare it (one line).
MISSING_DECLARATION = (
    "census-hierarchy releases the number of groups G exactly (every level sums to it), so it "
    "must be public and only the curator can say so: declare it with --public-groups G "
    "(checked against the data) or --groups-are-public (in Python: group_sizes(..., "
    "public_groups=G or True) or table.declare_public_groups())"
)
#: Top code of the tiny "units histogram" form used by the conformance suite (see units_table).
UNITS_MAX_SIZE = 3


def qp_info(qp: Any) -> dict[str, Any]:
    """What a release records of its relaxed program (all computed from the noisy values only)."""
    return {
        "solver": qp.solver,
        "solver_status": qp.status,
        "solver_tolerance": qp.tolerance,
        "solver_seconds": qp.seconds,
        "relaxed_objective": qp.objective,
    }


def mip_info(mip: Any) -> dict[str, Any]:
    """What a release records of its exact program (from the noisy values only)."""
    return {
        "solver": "highs-mip",
        "solver_status": mip.status,
        "solver_seconds": mip.seconds,
        "objective": mip.objective,
        "mip_bound": mip.bound,
        "mip_certified": mip.certified,
    }


def units_table(
    schema: Schema, counts: NDArray[Any], max_size: int = UNITS_MAX_SIZE
) -> GroupSizeTable:
    """A group-size table from a histogram over units (the conformance suite's tiny form).

    The schema has one nominal attribute whose hierarchy is nation -> ... -> leaf region -> unit;
    each unit's count is the number of its members besides a public reference person, so the
    group size is min(1 + count, max_size) (top-coded). Adding or removing one histogram record is
    then exactly the census neighbour: one individual joins or leaves an existing group.
    """
    attr = next(
        (a for a in schema.attributes if isinstance(a, Nominal) and a.hierarchy is not None), None
    )
    if attr is None or attr.hierarchy is None:
        raise DataError(
            "a units histogram needs a nominal attribute whose hierarchy is regions -> units"
        )
    tree = attr.hierarchy
    parents: dict[str, str | None] = {tree.root: None}
    unit_region: dict[str, str] = {}
    for parent, kids in tree.children.items():
        for kid in kids:
            if kid in tree.children:
                parents[kid] = parent
            else:
                unit_region[kid] = parent
    h = RegionHierarchy.from_parents(parents)
    sizes = np.minimum(1 + np.asarray(counts, dtype=np.int64).ravel(), max_size)
    leaf = np.zeros((h.level_sizes[-1], max_size), dtype=np.int64)
    start = h.leaves.start
    for unit, size in zip(attr.categories, sizes, strict=True):
        leaf[h.index[unit_region[unit]] - start, size - 1] += 1
    table = GroupSizeTable(h, h.aggregate(leaf), top_coded=True)
    # The units are listed in the (public) schema, so G is public by the schema itself.
    return table.declare_public_groups(
        declared_by="schema", how="the units listed in the schema's hierarchy"
    )


#: Largest half-width of the dp solver's window (its tables hold about 2 w + 1 entries a node).
_MAX_WINDOW = 10**7


class CensusHierarchy(Mechanism):
    """Group-size counts for every region of a hierarchy, integer, consistent and faithful.

    >>> from dpcube.privacy import NO_NOISE
    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> t = GroupSizeTable(h, h.aggregate(np.array([[2, 0, 1], [1, 1, 1]])), public_groups=True)
    >>> r = CensusHierarchy(1.0, method="dp").release(t, random_state=NO_NOISE)
    >>> r.answer({"region": "GA", "size": [1, 2]}), r.answer({})
    (2.0, 6.0)
    """

    name = "census-hierarchy"
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec("method", "choice", "the estimator of the hierarchy's counts", choices=METHODS),
        ParamSpec(
            "noise_mode",
            "choice",
            "how the noise is calibrated and published (method='cdp' only)",
            choices=P.NOISE_MODES,
        ),
        ParamSpec(
            "half_width",
            "int",
            "half-width of the integer search window per count; null: from domain_c",
            low=1,
            high=2**31,
            optional=True,
        ),
        ParamSpec(
            "domain_c",
            "float",
            "the search window in noise standard deviations (when half_width is null)",
            low=0,
            high=1000,
            low_open=True,
        ),
        ParamSpec(
            "qp_time_limit",
            "float",
            "seconds the QP/QIP solver may run before the best solution found is kept",
            low=0,
            high=7 * 24 * 3600,
            low_open=True,
        ),
        ParamSpec("qp_solver", "choice", "the QP solver", choices=QP_SOLVERS),
        ParamSpec(
            "qp_tolerance",
            "float",
            "the QP solver's relative tolerance",
            low=0,
            high=1,
            low_open=True,
            high_open=True,
        ),
    )
    neighbours = (Neighbour.ADD_REMOVE, Neighbour.REPLACE)
    unit_refusal = UNIT_REFUSAL

    def __init__(
        self,
        epsilon: float,
        method: str = "cdp",
        noise_mode: str = "private_postprocessed",
        neighbour: str = "add_remove",
        half_width: int | None = None,
        domain_c: float = 3.0,
        qp_time_limit: float = 1800.0,
        qp_solver: str = "clarabel",
        qp_tolerance: float = DEFAULT_QP_TOLERANCE,
    ) -> None:
        super().__init__(epsilon, None, neighbour)
        self.method = method
        self.noise_mode = noise_mode
        if noise_mode != "private_postprocessed" and method != "cdp":
            raise BudgetError(f"noise_mode={noise_mode!r} applies to method='cdp' only")
        self.half_width = half_width
        self.domain_c = float(domain_c)
        self.qp_time_limit = float(qp_time_limit)
        self.qp_solver = qp_solver
        self.qp_tolerance = float(qp_tolerance)

    # -- privacy -------------------------------------------------------------------------------
    def _measurements(self, level_sizes: tuple[int, ...]) -> list[dict[str, Any]]:
        return list(
            P.accounting(self.method, self.noise_mode, self.epsilon, level_sizes, self.neighbour)[
                "levels"
            ]
        )

    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        """Per level, the measurement the noise is drawn on, over a units histogram (:func:`units_table`)."""
        h = units_table(schema, np.zeros(schema.shape, np.int64)).hierarchy
        claims = []
        for m in self._measurements(h.level_sizes):
            level, meas = int(m["level"]), str(m["measurement"])

            def f(
                x: NDArray[np.int64], level: int = level, meas: str = meas
            ) -> NDArray[np.float64]:
                t = units_table(schema, x)
                if meas == "group_sizes":
                    v = t.counts[t.hierarchy.level_slice(level)]
                elif meas == "cumulative":
                    v = gamma(t.counts[t.hierarchy.level_slice(level)])
                else:
                    v = level_chain_values(t.hierarchy, t.counts)[level - 1]
                return np.asarray(v, dtype=np.float64).ravel()

            claims.append(
                SensitivityClaim(f"level{level}_{meas}", f, "l1", float(m["sensitivity"]))
            )
        return claims

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import Case

        schema = Schema.from_dict(
            {
                "attributes": [
                    {
                        "name": "unit",
                        "kind": "nominal",
                        "hierarchy": {
                            "GA": {"G1": ["u1", "u2"], "G2": ["u3"]},
                            "NY": {"N1": ["u4", "u5", "u6"]},
                        },
                    }
                ]
            }
        )
        queries: list[dict[str, Any]] = [
            {},
            {"region": "GA", "size": [1, 2]},
            {"region": "N1", "size": 3},
            {"region": "G2"},
            {"region": "*", "size": [2, 3]},
        ]

        def truth(hist: Histogram, qs: Any) -> NDArray[np.float64]:
            t = units_table(hist.schema, hist.counts)
            cum = np.concatenate(
                [np.zeros((t.hierarchy.size, 1), np.int64), np.cumsum(t.counts, axis=1)], axis=1
            )
            out = []
            for q in qs:
                r = t.hierarchy.region_index(q.get("region", "*"))
                size = q.get("size", [1, UNITS_MAX_SIZE])
                lo, hi = (size, size) if isinstance(size, int) else size
                out.append(cum[r, hi] - cum[r, lo - 1])
            return np.array(out, dtype=np.float64)

        def prepare(hist: Histogram) -> GroupSizeTable:
            return units_table(hist.schema, hist.counts)

        def _maker(method: str) -> Callable[[str], CensusHierarchy]:
            return lambda n: cls(0.5, method=method, neighbour=n)

        cases = []
        for method in (
            "dp",
            "cdp",
            "cdp_approx",
            "topdown",
            "qp",
            "qp_cumulative",
            "qip",
            "qip_cumulative",
        ):
            cases.append(
                Case(
                    f"census-{method}",
                    schema,
                    _maker(method),
                    queries,
                    prepare=prepare,
                    truth=truth,
                )
            )
        cases.append(
            Case(
                "census-cdp-calibrated",
                schema,
                lambda n: cls(0.5, method="cdp", noise_mode="private_calibrated", neighbour=n),
                queries,
                prepare=prepare,
                truth=truth,
            )
        )
        return cases

    # -- releasing ------------------------------------------------------------------------------
    def prepare(self, data: Any) -> GroupSizeTable:
        if not isinstance(data, GroupSizeTable):
            raise DataError(
                "CensusHierarchy.release needs a dpcube.GroupSizeTable; build one with "
                "dpcube.group_sizes(source, unit=..., region=..., hierarchy=..., max_size=k)"
            )
        return data

    def release(
        self,
        data: Any,
        random_state: Any = None,
        *,
        ledger: BudgetLedger | None = None,
        account: bool = True,
        requested_total: RequestedTotal | None = None,
    ) -> Release:
        if self.noise_mode == "as_published":
            if ledger is not None or (account and random_state is None):
                raise BudgetError(
                    "noise_mode='as_published' is not epsilon-DP (Sec. 9.2 misses the chain's "
                    "sensitivity) and cannot be charged "
                    "to a ledger; release it with account=False (never for publication)"
                )
        return super().release(
            data, random_state, ledger=ledger, account=account, requested_total=requested_total
        )

    def validate(self, data: GroupSizeTable) -> None:
        """Checked before the charge: G was declared public; a table whose units were given one
        region (``region_of_unit``) goes to a group-size method; the dp solver's window fits in
        memory (it grows as 1/epsilon)."""
        if not data.groups_declared:
            raise DataError(MISSING_DECLARATION)
        if data.region_of_unit is not None and self.method not in GROUP_SIZE_METHODS:
            raise BudgetError(
                f"census-hierarchy: units given one region by region_of_unit="
                f"{data.region_of_unit!r} can move a whole group between regions when one "
                "person joins, which changes up to 2k - 1 cumulative counts, beyond the sensitivity "
                f"method={self.method!r} is calibrated to; use method dp, qp, qip or topdown "
                "(--param method=dp), whose group-size counts still change by at most 2 per "
                "person, or fix the data"
            )
        if self.method != "dp":
            return
        h, k = data.hierarchy, data.max_size
        alpha = math.exp(-self.epsilon / (h.levels * P.vector_sensitivity(self.neighbour)))
        window = self._window(alpha, h.size * k) if alpha < 1 else _MAX_WINDOW + 1
        if window > _MAX_WINDOW:
            raise BudgetError(
                f"census-hierarchy: epsilon={self.epsilon:g} needs a dp window of {window} counts "
                f"(at most {_MAX_WINDOW} fit in memory); raise epsilon or use method='cdp'"
            )

    def _window(self, alpha: float, nodes: int) -> int:
        if self.half_width is not None:
            return int(self.half_width)
        return max(noise_half_width(alpha, self.domain_c), tail_half_width(alpha, nodes))

    def _release(
        self, data: GroupSizeTable, source: RandomSource, metadata: ReleaseMetadata
    ) -> CensusRelease:
        h, G = data.hierarchy, data.groups
        L, k = h.levels, data.max_size
        acct = P.accounting(
            self.method, self.noise_mode, self.epsilon, h.level_sizes, self.neighbour
        )
        info: dict[str, Any] = {}
        measured: NDArray[np.int64] | None = None  # kept with the release (its DP output)
        t0 = time.perf_counter()
        if self.method in ("dp", "qp", "qip", "topdown"):
            noisy, info = P.noisy_counts(data, self.epsilon, source, self.neighbour)
            measured = noisy
            t1 = time.perf_counter()
            if self.method == "dp":
                alpha = math.exp(-self.epsilon / (L * P.vector_sensitivity(self.neighbour)))
                sol = solve_tree(h, noisy, G, self._window(alpha, h.size * k))
                values, info["objective"], info["half_width"] = (
                    sol.values,
                    sol.objective,
                    sol.half_width,
                )
            elif self.method == "qp":
                values, qp = relaxed_hierarchical(
                    h,
                    noisy.astype(np.float64),
                    G,
                    self.qp_time_limit,
                    self.qp_solver,
                    self.qp_tolerance,
                )
                info.update(qp_info(qp))
            elif self.method == "qip":
                alpha = math.exp(-self.epsilon / (L * P.vector_sensitivity(self.neighbour)))
                values, mip = exact_hierarchical(
                    h,
                    noisy.astype(np.float64),
                    G,
                    self.qp_time_limit,
                    self._window(alpha, h.size * k),
                )
                info.update(mip_info(mip))
            else:
                values = topdown(h, noisy.astype(np.float64), G)
        elif self.method in ("cdp_approx", "qp_cumulative", "qip_cumulative"):
            cum, info = P.noisy_cumulative(data, self.epsilon, source, self.neighbour)
            measured = cum
            t1 = time.perf_counter()
            if self.method == "cdp_approx":
                alpha = math.exp(-self.epsilon / (L * P.cumulative_sensitivity(self.neighbour)))
                sol = solve_tree(
                    h, approx_counts(cum.astype(np.float64)), G, self._window(alpha, h.size * k)
                )
                values, info["objective"], info["half_width"] = (
                    sol.values,
                    sol.objective,
                    sol.half_width,
                )
            elif self.method == "qip_cumulative":
                alpha = math.exp(-self.epsilon / (L * P.cumulative_sensitivity(self.neighbour)))
                values, mip = exact_cumulative(
                    h,
                    cum.astype(np.float64),
                    G,
                    self.qp_time_limit,
                    self._window(alpha, h.size * k),
                )
                info.update(mip_info(mip))
            else:
                values, qp = relaxed_cumulative(
                    h,
                    cum.astype(np.float64),
                    G,
                    self.qp_time_limit,
                    self.qp_solver,
                    self.qp_tolerance,
                )
                info.update(qp_info(qp))
        else:
            if self.noise_mode == "private_postprocessed":
                # P.noisy_chain's own steps, keeping the cumulative measurements it derives from
                measured, info = P.noisy_cumulative(data, self.epsilon, source, self.neighbour)
                chain = P.chain_from_cumulative(h, measured)
            else:
                chain, info = P.noisy_chain(
                    data, self.epsilon, source, self.neighbour, self.noise_mode
                )
            t1 = time.perf_counter()
            levels = chain_isotonic(h, chain, G)
            values = counts_from_levels(h, levels)
            info["objective"] = chain_objective(levels, chain)
        t2 = time.perf_counter()
        info.update(
            distribution="discrete_laplace",
            noise_mode=self.noise_mode,
            private=acct["private"],
            epsilon_spent=acct["epsilon_spent"],
            noise_seconds=t1 - t0,
            postprocess_seconds=t2 - t1,
        )
        metadata.noise = {
            key: (v if not isinstance(v, np.ndarray) else v.tolist()) for key, v in info.items()
        }
        metadata.sensitivity = {
            f"level{m['level']}_{m['measurement']}": float(m["sensitivity"]) for m in acct["levels"]
        }
        metadata.declared_public = [dict(d) for d in data.declared_public]
        if not acct["private"]:
            metadata.report["WARNING"] = (
                f"NOT epsilon-DP: noise_mode='as_published' spends epsilon = {acct['epsilon_spent']:.6g}, not {self.epsilon}"
            )
        return CensusRelease(
            metadata,
            h,
            values,
            G,
            private=bool(acct["private"]),
            top_coded=data.top_coded,
            measurements=measured,
            unit=data.unit,
        )
