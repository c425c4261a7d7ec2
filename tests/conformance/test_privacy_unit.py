"""The privacy unit: its bounds, every mechanism's sensitivity to one unit, and the audit."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from dpcube.errors import ParameterError
from dpcube.histogram import Histogram
from dpcube.mechanisms.conformance import CONFORMANCE_UNITS, check_unit_sensitivity, mixed_schema
from dpcube.mechanisms.identity import Identity
from dpcube.privacy.unit import ROW, PrivacyUnit


@pytest.mark.parametrize(
    ("k", "c", "r"),
    [(3, None, None), (5, 4, 1), (5, 2, 2), (7, 3, 2), (4, None, 3), (6, 5, None), (2, 1, 1)],
)
def test_l1_and_l2_bounds_are_the_largest_over_every_bounded_unit(
    k: int, c: int | None, r: int | None
) -> None:
    """Brute force over every contribution of one unit to a 6-cell histogram."""
    unit = PrivacyUnit("u", k, c, r)
    worst_l1, worst_l2 = 0, 0.0
    for v in itertools.product(range(k + 1), repeat=6):
        if sum(v) > k or (c is not None and sum(x > 0 for x in v) > c):
            continue
        if r is not None and max(v) > r:
            continue
        worst_l1 = max(worst_l1, sum(v))
        worst_l2 = max(worst_l2, math.sqrt(sum(x * x for x in v)))
    assert unit.rows == worst_l1
    assert unit.l2 == pytest.approx(worst_l2)
    assert unit.histogram_sensitivity("replace", "l1") == 2 * worst_l1
    assert ROW.histogram_sensitivity("add_remove", "l1") == 1


def test_the_manifest_names_the_unit_or_the_row() -> None:
    assert ROW.manifest() == "row"
    unit = PrivacyUnit.parse("tailnum", 50, None, "2")
    assert unit.manifest() == {"column": "tailnum", "max_rows_per_unit": 50, "max_rows_per_cell": 2}
    assert PrivacyUnit.from_manifest(unit.manifest()) == unit
    assert PrivacyUnit.from_manifest("row") == ROW


class RowNoise(Identity):
    """A broken Identity: its noise ignores the privacy unit (calibrated to one row)."""

    def histogram_sensitivity(self, norm: str) -> float:
        return ROW.histogram_sensitivity(self.neighbour, norm)


def test_the_unit_check_catches_a_mechanism_that_ignores_the_unit() -> None:
    from dpcube.mechanisms.conformance import Case

    broken = Case("row-noise", mixed_schema(), lambda n: RowNoise(1.0, neighbour=n))
    with pytest.raises(AssertionError, match="a unit moves the l1 measurement by 3"):
        check_unit_sensitivity(broken)
    check_unit_sensitivity(Case("identity", mixed_schema(), lambda n: Identity(1.0, neighbour=n)))


def test_a_release_protects_the_unit_its_input_was_bounded_for() -> None:
    schema = mixed_schema()
    row = Identity(1.0).release(Histogram(schema, np.ones(schema.shape)), random_state=1)
    assert row.metadata.privacy_unit == "row" and row.metadata.sensitivity == {"cells": 1.0}
    unit = PrivacyUnit("plane", 20)
    r = Identity(1.0).release(
        Histogram(schema, np.ones(schema.shape), privacy_unit=unit), random_state=1
    )
    assert r.metadata.privacy_unit == {"column": "plane", "max_rows_per_unit": 20}
    assert r.metadata.sensitivity == {"cells": 20.0}
    assert r.metadata.noise["scale"] == pytest.approx(20 * row.metadata.noise["scale"], rel=1e-6)
    # Gaussian noise is calibrated to the L2 bound: 4 cells of 1 row, L2 = 2 (not 4 = L1)
    cells = PrivacyUnit("plane", 20, max_cells_per_unit=4, max_rows_per_cell=1)
    g = Identity(1.0, delta=1e-6, noise="gaussian").release(
        Histogram(schema, np.ones(schema.shape), privacy_unit=cells), random_state=1
    )
    assert g.metadata.sensitivity == {"cells": 2.0}


def test_a_mechanism_built_for_a_unit_refuses_an_unbounded_or_looser_input() -> None:
    schema = mixed_schema()
    mech = Identity(1.0, privacy_unit=PrivacyUnit("plane", 5))
    with pytest.raises(Exception, match="not bounded per unit"):
        mech.release(Histogram(schema, np.ones(schema.shape)), random_state=1)
    with pytest.raises(Exception, match="keeps up to 9 rows per unit 'plane'"):
        mech.release(
            Histogram(schema, np.ones(schema.shape), privacy_unit=PrivacyUnit("plane", 9)),
            random_state=1,
        )
    with pytest.raises(Exception, match="units of column 'plane' but the input was bounded"):
        mech.release(
            Histogram(schema, np.ones(schema.shape), privacy_unit=PrivacyUnit("tail", 5)),
            random_state=1,
        )


def test_census_refuses_a_unit_with_the_reason() -> None:
    from dpcube.mechanisms.census.mechanism import CensusHierarchy

    with pytest.raises(ParameterError, match=r"one person .* joining or leaving a group"):
        CensusHierarchy(1.0).with_unit(CONFORMANCE_UNITS[0])
    import dpcube

    with pytest.raises(ParameterError, match="group_sizes: the census mechanisms protect"):
        dpcube.group_sizes(
            "x.csv",
            unit="hh",
            region="r",
            hierarchy={},
            max_size=3,
            privacy_unit="person",
            max_rows_per_unit=2,
        )


def test_the_audit_sees_unit_level_loss() -> None:
    from dpcube.audit import audit
    from dpcube.mechanisms.conformance import Case

    case = Case("identity", mixed_schema(), lambda n: Identity(1.0, neighbour=n))
    unit = PrivacyUnit("unit", 4)
    broken: Any = RowNoise(1.0)
    # Row-calibrated noise on a unit of 4 rows loses up to epsilon 4: the audit shows more than 1
    flagged = audit(case, "add_remove", mechanism=broken, unit=unit, runs=400, seed=1)
    assert flagged.violation and flagged.lower_bound > 1.0
    kept = audit(case, "add_remove", unit=unit, runs=400, seed=1)
    assert not kept.violation and "unit" in kept.neighbour
