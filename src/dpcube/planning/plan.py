"""One planner over every mechanism: the expected error of each candidate on a workload, the
recommended one and why — without reading any data and without spending any budget.

What is asked (a workload over a schema, :mod:`dpcube.planning.workload`) is kept apart from how it
could be answered (the candidates, :mod:`dpcube.planning.candidates`). Every candidate says how its
figure was obtained (``basis``):

- ``"exact"``: the expected total squared error over the workload of a release at this epsilon
  (and delta), with the variance the release's samplers really have (snapped / discrete), computed
  from the schema and the workload alone;
- ``"benchmark"``: a data-dependent mechanism (census M_DP / M_CDP, the spatial trees and grids):
  its error depends on the data, so ``expected_error`` is NaN and ``benchmark`` holds a figure from
  a public benchmark run (a docs page and the command that produced it), on a different metric;
- ``"not-applicable"``: the mechanism cannot answer this workload on this schema (``note`` says
  why).

The recommendation is the exact candidate of least expected error; benchmark candidates are never
compared with exact ones as if their figures were exact errors (``reason`` says what was compared).
Only when no candidate is exact (group-size tables) is one recommended from benchmark figures, and
``reason`` says so.

>>> from dpcube import Schema
>>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 15], "width": 1}]})
>>> p = plan_mechanisms(s, "allrange:16", 1.0, mechanisms=["identity", "privelet"])
>>> [c.label for c in p.candidates], p.recommended.label     # on 16 cells, no wavelet gain
(['identity(laplace)', 'privelet'], 'identity(laplace)')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dpcube import registry
from dpcube.errors import BudgetError, QueryError
from dpcube.planning.candidate import BASES as BASES
from dpcube.planning.candidate import Candidate as Candidate
from dpcube.privacy.ledger import validate_privacy
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.unit import ROW, PrivacyUnit
from dpcube.schema import Schema

#: Largest noise scale (sensitivity / epsilon) the releases accept (``mechanisms.base``).
MAX_NOISE_SCALE = 2.0**40


@dataclass
class MechanismPlan:
    """The candidates (exact ones by increasing error, then benchmark, then not applicable), the
    recommended one and why."""

    workload: str
    queries: int
    cells: int
    epsilon: float
    delta: float | None
    neighbour: str
    candidates: list[Candidate]
    recommended: Candidate
    reason: str
    #: The unit every candidate protects (:mod:`dpcube.privacy.unit`): its errors are at that
    #: unit's sensitivity.
    privacy_unit: PrivacyUnit = ROW
    #: The matrix-mechanism strategy plan (``mechanisms.matrix.plan.plan``'s output: svdb, the
    #: Gaussian optimum with delta, nominal errors), when the matrix mechanism was compared.
    matrix: dict[str, Any] | None = None

    def exact(self) -> list[Candidate]:
        return [c for c in self.candidates if c.basis == "exact"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "queries": self.queries,
            "cells": self.cells,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "neighbour": self.neighbour,
            "privacy_unit": self.privacy_unit.manifest(),
            "candidates": [c.to_dict() for c in self.candidates],
            "recommended": self.recommended.label,
            "recommended_mechanism": self.recommended.mechanism,
            "reason": self.reason,
            "data_read": False,
            "budget_spent": 0.0,
            **({"matrix": self.matrix} if self.matrix is not None else {}),
        }


def _order(c: Candidate) -> tuple[int, float]:
    rank = BASES.index(c.basis)
    return (rank, c.expected_error if c.basis == "exact" else 0.0)


def recommend(candidates: Sequence[Candidate]) -> tuple[Candidate, str]:
    """The exact candidate of least expected error, and the reason in words."""
    exact = sorted((c for c in candidates if c.basis == "exact"), key=_order)
    bench = [c for c in candidates if c.basis == "benchmark"]
    if exact:
        best = exact[0]
        reason = (
            f"{best.label} has the least expected total squared error ({best.expected_error:.4g}) "
            f"of the {len(exact)} mechanisms whose error was computed exactly from the schema and "
            "the workload"
        )
        if len(exact) > 1:
            second = exact[1]
            ratio = second.expected_error / best.expected_error if best.expected_error else math.inf
            if ratio < 1.0005:
                reason += f"; {second.label} ties with it"
            else:
                reason += f"; the next, {second.label}, is {ratio:.3g}x larger"
        if bench:
            names = ", ".join(c.label for c in bench)
            reason += (
                f". Not compared: {names}, whose error depends on the data (their figures come "
                "from public benchmark runs on other data, in another metric); choosing among them "
                "for this data would need the data, i.e. a private selection that costs budget"
            )
        return best, reason + "."
    if bench:
        best = min(bench, key=lambda c: (c.benchmark or {}).get("rank", math.inf))
        figure = best.benchmark or {}
        reason = (
            f"no mechanism's error can be computed before seeing the data; {best.label} is "
            f"recommended from a public benchmark figure only ({figure.get('metric', '')} "
            f"{figure.get('value', '')} on {figure.get('data', '')}, {figure.get('source', '')}), "
            "not from an exact error on this data"
        )
        return best, reason + "."
    notes = "; ".join(f"{c.label}: {c.note}" for c in candidates)
    raise QueryError(f"no mechanism applies to this workload and schema ({notes})")


def plan_mechanisms(
    schema: Schema,
    workload: Any,
    epsilon: float,
    delta: float | None = None,
    *,
    mechanisms: Sequence[str] | None = None,
    neighbour: str = "add_remove",
    strategies: Sequence[str] | None = None,
    privacy_unit: PrivacyUnit = ROW,
) -> MechanismPlan:
    """Compare every mechanism whose error on ``workload`` can be computed before seeing the data.

    ``workload``: a spec string, a query file, a list of query dicts or a
    :class:`~dpcube.workloads.Workload` (see :mod:`dpcube.planning.workload`).
    ``mechanisms``: registry names to consider (default: all). ``neighbour``: the neighbour notion
    every candidate is calibrated to (the same for all, so the errors are comparable).
    ``strategies``: the matrix-mechanism strategies to try (default: every applicable one).
    ``privacy_unit``: the unit to protect (:class:`~dpcube.privacy.unit.PrivacyUnit`; the row by
    default): each error is that of a release at the unit's sensitivity (K rows per unit, or
    the L2 figure of a per-cell bound for Gaussian noise). Reads no data and charges no ledger.
    """
    from dpcube.planning import candidates as cands
    from dpcube.planning.workload import GROUP_SIZES, resolve_planning_workload

    validate_privacy(epsilon, delta)
    if 1.0 / epsilon > MAX_NOISE_SCALE:
        raise BudgetError(
            f"epsilon={epsilon:g} is too small: a noise scale of 1/epsilon beyond 2**40 drowns "
            "every count and the exact samplers refuse it; use a larger epsilon"
        )
    delta = None if delta is None or delta == 0 else float(delta)
    neighbour = Neighbour.parse(neighbour).value
    wanted = list(mechanisms) if mechanisms is not None else None
    if wanted is not None:
        unknown = [m for m in wanted if m not in registry.MECHANISMS]
        if unknown:
            raise QueryError(
                f"unknown mechanism {unknown[0]!r}; known: {', '.join(sorted(registry.MECHANISMS))}"
            )
    if isinstance(workload, str) and workload.strip().lower() == GROUP_SIZES:
        if not privacy_unit.is_row:
            from dpcube.mechanisms.census.table import UNIT_REFUSAL

            raise QueryError(f"group-size tables: {UNIT_REFUSAL}")
        found = cands.census_candidates(epsilon, delta, neighbour, wanted)
        found += cands.unlisted_candidates(
            found,
            wanted,
            group_sizes=True,
            axes=0,
            epsilon=epsilon,
            delta=delta,
            neighbour=neighbour,
        )
        best, reason = recommend(found)
        return MechanismPlan(GROUP_SIZES, 0, 0, epsilon, delta, neighbour, found, best, reason)
    w = resolve_planning_workload(workload, schema)
    report: dict[str, Any] = {}
    found = cands.all_candidates(
        schema, w, epsilon, delta, neighbour, wanted, strategies, report, privacy_unit
    )
    found += cands.unlisted_candidates(
        found,
        wanted,
        group_sizes=False,
        axes=len(w.dims),
        epsilon=epsilon,
        delta=delta,
        neighbour=neighbour,
        privacy_unit=privacy_unit,
    )
    found.sort(key=_order)
    best, reason = recommend(found)
    return MechanismPlan(
        w.name,
        w.size,
        w.n,
        epsilon,
        delta,
        neighbour,
        found,
        best,
        reason,
        matrix=report.get("matrix"),
        privacy_unit=privacy_unit,
    )


def plan(
    schema: Schema, workload: Any, epsilon: float, delta: float | None = None
) -> MechanismPlan:
    """``dpcube.plan``: :func:`plan_mechanisms` over every mechanism."""
    return plan_mechanisms(schema, workload, epsilon, delta)


__all__ = ["BASES", "Candidate", "MechanismPlan", "plan", "plan_mechanisms", "recommend"]
