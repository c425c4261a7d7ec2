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

from dpcube.errors import DataError, QueryError
from dpcube.histogram import UnitBoundCandidates
from dpcube.mechanisms.base import CheckedRelease, Mechanism, SensitivityClaim
from dpcube.mechanisms.params import ParamSpec
from dpcube.privacy.ledger import BudgetLedger, RequestedTotal
from dpcube.privacy.random import RandomSource
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
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        workload: Any = None,
        mechanisms: Sequence[str] | str | None = None,
        strategies: Sequence[str] | str | None = None,
        neighbour: str = "add_remove",
    ) -> None:
        super().__init__(epsilon, delta, neighbour)
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
        return self.chosen_.charged_delta if self.chosen_ is not None else None

    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        return self.choose(schema)[1].sensitivity_claims(schema)

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
            return adopted
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
