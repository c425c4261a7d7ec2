"""``--mechanism auto``: release with the mechanism the planner recommends for a workload.

The plan (:func:`~dpcube.planning.plan.plan_mechanisms`) is made from the schema of the input
and the workload alone, before anything is charged; the chosen mechanism then runs the usual
release template (one charge, then noise), and the plan (candidates, errors, basis, reason) is
recorded in the manifest's metadata (``report["plan"]``). With a privacy unit (the input's
bound, or ``privacy_unit=``) the plan compares the errors at that unit's sensitivities and the
chosen mechanism protects it. Only mechanisms whose error was computed
exactly are chosen: a plan whose recommendation rests on benchmark figures (census group-size
tables) is refused, with the recommended mechanism to name explicitly.

>>> from dpcube import Schema, Histogram
>>> from dpcube.privacy import NO_NOISE
>>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 7], "width": 1}]})
>>> auto = AutoMechanism(1.0, workload="prefix:8", mechanisms=["identity", "privelet"])
>>> r = auto.release(Histogram(s, [1, 2, 3, 4, 5, 6, 7, 8]), random_state=NO_NOISE)
>>> r.metadata.mechanism, r.metadata.report["plan"]["recommended"], r.answer({"x": [0, 2]})
('identity', 'identity(laplace)', 6.0)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from dpcube.errors import BudgetError, DataError, DPCubeError, QueryError, SpentBudgetError
from dpcube.histogram import Histogram, UnitBoundCandidates
from dpcube.mechanisms.base import (
    CheckedRelease,
    Mechanism,
    SensitivityClaim,
    check_share_scale,
)
from dpcube.mechanisms.params import ParamSpec
from dpcube.planning.pythia import (
    DEFAULT_SELECTION_SHARE,
    FEATURES,
    SelectionRule,
    exact_features,
    feature_sensitivity,
    noisy_features,
    rule_inputs,
)
from dpcube.privacy.accounting import charge_release
from dpcube.privacy.ledger import BudgetLedger, RequestedTotal
from dpcube.privacy.random import RandomSource, resolve_random_state
from dpcube.privacy.unit import ROW
from dpcube.release.base import Release, ReleaseMetadata
from dpcube.schema import Schema
from dpcube.workloads import Workload


def _names(value: Sequence[str] | str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(value)


class AutoMechanism(Mechanism):
    """The planner's recommended mechanism for ``workload`` (configuration only in the
    constructor, as in scikit-learn; the plan is made per schema at release time, from the schema
    alone). After a release, ``plan_`` and ``chosen_`` hold the last plan and mechanism.

    ``workload``: required (a spec, a query file, a list of query dicts or a Workload).
    ``mechanisms``: registry names to choose from (default: all). ``strategies``: matrix
    strategies to try (default: all applicable).
    """

    name = "auto"
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "workload",
            "structured",
            "the workload to choose for (required): allrange, marginals:2, upto:2 or a query file",
            optional=True,
            accepts=(str, Path, list, Workload),
        ),
        ParamSpec(
            "mechanisms",
            "names",
            "registered mechanisms to choose from; null: all",
            optional=True,
        ),
        ParamSpec(
            "strategies",
            "names",
            "matrix strategies to try; null: all applicable",
            optional=True,
        ),
        ParamSpec(
            "adaptive",
            "bool",
            "choose from noisy features of the data (Pythia) instead of the schema alone",
        ),
        ParamSpec(
            "selection_epsilon",
            "float",
            "the part of epsilon spent on the features (adaptive only); null: 5 % of epsilon",
            optional=True,
            low=0.0,
            low_open=True,
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        workload: Any = None,
        mechanisms: Sequence[str] | str | None = None,
        strategies: Sequence[str] | str | None = None,
        neighbour: str = "add_remove",
        adaptive: bool = False,
        selection_epsilon: float | None = None,
    ) -> None:
        super().__init__(epsilon, delta, neighbour)
        if selection_epsilon is not None and not adaptive:
            raise QueryError(
                "selection_epsilon is the budget of the adaptive choice: give adaptive=True "
                "(--adaptive) with it, or leave it out"
            )
        if selection_epsilon is not None and not 0 < selection_epsilon < epsilon:
            raise BudgetError(
                f"selection_epsilon={selection_epsilon:g} must lie strictly between 0 and "
                f"epsilon={epsilon:g} (the rest releases the data); the default is "
                f"{DEFAULT_SELECTION_SHARE:.0%} of epsilon"
            )
        if workload is None or (isinstance(workload, str) and not workload.strip()):
            raise QueryError(
                "mechanism 'auto' needs a workload to choose for: give --workload (e.g. "
                "allrange, marginals:2, upto:2 or a query file) or workload=... in Python"
            )
        self.workload = workload
        self.mechanisms = _names(mechanisms)
        self.strategies = _names(strategies)
        self._plans: dict[str, tuple[Any, Mechanism]] = {}
        self.plan_: Any = None
        self.chosen_: Mechanism | None = None
        self.adaptive = bool(adaptive)
        self.selection_epsilon = selection_epsilon
        #: After an adaptive release: the features' noisy values, the rule and the choice.
        self.selection_: dict[str, Any] | None = None

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        to_dict = getattr(self.workload, "to_dict", None)
        if callable(to_dict):
            params["workload"] = to_dict()
        return params

    # -- the plan (schema and workload only) ---------------------------------------------------
    def choose(self, schema: Schema) -> tuple[Any, Mechanism]:
        """The plan for ``schema`` and the recommended mechanism, built (cached per schema)."""
        from dpcube.planning.plan import plan_mechanisms

        key = json.dumps(
            [schema.to_dict(), self.privacy_unit.manifest()], sort_keys=True, default=str
        )
        if key not in self._plans:
            if self.mechanisms is not None and "auto" in self.mechanisms:
                raise QueryError("mechanism 'auto' cannot choose itself")
            plan = plan_mechanisms(
                schema,
                self.workload,
                self.epsilon,
                self.delta,
                mechanisms=[m for m in self.mechanisms] if self.mechanisms else None,
                neighbour=self.neighbour,
                strategies=list(self.strategies) if self.strategies else None,
                privacy_unit=self.privacy_unit,
            )
            best = plan.recommended
            if best.basis != "exact":
                raise QueryError(
                    f"mechanism 'auto' chooses only among mechanisms whose error is known before "
                    f"seeing the data; here {plan.reason} Name it explicitly: --mechanism "
                    f"{best.mechanism}"
                )
            self._plans[key] = (plan, best.build())
        self.plan_, self.chosen_ = self._plans[key]
        return self._plans[key]

    @property
    def charged_delta(self) -> float | None:
        if self.adaptive:
            return self._adaptive_delta
        return self.chosen_.charged_delta if self.chosen_ is not None else None

    _adaptive_delta: float | None = None

    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        if self.adaptive:
            return [self.feature_claim()]
        return self.choose(schema)[1].sensitivity_claims(schema)

    # -- the adaptive choice (Pythia) ----------------------------------------------------------
    @property
    def selection_budget(self) -> float:
        """The part of epsilon spent on the noisy features (adaptive releases)."""
        if self.selection_epsilon is not None:
            return float(self.selection_epsilon)
        return DEFAULT_SELECTION_SHARE * self.epsilon

    def feature_claim(self) -> SensitivityClaim:
        """The features' measurement (:func:`~dpcube.planning.pythia.exact_features`) and its L1
        sensitivity, ``3 x`` the histogram's under this unit and neighbour notion (each feature
        is 1-Lipschitz in L1; a bound, attained under add_remove of one row)."""
        return SensitivityClaim(
            "selection_features",
            lambda counts: exact_features(counts).astype(float),
            "l1",
            feature_sensitivity(self.histogram_sensitivity("l1")),
            tight=self.neighbour == "add_remove" and self.privacy_unit.rows == 1,
        )

    def arms(
        self, schema: Schema, rule: SelectionRule, refused: dict[str, str] | None = None
    ) -> list[Mechanism]:
        """The mechanisms the rule may choose for ``schema``, each built with the release's part
        of the budget: those registered, among ``mechanisms`` when given, and supporting the
        neighbour notion and unit (the rest are left out, so the rule works with whatever is
        registered; ``refused`` collects why a registered one could not be built)."""
        from dpcube.registry import MECHANISMS, resolve

        rest = self.epsilon - self.selection_budget
        built: list[Mechanism] = []
        for name in rule.arms(len(schema.shape)):
            if name not in MECHANISMS or (self.mechanisms and name not in self.mechanisms):
                continue
            cls = resolve(MECHANISMS, name, "mechanism")
            options: dict[str, Any] = {"neighbour": self.neighbour}
            if "workload" in cls.accepted_params():
                options["workload"] = self.workload
            if self.delta is not None:
                options["delta"] = self.delta
            try:
                mech = cls(rest, **options)
                built.append(mech.with_unit(self.privacy_unit))
            except DPCubeError as exc:
                if refused is not None:
                    refused[name] = str(exc).splitlines()[0]
        return built

    def _adaptive_release(
        self,
        data: Any,
        random_state: Any,
        ledger: BudgetLedger | None,
        account: bool,
        requested_total: RequestedTotal | None,
    ) -> Release:
        if isinstance(data, UnitBoundCandidates):
            raise DataError(
                "auto --adaptive needs a histogram counted at a fixed bound per unit; it does not "
                "combine with a bound chosen by the release (max_rows_per_unit='auto'): give "
                "--max-rows-per-unit K, or drop --adaptive"
            )
        if not isinstance(data, Histogram):
            raise DataError(
                "auto --adaptive needs a dpcube.Histogram; build one with "
                "dpcube.histogram(source, schema)"
            )
        schema = data.schema
        rule = SelectionRule.shipped()
        check_share_scale(
            "auto --adaptive",
            f"selection_epsilon={self.selection_budget:g}",
            self.feature_claim().declared,
            self.selection_budget,
        )
        # -- every candidate checked on this input before the charge ---------------------------
        ready: dict[str, tuple[Mechanism, Any]] = {}
        refused: dict[str, str] = {}
        for mech in self.arms(schema, rule, refused):
            try:
                prepared = mech.prepare(data)
                mech.check_noise_scale(prepared)
                mech.validate(prepared)
                mech.check_resources(prepared)
            except DPCubeError as exc:
                refused[mech.name] = str(exc).splitlines()[0]
                continue
            ready[mech.name] = (mech, prepared)
        if not ready:
            raise QueryError(
                "auto --adaptive: no mechanism of the selection rule applies to this input ("
                + "; ".join(f"{k}: {v}" for k, v in refused.items())
                + "); name one with --mechanism"
            )
        deltas = [m.charged_delta for m, _ in ready.values() if m.charged_delta is not None]
        self._adaptive_delta = max(deltas) if deltas else None
        source = resolve_random_state(random_state)
        charged = self.metadata(data, source)
        # -- the one charge, for the features and the release together -------------------------
        charge_release(
            self,
            data,
            charged,
            ledger=ledger,
            account=account,
            seeded=source.seeded or source.noiseless,
            requested_total=requested_total,
        )
        try:
            features = noisy_features(
                data.counts, self.selection_budget, self.histogram_sensitivity("l1"), source
            )
            rest = self.epsilon - self.selection_budget
            inputs = rule_inputs(features, int(np.prod(schema.shape)), rest)
            ranking = rule.rank(len(schema.shape), inputs)
            name = next((m for m in ranking if m in ready), next(iter(ready)))
            chosen, prepared = ready[name]
            metadata = chosen.metadata(prepared, source)
            metadata.release_id = charged.release_id
            metadata.accounted = charged.accounted
            metadata.epsilon = self.epsilon
            metadata.delta = self.charged_delta
            metadata.sensitivity = {
                c.name: c.declared
                for c in [self.feature_claim(), *chosen.sensitivity_claims(schema)]
            }
            release = chosen._release(prepared, source, metadata)
        except Exception as exc:
            spent = "charged" if account else "not charged (account=False)"
            raise SpentBudgetError(
                f"auto --adaptive: the release failed after its budget was {spent} "
                f"(epsilon={self.epsilon:g}); nothing was released or written: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from exc
        self.chosen_ = chosen
        self.selection_ = {
            "rule": {"name": rule.name, "version": rule.version},
            "selection_epsilon": self.selection_budget,
            "selection_share": self.selection_budget / self.epsilon,
            "release_epsilon": rest,
            "features": {k: features[k] for k in FEATURES},
            "feature_sensitivity": self.feature_claim().declared,
            "noise": "discrete_laplace",
            "rule_inputs": {k: round(v, 6) for k, v in inputs.items()},
            "ranking": ranking,
            "candidates": sorted(ready),
            # the names only: a refusal's message may quote the input (it goes to the curator log)
            "not_applicable": sorted(refused),
            "chosen": name,
        }
        release.metadata.report["selected_by"] = "auto --adaptive"
        release.metadata.report["selection"] = self.selection_
        log = dict(getattr(prepared, "report", {}) or {})
        log.update(release.curator_log)
        if refused:
            log["auto_adaptive_not_applicable"] = refused
        release.curator_log = log
        return release

    # -- releasing -----------------------------------------------------------------------------
    def release(
        self,
        data: Any,
        random_state: Any = None,
        *,
        ledger: BudgetLedger | None = None,
        account: bool = True,
        requested_total: RequestedTotal | None = None,
    ) -> Release:
        """Plan from ``data``'s schema (no counts read), then release with the chosen mechanism
        (its template charges once) and record the plan in the metadata. The plan is made for
        the privacy unit the input was bounded for (:meth:`Mechanism.unit_for`); for an input
        whose bound the release chooses (:class:`~dpcube.histogram.UnitBoundCandidates`), for
        the row: without cell bounds a unit of K rows has L1 and L2 sensitivity K, every
        candidate's noise is K times the row's, so the ranking of the mechanisms is the same at
        every K; the chosen one chooses K."""
        unit = ROW if isinstance(data, UnitBoundCandidates) else self.unit_for(data)
        if unit != self.privacy_unit:
            twin = self.with_unit(unit)
            adopted = twin.release(
                data,
                random_state,
                ledger=ledger,
                account=account,
                requested_total=requested_total,
            )
            self.plan_, self.chosen_ = twin.plan_, twin.chosen_
            self.selection_ = twin.selection_
            return adopted
        if self.adaptive:
            return self._adaptive_release(data, random_state, ledger, account, requested_total)
        schema = getattr(data, "schema", None)
        if not isinstance(schema, Schema):
            raise DataError(
                "AutoMechanism.release needs a dpcube.Histogram (or an input with a schema); "
                "build one with dpcube.histogram(source, schema)"
            )
        plan, chosen = self.choose(schema)
        release = chosen.release(
            data, random_state, ledger=ledger, account=account, requested_total=requested_total
        )
        release.metadata.report["selected_by"] = "auto"
        release.metadata.report["plan"] = plan.to_dict()
        return release

    def check_release(self, data: Any, random_state: Any = None) -> CheckedRelease:
        """Plan from ``data``'s schema, then the chosen mechanism's checks (nothing charged); the
        plan is recorded in the metadata, as :meth:`release` does."""
        if self.adaptive:
            raise QueryError(
                "auto --adaptive chooses its mechanism after the charge, from noisy features of "
                "the data, so it cannot be checked ahead as one table of a publication; name the "
                "mechanism (or use plain auto) for this table"
            )
        unit = self.unit_for(data)
        if unit != self.privacy_unit:
            twin = self.with_unit(unit)
            checked = twin.check_release(data, random_state)
            self.plan_, self.chosen_ = twin.plan_, twin.chosen_
            return checked
        schema = getattr(data, "schema", None)
        if not isinstance(schema, Schema):
            raise DataError(
                "AutoMechanism.release needs a dpcube.Histogram (or an input with a schema); "
                "build one with dpcube.histogram(source, schema)"
            )
        plan, chosen = self.choose(schema)
        checked = chosen.check_release(data, random_state)
        checked.metadata.report["selected_by"] = "auto"
        checked.metadata.report["plan"] = plan.to_dict()
        return checked

    def _release(self, data: Any, source: RandomSource, metadata: ReleaseMetadata) -> Release:
        raise NotImplementedError("AutoMechanism.release delegates to the chosen mechanism")

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import MIXED_QUERIES, Case, mixed_schema

        four = Schema.from_dict(
            {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 3], "width": 1}]}
        )
        q = [{}, {"x": [0, 1]}, {"x": [1, 3]}, {"x": [2, 2]}]
        return [
            Case("auto-allrange", four, lambda n: cls(1.0, workload="allrange", neighbour=n), q),
            Case(
                "auto-adaptive",
                four,
                lambda n: cls(1.0, workload="allrange", adaptive=True, neighbour=n),
                (),  # the chosen mechanism may be data-dependent: no exact noiseless answers
            ),
            Case(
                "auto-upto-mixed",
                mixed_schema(),
                lambda n: cls(
                    1.0,
                    workload="upto:1",
                    mechanisms=["identity", "privelet", "privelet-plus"],
                    neighbour=n,
                ),
                MIXED_QUERIES,
            ),
        ]


def auto_mechanism(
    schema: Schema,
    workload: Any,
    epsilon: float,
    delta: float | None = None,
    **options: Any,
) -> AutoMechanism:
    """An :class:`AutoMechanism` already planned for ``schema`` (``.plan_``, ``.chosen_``), ready
    to ``release`` a histogram of that schema. ``options``: ``mechanisms``, ``strategies``,
    ``neighbour``."""
    mech = AutoMechanism(epsilon, delta, workload=workload, **options)
    mech.choose(schema)
    return mech


__all__ = ["AutoMechanism", "auto_mechanism"]
