"""One way to answer a workload (:class:`Candidate`), as the planner weighs and builds it."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dpcube import registry
from dpcube.errors import QueryError
from dpcube.privacy.unit import ROW, PrivacyUnit
from dpcube.workloads import Workload

BASES = ("exact", "benchmark", "not-applicable")


@dataclass
class Candidate:
    """One way to answer the workload: a registry mechanism and its constructor parameters.

    ``expected_error``: total squared error over the workload's queries (basis ``"exact"``), NaN
    otherwise. ``benchmark``: for basis ``"benchmark"``, the public figure (metric, value, data,
    epsilon, source page, command). For the inverse question (:mod:`dpcube.planning.inverse`):
    ``error_at(epsilon)``, the exact error at another epsilon (same delta); ``tail``, the noise
    family of an answer (``"laplace"``: combinations of continuous Laplace draws,
    ``"discrete-laplace"``, ``"normal"``: continuous Gaussian, ``"subgaussian"``: discrete
    Gaussian); ``spread_at(epsilon, aggregate)``, when given, the (standard deviation of the
    dominating continuous noise, lattice margin) of the ``"max"`` or ``"mean"`` query.
    """

    mechanism: str
    params: dict[str, Any]
    expected_error: float
    basis: str
    note: str = ""
    epsilon: float = 1.0
    delta: float | None = None
    neighbour: str = "add_remove"
    #: The privacy unit every sensitivity of the candidate is computed for (the row by default).
    privacy_unit: PrivacyUnit = ROW
    label: str = ""
    benchmark: dict[str, Any] | None = None
    max_query_variance: float | None = None
    tail: str = ""
    error_at: Callable[[float], float] | None = field(default=None, repr=False, compare=False)
    spread_at: Callable[[float, str], tuple[float, float]] | None = field(
        default=None, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.basis not in BASES:
            raise ValueError(f"basis must be one of {BASES}, got {self.basis!r}")
        if not self.label:
            self.label = self.mechanism

    def build(self) -> Any:
        """The configured mechanism at the plan's epsilon, delta and neighbour notion."""
        if self.basis == "not-applicable":
            raise QueryError(f"{self.label} does not apply here: {self.note}")
        cls = registry.resolve(registry.MECHANISMS, self.mechanism, "mechanism")
        accepted = inspect.signature(cls.__init__).parameters
        kwargs: dict[str, Any] = {"epsilon": self.epsilon, "neighbour": self.neighbour}
        if "delta" in accepted:
            kwargs["delta"] = self.delta
        kwargs.update(self.params)
        if not self.privacy_unit.is_row:
            kwargs["privacy_unit"] = self.privacy_unit
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        params = {
            k: (v.to_dict() if isinstance(v, Workload) else v) for k, v in self.params.items()
        }
        out: dict[str, Any] = {
            "label": self.label,
            "mechanism": self.mechanism,
            "params": params,
            "expected_error": None if math.isnan(self.expected_error) else self.expected_error,
            "basis": self.basis,
            "note": self.note,
        }
        if self.max_query_variance is not None:
            out["max_query_variance"] = self.max_query_variance
        if self.benchmark is not None:
            out["benchmark"] = self.benchmark
        return out
