"""Planning: which mechanism answers a workload best, and what epsilon a target error needs —
before seeing any data and without spending any budget (see ``docs/planning.md``).

``dpcube.plan(schema, workload, epsilon, delta)`` is :func:`plan_mechanisms` over every mechanism.
"""

from __future__ import annotations

from typing import Any

from dpcube.planning.plan import Candidate, MechanismPlan, plan_mechanisms


def __getattr__(name: str) -> Any:
    # AutoMechanism imports the mechanism base (and the release stack): loaded on first use
    if name in ("AutoMechanism", "auto_mechanism"):
        from dpcube.planning import auto

        return getattr(auto, name)
    raise AttributeError(f"module 'dpcube.planning' has no attribute {name!r}")


__all__ = ["AutoMechanism", "Candidate", "MechanismPlan", "auto_mechanism", "plan_mechanisms"]
