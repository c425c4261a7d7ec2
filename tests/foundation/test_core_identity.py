"""The Identity mechanism: brute-force sensitivity, noise calibration, the Gaussian path."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcube.errors import BudgetError, DataError, ParameterError
from dpcube.histogram import Histogram
from dpcube.mechanisms.identity import Identity
from dpcube.privacy.ledger import BudgetLedger
from dpcube.privacy.random import NO_NOISE
from dpcube.privacy.samplers import (
    discrete_gaussian_variance,
    discrete_laplace_variance,
    gaussian_sigma,
    laplace_scale_rational,
)
from dpcube.release.cells import CellRelease
from dpcube.schema import Schema

SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "a", "kind": "ordinal", "range": [0, 2], "width": 1},
            {"name": "b", "kind": "nominal", "categories": ["x", "y"]},
        ]
    }
)


def neighbours(counts: NDArray[np.int64], notion: str) -> list[NDArray[np.int64]]:
    """All neighbours of a histogram, written out independently of dpcube.testing."""
    flat = counts.ravel()
    out = []
    if notion == "add_remove":
        for i in range(flat.size):
            for step in (1, -1):
                if flat[i] + step >= 0:
                    y = flat.copy()
                    y[i] += step
                    out.append(y.reshape(counts.shape))
    else:
        for i, j in itertools.product(range(flat.size), repeat=2):
            if i != j and flat[i] > 0:
                y = flat.copy()
                y[i] -= 1
                y[j] += 1
                out.append(y.reshape(counts.shape))
    return out


@pytest.mark.parametrize(
    ("notion", "noise", "expected"),
    [
        ("add_remove", "laplace", 1.0),
        ("add_remove", "gaussian", 1.0),
        ("replace", "laplace", 2.0),
        ("replace", "gaussian", math.sqrt(2.0)),
    ],
)
def test_sensitivity_by_brute_force(notion: str, noise: str, expected: float) -> None:
    mech = Identity(1.0, delta=1e-6 if noise == "gaussian" else None, noise=noise, neighbour=notion)
    (claim,) = mech.sensitivity_claims(SCHEMA)
    assert claim.norm == ("l1" if noise == "laplace" else "l2")
    assert claim.declared == pytest.approx(expected)
    order = 1 if claim.norm == "l1" else 2
    worst = 0.0
    for base in (np.zeros(SCHEMA.shape, np.int64), np.arange(6).reshape(SCHEMA.shape)):
        fx = claim.function(base)
        for y in neighbours(base, notion):
            worst = max(worst, float(np.linalg.norm(claim.function(y) - fx, ord=order)))
    assert worst == pytest.approx(expected)  # attained, and never exceeded


@pytest.mark.parametrize(
    ("epsilon", "notion"),
    [(1.0, "add_remove"), (0.3, "add_remove"), (0.5, "replace"), (4.0, "replace")],
)
def test_laplace_scale_is_sensitivity_over_epsilon(epsilon: float, notion: str) -> None:
    hist = Histogram(SCHEMA, np.arange(6).reshape(3, 2))
    r = Identity(epsilon, neighbour=notion).release(hist, random_state=0)
    assert isinstance(r, CellRelease) and r.counts.dtype == np.int64
    delta1 = 1.0 if notion == "add_remove" else 2.0
    t, s = laplace_scale_rational(delta1 / epsilon)
    assert r.metadata.noise["distribution"] == "discrete_laplace"
    assert r.metadata.noise["scale"] == t / s >= delta1 / epsilon
    assert r.metadata.noise["cell_variance"] == pytest.approx(
        float(discrete_laplace_variance(t / s))
    )
    assert r.metadata.sensitivity == {"cells": delta1}
    assert (
        r.metadata.epsilon == epsilon
        and r.metadata.delta is None
        and r.metadata.neighbour == notion
    )


def test_gaussian_needs_delta_and_valid_options() -> None:
    with pytest.raises(BudgetError, match="Gaussian noise needs delta > 0"):
        Identity(1.0, noise="gaussian")
    with pytest.raises(BudgetError, match="Gaussian noise needs delta > 0"):
        Identity(1.0, delta=0.0, noise="gaussian")
    with pytest.raises(ParameterError, match=r"noise='cauchy' .* one of 'laplace', 'gaussian'"):
        Identity(1.0, noise="cauchy")
    with pytest.raises(BudgetError, match="unknown neighbour notion 'bounded'"):
        Identity(1.0, neighbour="bounded")
    with pytest.raises(DataError, match=r"needs a dpcube\.Histogram"):
        Identity(1.0).release(np.zeros((3, 2)))


@pytest.mark.parametrize("notion", ["add_remove", "replace"])
def test_gaussian_calibration(notion: str) -> None:
    hist = Histogram(SCHEMA, np.arange(6).reshape(3, 2))
    epsilon, delta = 0.8, 1e-6
    r = Identity(epsilon, delta=delta, noise="gaussian", neighbour=notion).release(
        hist, random_state=1
    )
    l2 = 1.0 if notion == "add_remove" else math.sqrt(2.0)
    sigma = gaussian_sigma(l2, epsilon, delta)
    noise = r.metadata.noise
    assert noise["distribution"] == "discrete_gaussian"
    assert noise["scale"] >= sigma and noise["scale"] <= sigma * 1.001
    assert noise["cell_variance"] == pytest.approx(
        discrete_gaussian_variance(noise["scale"] ** 2), rel=1e-6
    )
    assert r.metadata.delta == delta
    assert r.variance({"a": [0, 1]}) == pytest.approx(4 * noise["cell_variance"])


def test_gaussian_large_sigma_stays_exact_and_integer() -> None:
    hist = Histogram(SCHEMA, np.arange(6).reshape(3, 2))
    epsilon, delta = 2e-4, 1e-6  # sigma ~ 2.4e4: acceptance tests leave int64 for Python ints
    sigma = gaussian_sigma(1.0, epsilon, delta)
    assert sigma > 4096
    r = Identity(epsilon, delta=delta, noise="gaussian").release(hist, random_state=2)
    assert r.metadata.noise["distribution"] == "discrete_gaussian"
    assert np.asarray(r.counts).dtype == np.int64
    # sigma^2 is only rounded up to an integer: the realised sigma is within 1e-8 of the target.
    assert sigma <= r.metadata.noise["scale"] <= sigma * (1 + 1e-8)
    assert r.metadata.noise["cell_variance"] == pytest.approx(r.metadata.noise["scale"] ** 2)


def test_noiseless_release_is_exact_and_marked(tmp_path: Path) -> None:
    counts = np.arange(6).reshape(3, 2)
    for mech in (Identity(1.0), Identity(1.0, delta=1e-6, noise="gaussian")):
        r = mech.release(Histogram(SCHEMA, counts), random_state=NO_NOISE)
        np.testing.assert_array_equal(np.asarray(r.counts), counts)
        assert r.metadata.noiseless and not r.metadata.for_publication
    ledger = BudgetLedger(tmp_path / "d.ledger")
    ledger.set_total(1.0)
    r = Identity(1.0).release(Histogram(SCHEMA, counts), ledger=ledger)
    assert not r.metadata.seeded and r.metadata.accounted and r.metadata.for_publication
    assert Identity(1.0).release(Histogram(SCHEMA, counts), random_state=3).metadata.seeded


def test_get_params_and_repr() -> None:
    m = Identity(0.5, delta=1e-6, noise="gaussian", neighbour="replace")
    assert m.get_params() == {
        "epsilon": 0.5,
        "delta": 1e-6,
        "noise": "gaussian",
        "neighbour": "replace",
    }
    assert repr(m) == "Identity(epsilon=0.5, delta=1e-06, noise='gaussian', neighbour='replace')"
