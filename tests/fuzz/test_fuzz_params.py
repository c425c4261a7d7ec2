"""Property: whatever the parameters, a release either is refused in one line with nothing
charged, or is released and charged once.

For every registered mechanism, random values (inside and outside each declared domain, the
bounds and their neighbours, huge and non-finite numbers, junk types) are drawn for a random
subset of its parameters; the mechanism is built and released on a tiny histogram of its first
conformance case with a fresh ledger. Allowed: the constructor refuses with a one-line
:class:`DPCubeError`; the release refuses with a one-line :class:`DPCubeError` and the ledger has
no charge; or the release succeeds with exactly one charge. Anything else (another exception, a
refusal after the charge, a release that runs past :data:`RUN_LIMIT_S`) fails the property.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_harness import cases
from hypothesis import event, given, settings
from hypothesis import strategies as st

from dpcube import registry
from dpcube.errors import DPCubeError
from dpcube.mechanisms.conformance import tiny_histograms
from dpcube.privacy.ledger import BudgetLedger

NAMES = sorted(registry.MECHANISMS)
#: Seconds one construction or release may take on the tiny inputs (they take milliseconds; a
#: parameter that makes a release run away, e.g. a search of a billion steps, hits this).
RUN_LIMIT_S = 20

#: Values of the parameters whose domain is checked against the schema (``structured``), some
#: valid on the conformance schemas and some not.
STRUCTURED: dict[str, list[Any]] = {
    "workload": ["allrange", "marginals:1", "upto:1", "no-such-workload:3", "", 7, []],
    "strategy": ["identity", "wavelet", "hierarchical", "lsa", "no-such", 7, {}],
    "publish": ["all", "k=1", "k=0", "k=99", "k=-1", "a", ";", "a,a", [], 3, -1, [["a", "a"]]],
    "bounds": [[0, 5], [5, 0], [1], "x", [0.5, 2]],
}
#: Junk tried for every parameter.
JUNK: list[Any] = [None, True, "text", "", [], {}, [1, 2], -1, 0, 1e300, -1e300, 2**70]


class RanAway(Exception):
    """A construction or release ran past :data:`RUN_LIMIT_S`."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def stop(signum: int, frame: Any) -> None:
        raise RanAway(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def mechanism_class(name: str) -> Any:
    return registry.resolve(registry.MECHANISMS, name, "mechanism")


def declared_values(cls: Any, param: str) -> tuple[list[Any], list[Any]]:
    """The declared spec's (inside, outside) examples (none where nothing is declared)."""
    specs = getattr(cls, "param_spec_map", None)
    spec = specs().get(param) if callable(specs) else None
    if spec is None:
        return [], []
    inside, outside = spec.examples()
    return list(inside), list(outside)


@st.composite
def configurations(draw: Any) -> tuple[str, dict[str, Any], float | None]:
    """A mechanism and values for a random third of its parameters: half of them inside the
    declared domain (where one is declared), the rest outside it, junk, or any number."""
    name = draw(st.sampled_from(NAMES))
    cls = mechanism_class(name)
    params: dict[str, Any] = {}
    for param in cls.accepted_params():
        if draw(st.integers(0, 2)) != 0:
            continue
        inside, outside = declared_values(cls, param)
        structured = STRUCTURED.get(param, [])
        anything = st.one_of(
            st.sampled_from(outside + structured + JUNK),
            st.integers(-(2**70), 2**70),
            st.floats(allow_nan=True, allow_infinity=True),
        )
        good = inside + structured
        params[param] = draw(st.one_of(st.sampled_from(good), anything) if good else anything)
    takes_delta = "delta" in inspect.signature(cls.__init__).parameters
    delta = draw(st.sampled_from([None, 1e-6])) if takes_delta else None
    return name, params, delta


def one_line(exc: BaseException) -> bool:
    text = str(exc)
    return bool(text.strip()) and "\n" not in text.strip()


def check_release(name: str, params: dict[str, Any], delta: float | None) -> str:
    """The outcome ('refused by the constructor', 'refused before the charge', 'released'), or
    an AssertionError saying what broke the property."""
    cls = mechanism_class(name)
    case = cls.conformance_cases()[0]
    data = case.prepare(tiny_histograms(case.schema)[2])
    privacy: dict[str, Any] = {"epsilon": 1.0}
    if delta is not None:
        privacy["delta"] = delta
    label = f"{name} {params!r}"
    try:
        with time_limit(RUN_LIMIT_S):
            mechanism = cls(**privacy, **params)
    except DPCubeError as exc:
        assert one_line(exc), f"{label}: a refusal of more than one line: {exc!r}"
        return "refused by the constructor"
    except Exception as exc:  # a crash, or a run-away construction
        raise AssertionError(
            f"{label}: the constructor raised {type(exc).__name__}: {exc}"
        ) from exc
    with tempfile.TemporaryDirectory() as tmp:
        ledger = BudgetLedger(Path(tmp) / "fuzz.ledger")
        ledger.set_total(1000.0, 0.5)
        try:
            with time_limit(RUN_LIMIT_S):
                mechanism.release(data, random_state=0, ledger=ledger)
        except DPCubeError as exc:
            charged = ledger.charges()
            assert not charged, f"{label}: refused after the charge ({exc}); charged {charged}"
            assert one_line(exc), f"{label}: a refusal of more than one line: {exc!r}"
            return "refused before the charge"
        except Exception as exc:
            charged = "charged" if ledger.charges() else "nothing charged"
            raise AssertionError(
                f"{label}: release raised {type(exc).__name__} ({charged}): {exc}"
            ) from exc
        assert len(ledger.charges()) == 1, f"{label}: released with {ledger.charges()}"
    return "released"


@settings(max_examples=cases(400))
@given(configurations())
def test_random_parameters_are_refused_before_the_charge_or_released(
    configuration: tuple[str, dict[str, Any], float | None],
) -> None:
    name, params, delta = configuration
    event(f"{name}: {check_release(name, params, delta)}")


#: Values an adversarial pass found released without error, crashing after the charge, or
#: running until killed; each must now be refused before the charge.
FOUND: list[tuple[str, dict[str, Any]]] = [
    ("ug", {"c": -1}),
    ("ug", {"c": 0}),
    ("ug", {"grid_size": 0}),
    ("htf", {"c0": 0}),
    ("htf", {"T": 1_000_000_000}),
    ("htf", {"T": 0}),
    ("htf", {"eps_level": 1e9}),
    ("htf", {"theta_count": -5}),
    ("htf", {"theta_cells": -1}),
    ("privtree", {"theta": -3}),
    ("ag", {"c": -1}),
    ("kdtree", {"median_share": 1.0}),
    ("quadtree", {"height": -1}),
    ("datacube", {"publish": "k=0"}),
    ("datacube", {"theta0": math.inf}),
    ("privelet-plus", {"plain_attributes": "a,a"}),
    ("datacube", {"publish": "a,a;b"}),
    ("census-hierarchy", {"domain_c": -1.0}),
    ("census-hierarchy", {"qp_time_limit": 0.0}),
    ("matrix", {"branching": 1}),
    ("identity", {"noise": "cauchy"}),
    # found by the property itself
    ("kdtree", {"median_share": 1e-21}),
    ("datacube", {"publish": [1, 2]}),
    ("htf", {"eps_level": 1e-300}),
    ("privtree", {"tree_share": 1e-300}),
]


@pytest.mark.parametrize(("name", "params"), FOUND, ids=[f"{n}-{p}" for n, p in FOUND])
def test_found_values_are_refused_before_the_charge(name: str, params: dict[str, Any]) -> None:
    outcome = check_release(name, params, None)
    assert outcome != "released", f"{name} {params}: released"


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_is_declared_and_its_examples_agree(name: str) -> None:
    """Every ``--param`` name has a declaration; each declared example inside the domain passes
    its check and each outside one is refused with a one-line ParameterError naming it."""
    from dpcube.errors import ParameterError

    cls = mechanism_class(name)
    declared = cls.param_spec_map()
    assert set(cls.accepted_params()) <= set(declared), name
    for spec in cls.parameters():
        inside, outside = spec.examples()
        for value in inside:
            spec.check(name, value)
        for value in outside:
            with pytest.raises(ParameterError, match=rf"^{name}: parameter {spec.name}="):
                spec.check(name, value)
