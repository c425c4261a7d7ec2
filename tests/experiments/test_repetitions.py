"""``--full`` sets each experiment's spec repetition count; quick mode keeps the CI counts.

The plans are checked without running any experiment."""

from __future__ import annotations

import argparse
import math

import pandas as pd
import pytest

from experiments import census, datacube
from experiments.repetitions import (
    SPEC_REPETITIONS,
    mean_se_table,
    repetitions,
    standard_error,
)


@pytest.mark.parametrize(
    ("experiment", "quick", "spec"),
    [("census", 3, 10), ("spatial", 2, 5), ("quadtree-height", 3, 5), ("privelet", 5, 5)],
)
def test_full_sets_the_spec_count_and_quick_is_unchanged(
    experiment: str, quick: int, spec: int
) -> None:
    assert repetitions(experiment, full=False)[0] == quick
    assert repetitions(experiment, full=True)[0] == spec
    # an explicit count wins, and the reason says so
    count, why = repetitions(experiment, full=True, explicit=7)
    assert count == 7 and "command line" in why


def test_spec_counts_are_at_least_the_quick_counts() -> None:
    for quick, spec, ref in SPEC_REPETITIONS.values():
        assert spec >= quick
        assert f">= {spec} " in ref  # the reference quotes the count it sets


def test_census_plan_from_arguments() -> None:
    assert census.plan(argparse.Namespace(seeds=None, full=False))[0] == 3
    assert census.plan(argparse.Namespace(seeds=None, full=True))[0] == 10
    assert census.plan(argparse.Namespace(seeds=2, full=True))[0] == 2


def test_datacube_plan_follows_spec_a11() -> None:
    full, quick = datacube.plan(True), datacube.plan(False)
    assert quick == datacube.QUICK_SEEDS
    # A11: >= 10 noise draws per setting, >= 20 for the max-error-by-dimensionality plot (Exp-III)
    assert full["III"] == 20
    assert all(full[e] >= 10 for e in ("I", "II", "budgets", "IV", "V", "acs"))
    assert datacube.plan(True, 4) == dict.fromkeys(datacube.QUICK_SEEDS, 4)


def test_standard_error_and_table() -> None:
    # s = sqrt(((1-2.5)^2 + (2-2.5)^2 + (3-2.5)^2 + (4-2.5)^2) / 3) = sqrt(5/3); se = s / 2
    assert standard_error([1.0, 2.0, 3.0, 4.0]) == pytest.approx(math.sqrt(5 / 3) / 2)
    assert math.isnan(standard_error([1.0]))
    frame = pd.DataFrame({"m": ["a", "a", "b", "b"], "err": [1.0, 3.0, 5.0, 5.0]})
    t = mean_se_table(frame, ["m"], ["err"]).set_index("m")
    assert t.loc["a", "err"] == 2.0 and t.loc["a", "err_se"] == pytest.approx(1.0)
    assert t.loc["b", "err_se"] == 0.0 and t.loc["b", "runs"] == 2
