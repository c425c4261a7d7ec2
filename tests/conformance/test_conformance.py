"""Every registered mechanism passes every check of the conformance suite."""

from __future__ import annotations

import pytest

from dpcube import registry
from dpcube.mechanisms.conformance import CHECKS, Case

MECHANISMS = {
    name: registry.resolve(registry.MECHANISMS, name, "mechanism")
    for name in sorted(registry.MECHANISMS)
}
CASES: list[Case] = [case for cls in MECHANISMS.values() for case in cls.conformance_cases()]


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_every_mechanism_has_cases(name: str) -> None:
    assert MECHANISMS[name].conformance_cases(), f"{name} declares no conformance cases"


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance(case: Case, check: str) -> None:
    CHECKS[check](case)
