"""The planner, plan --target-error and --mechanism auto at a privacy unit's sensitivity."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpcube import Histogram, Schema
from dpcube.cli.main import main
from dpcube.planning.auto import AutoMechanism
from dpcube.planning.plan import plan_mechanisms
from dpcube.privacy.unit import PrivacyUnit

SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "x", "kind": "ordinal", "range": [0, 7], "width": 1},
            {"name": "y", "kind": "nominal", "categories": ["a", "b", "c"]},
        ]
    }
)


def _errors(
    unit: PrivacyUnit, delta: float | None = None, epsilon: float = 1.0
) -> dict[str, float]:
    plan = plan_mechanisms(SCHEMA, "marginals:1", epsilon, delta, privacy_unit=unit)
    return {c.label: c.expected_error for c in plan.candidates if c.basis == "exact"}


def test_errors_are_those_at_the_units_sensitivity() -> None:
    # every sensitivity is 10 times the row's, so each Laplace scale (sensitivity / epsilon) is
    # that of a row-level release at epsilon / 10: the same errors (up to the snapped samplers'
    # enlargement 1 + support 2**-24 / epsilon, below 1e-5 here)
    row, unit = _errors(PrivacyUnit(), epsilon=0.1), _errors(PrivacyUnit("u", 10))
    assert set(row) == set(unit)
    for label, error in row.items():
        assert unit[label] == pytest.approx(error, rel=1e-5), label


def test_gaussian_noise_uses_the_l2_bound_of_a_per_cell_bound() -> None:
    unit = PrivacyUnit("u", 10, max_cells_per_unit=4, max_rows_per_cell=1)
    row, bounded = _errors(PrivacyUnit(), 1e-6), _errors(unit, 1e-6)
    # L1 min(10, 4 x 1) = 4 for Laplace noise (the scale of a row release at epsilon / 4)
    assert bounded["identity(laplace)"] == pytest.approx(
        _errors(PrivacyUnit(), 1e-6, 0.25)["identity(laplace)"], rel=1e-5
    )
    # L2 sqrt(4) = 2 for Gaussian noise: sigma doubles, the variance x4 (the discrete Gaussian's
    # variance is sigma^2 within 1e-6 relative at these sigmas, about 5 and 10)
    assert bounded["identity(gaussian)"] == pytest.approx(4 * row["identity(gaussian)"], rel=1e-4)


def test_auto_plans_and_releases_for_the_inputs_unit() -> None:
    unit = PrivacyUnit("plane", 8)
    hist = Histogram(SCHEMA, np.ones(SCHEMA.shape), privacy_unit=unit)
    release = AutoMechanism(1.0, workload="marginals:1").release(hist, random_state=1)
    assert release.metadata.privacy_unit == unit.manifest()
    assert release.metadata.report["plan"]["privacy_unit"] == unit.manifest()
    declared = max(release.metadata.sensitivity.values())
    assert declared >= 8.0


def test_plan_cli_takes_the_bound(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA.to_dict()))
    common = ["plan", "--schema", str(schema), "--workload", "marginals:1", "--json"]
    assert main([*common, "--epsilon", "1"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["privacy_unit"] == "row"
    assert main([*common, "--epsilon", "1", "--max-rows-per-unit", "5"]) == 0
    unit = json.loads(capsys.readouterr().out)
    assert unit["privacy_unit"] == {"column": None, "max_rows_per_unit": 5}
    assert unit["candidates"][0]["expected_error"] > 20 * row["candidates"][0]["expected_error"]
    assert main([*common, "--target-error", "10", "--max-rows-per-unit", "5"]) == 0
    needs = {
        n["label"]: n["epsilon"] for n in json.loads(capsys.readouterr().out)["inverse"]["needs"]
    }
    assert main([*common, "--target-error", "10"]) == 0
    row_needs = {
        n["label"]: n["epsilon"] for n in json.loads(capsys.readouterr().out)["inverse"]["needs"]
    }
    # the epsilon a target needs grows with the sensitivity: 5 times for a unit of 5 rows
    assert needs["identity(laplace)"] == pytest.approx(5 * row_needs["identity(laplace)"], rel=0.02)
    assert main([*common, "--epsilon", "1", "--privacy-unit", "tailnum"]) == 2
    assert "give --max-rows-per-unit K" in capsys.readouterr().err
