"""Other measures (Ding et al., SIGMOD 2011, Sec. 7.3): sum measures with a clipping bound, their sensitivity checked by brute
force over records with values, and averages as the ratio of a sum and a count release."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from dpcube import Histogram, Schema
from dpcube.errors import BudgetError, DataError, ParameterError, QueryError
from dpcube.mechanisms.datacube import CubeSource, CuboidRelease, DataCube
from dpcube.mechanisms.datacube.geometry import CubeGeometry
from dpcube.mechanisms.datacube.measures import average_cuboid, ratio_variance
from dpcube.privacy import NO_NOISE
from dpcube.privacy.random import SeededRandomSource
from dpcube.privacy.samplers import add_discrete_laplace, discrete_laplace_variance

SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
            {"name": "age", "kind": "ordinal", "range": [0, 2], "width": 1},
        ]
    }
)
CELLS = [(s, a) for s in range(2) for a in range(3)]


def sum_cuboids(records: list[tuple[int, int, int]], masks: list[int]) -> np.ndarray:
    """Reference: the sum cuboids of (sex, age, clipped value) records, concatenated."""
    base = np.zeros((2, 3))
    for s, a, v in records:
        base[s, a] += v
    parts = []
    for m in masks:
        axes = tuple(i for i in range(2) if not m >> i & 1)
        parts.append(base.sum(axis=axes).ravel() if axes else base.ravel())
    return np.concatenate(parts)


def test_sum_sensitivity_by_brute_force() -> None:
    """Every data set of up to 2 records with values in [-3, 5] and every neighbour: the L1 change
    of the measured sum cuboids is at most the declared unit x s (Delta = 5), and attained. Under
    replace the bound 2 Delta per cuboid is attained where the two records' cells differ, which a
    single-cell cuboid (the total) never allows, so tightness is checked on the base cuboid alone
    (as for counts, the bound is safe but not tight with the total)."""
    cases = [("add_remove", "all"), ("replace", [("sex", "age")]), ("replace", "all")]
    for neighbour, publish in cases:
        mech = DataCube(
            1.0,
            method="all",
            publish=publish,
            measure="sum",
            value="v",
            bounds=[-3, 5],
            neighbour=neighbour,
        )
        masks = list(mech.plan(SCHEMA).selection.sources)
        declared = mech.unit * len(masks)
        records = [(s, a, v) for (s, a) in CELLS for v in (-3, 0, 5)]
        worst = 0.0
        for n in range(3):
            for data in itertools.combinations_with_replacement(records, n):
                before = sum_cuboids(list(data), masks)
                for r in records:
                    if neighbour == "add_remove":  # add r (removing it is the same pair)
                        worst = max(worst, np.abs(sum_cuboids([*data, r], masks) - before).sum())
                        continue
                    for k in range(len(data)):  # replace record k by r
                        changed = [*data[:k], r, *data[k + 1 :]]
                        worst = max(worst, np.abs(sum_cuboids(changed, masks) - before).sum())
        assert worst <= declared
        if publish != "all" or neighbour == "add_remove":
            assert worst == declared  # a value of 5 added, or moved to another cell
        assert mech.unit == (5 if neighbour == "add_remove" else 10)


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "sex": ["F", "M", "F", "M", "F", "F"],
            "age": [0, 1, 2, 2, 1, 1],
            "income": [10.4, 20.0, -5.0, 99.0, None, 7.6],
        }
    )


def test_noiseless_sums_are_rounded_clipped_and_nulls_follow_the_policy() -> None:
    mech = DataCube(1.0, method="all", measure="sum", value="income", bounds=[0, 50])
    with pytest.raises(DataError, match="measure column 'income': 1 rows are NULL"):
        mech.release(CubeSource(frame(), SCHEMA), random_state=NO_NOISE, account=False)
    r = mech.release(CubeSource(frame(), SCHEMA, "drop"), random_state=NO_NOISE, account=False)
    assert isinstance(r, CuboidRelease)
    # F: age0 10, age1 8 (7.6 rounded; the NULL row dropped), age2 0 (-5 clipped); M: 20, 50 (99)
    np.testing.assert_allclose(r.cuboid(["sex", "age"]), [[10, 8, 0], [0, 20, 50]])
    assert r.curator_log["measure"] == {"column": "income", "null": 1, "clipped": 2}
    assert r.curator_log["counted"] == 5
    assert r.metadata.noise["measure"]["sensitivity_per_cuboid"] == 50
    assert "income" not in str(r.tables())  # only the noisy sums, no exact figure


def test_sum_noise_scale_and_variance() -> None:
    mech = DataCube(
        2.0, method="all", publish=[("sex",)], measure="sum", value="income", bounds=[-10, 40]
    )
    r = mech.release(CubeSource(frame(), SCHEMA, "drop"), random_state=1, account=False)
    assert isinstance(r, CuboidRelease)
    # one cuboid, Delta = 40: discrete Laplace of scale 40 / 2 = 20 on each cell
    assert r.metadata.noise["scales"] == [pytest.approx(20.0, rel=1e-6)]
    assert r.cell_variance(["sex"]) == pytest.approx(discrete_laplace_variance(20.0), rel=1e-6)


def test_sum_refuses_what_it_cannot_do() -> None:
    with pytest.raises(BudgetError, match="needs value=COLUMN and bounds"):
        DataCube(1.0, measure="sum", value="income")
    with pytest.raises(BudgetError, match="not a whole number"):
        DataCube(1.0, measure="sum", value="income", bounds=[0, 2.5])
    with pytest.raises(BudgetError, match="above high"):
        DataCube(1.0, measure="sum", value="income", bounds=[5, 1])
    with pytest.raises(BudgetError, match="measure='sum' only"):
        DataCube(1.0, bounds=[0, 1])
    with pytest.raises(ParameterError, match="parameter measure='median'"):
        DataCube(1.0, measure="median")
    mech = DataCube(1.0, measure="sum", value="income", bounds=[0, 9])
    with pytest.raises(DataError, match="needs the records"):
        mech.release(Histogram(SCHEMA, np.ones((2, 3), dtype=np.int64)), account=False)
    with pytest.raises(DataError, match="measure column 'wage' is not in the data"):
        DataCube(1.0, measure="sum", value="wage", bounds=[0, 9]).release(
            CubeSource(frame(), SCHEMA, "drop"), random_state=NO_NOISE, account=False
        )
    assert CubeGeometry(SCHEMA).names == ("sex", "age")


def test_average_is_sum_over_count_with_a_delta_method_variance() -> None:
    sums = DataCube(1.0, method="all", measure="sum", value="income", bounds=[0, 50])
    counts = DataCube(1.0, method="all")
    # both releases must count the same rows: without the NULL measure
    data = CubeSource(frame().dropna(), SCHEMA)
    s = sums.release(data, random_state=NO_NOISE, account=False)
    c = counts.release(data, random_state=NO_NOISE, account=False)
    assert isinstance(s, CuboidRelease) and isinstance(c, CuboidRelease)
    avg = average_cuboid(s, c, "sex")
    # F: 10 (10.4), 0 (-5 clipped), 8 (7.6) over 3 rows; M: 20 and 50 (99 clipped) over 2
    np.testing.assert_allclose(avg.values, [18 / 3, 70 / 2])
    assert avg.computed_from == (("sex",), ("sex",))
    with pytest.raises(QueryError, match="measure='sum' release first"):
        average_cuboid(c, s, "sex")


def test_ratio_variance_matches_simulation() -> None:
    """The delta-method variance of S/C against 20,000 draws of discrete Laplace noise from the
    project's sampler (S = 50,000, C = 1,000, scales 200 and 4): the relative standard error of a
    sample variance of 20,000 is about 1 %; 5 % allows the second-order terms (O(Var C / C^2))."""
    source = SeededRandomSource(7)
    s_true, c_true = np.full(20_000, 50_000), np.full(20_000, 1_000)
    s, ds = add_discrete_laplace(s_true, 200.0, source)
    c, dc = add_discrete_laplace(c_true, 4.0, source)
    predicted = ratio_variance(
        np.array([50_000.0]), np.array([1_000.0]), float(ds.variance), float(dc.variance)
    )[0]
    assert np.var(s / c, ddof=1) == pytest.approx(predicted, rel=0.05)
