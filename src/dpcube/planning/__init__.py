"""Planning: which mechanism answers a workload best, and what epsilon a target error needs —
before seeing any data and without spending any budget (see ``docs/planning.md``).

``dpcube.plan(schema, workload, epsilon, delta)`` is :func:`plan_mechanisms` over every mechanism.
"""

from __future__ import annotations

from dpcube.planning.plan import Candidate, MechanismPlan, plan_mechanisms

__all__ = ["Candidate", "MechanismPlan", "plan_mechanisms"]
