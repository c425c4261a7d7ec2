"""The faster counting plans give exactly what the plans they replace gave.

- :func:`dpcube.engine.counting.cuboid_counts` groups the rows once by every axis and sums the
  cuboids on the driver (``_rolled_up_cuboids``) when the code space is small; the
  ``GROUPING SETS`` plan (forced here by ``ROLL_UP_MAX_GROUPS = 0``) must give the same cuboids
  and the same report (rows, counted, dropped and clipped per attribute) under every policy,
  and the same error message.
- Whole-number ordinal columns are binned by integer division and compared with integer
  literals; a float copy of the same column takes the floor-of-a-quotient path. Both must bin
  every value alike, including the range's edges and values just outside it.

DuckDB only (fast); ``tests/engine/test_spark_paths.py`` compares the engines.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpcube
from dpcube.engine import counting
from dpcube.engine.duckdb_engine import DuckDBEngine
from dpcube.errors import DataError

SCHEMA = dpcube.Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [3, 20], "width": 4},
            {"name": "income", "kind": "ordinal", "edges": [0, 10, 25, 100]},
            {"name": "job", "kind": "nominal", "categories": ["a", "b", "it's"]},
        ]
    }
)
SETS = [(), (0,), (1,), (2,), (0, 2), (0, 1, 2)]


def frame(dirty: bool) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 500
    data = pd.DataFrame(
        {
            "age": rng.integers(3, 21, n),
            "income": rng.integers(0, 100, n),
            "job": rng.choice(["a", "b", "it's"], n).astype(object),
        }
    )
    if dirty:
        data["age"] = data["age"].astype("Int64")
        data.loc[0, "age"] = pd.NA  # NULL
        data.loc[1, "age"] = 2  # below
        data.loc[2, "age"] = 21  # above
        data.loc[3, "income"] = 100  # above (edges are half-open)
        data.loc[4, "job"] = "pilot"  # unknown category
        data.loc[1, "income"] = -1  # a row bad on two axes
    return data


def count(data: pd.DataFrame, policy: str) -> tuple[dict, dict] | str:
    try:
        with DuckDBEngine().open(data, ("job",), ("age", "income")) as table:
            return counting.cuboid_counts(table, SCHEMA, SETS, policy)
    except DataError as exc:
        return str(exc)


@pytest.mark.parametrize("dirty", [False, True])
@pytest.mark.parametrize("policy", ["error", "drop", "clip"])
def test_rolled_up_cuboids_equal_grouping_sets(
    dirty: bool, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = frame(dirty)
    rolled = count(data, policy)
    monkeypatch.setattr(counting, "ROLL_UP_MAX_GROUPS", 0)
    grouped = count(data, policy)
    if isinstance(grouped, str):
        assert rolled == grouped
        assert dirty and policy != "drop"  # NULL and unknown categories fail error and clip
        return
    assert not isinstance(rolled, str), rolled
    assert rolled[1] == grouped[1]
    assert set(rolled[0]) == set(grouped[0]) == set(SETS)
    for axes in SETS:
        assert rolled[0][axes].shape == grouped[0][axes].shape
        np.testing.assert_array_equal(rolled[0][axes], grouped[0][axes])
    if dirty:  # drop: 5 rows dropped (row 1 under both age and income)
        assert rolled[1]["counted"] == 495
        assert rolled[1]["dropped"] == {"age": 3, "income": 2, "job": 1}


def test_whole_number_binning_equals_float_binning() -> None:
    ages = np.arange(-3, 25)
    data = pd.DataFrame({"age": ages, "age_f": ages.astype(float), "income": 5, "job": "a"})
    whole = dpcube.histogram(
        data, SCHEMA, on_out_of_domain="drop", dataset="whole-binning-test"
    ).counts.sum(axis=(1, 2))
    floats = dpcube.histogram(
        data.drop(columns="age").rename(columns={"age_f": "age"}),
        SCHEMA,
        on_out_of_domain="drop",
        dataset="whole-binning-test",
    ).counts.sum(axis=(1, 2))
    # ages 3..20 in bins of 4 from 3: [3,7) [7,11) [11,15) [15,19) [19,20]
    np.testing.assert_array_equal(whole, [4, 4, 4, 4, 2])
    np.testing.assert_array_equal(floats, whole)


def persons(n: int = 600) -> pd.DataFrame:
    """Units 0..79 of 1-15 persons, each unit in one of three regions (one with a quote)."""
    rng = np.random.default_rng(11)
    unit = rng.integers(0, 80, n)
    region = np.array(["north", "so'uth", "east"], dtype=object)[unit % 3]
    return pd.DataFrame({"unit": unit, "region": region})


def group_sizes(data: pd.DataFrame, show_values: bool = False) -> pd.DataFrame | str:
    try:
        with DuckDBEngine().open(data) as table:
            found = counting.group_size_counts(table, "unit", "region", show_values)
    except DataError as exc:
        return str(exc)
    frame = pd.DataFrame({k: list(v) for k, v in found.items()})
    return frame.sort_values(["region", "size"]).reset_index(drop=True)


def by_text(data: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame | str:
    """The exact text plan, forced by making every region hash collide."""
    with monkeypatch.context() as patch:
        patch.setattr(counting.Dialect, "hash64", lambda self, expr: "0")
        return group_sizes(data)


def test_hashed_group_sizes_equal_the_text_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    data = persons()
    hashed, exact = group_sizes(data), by_text(data, monkeypatch)
    assert isinstance(hashed, pd.DataFrame) and isinstance(exact, pd.DataFrame)
    pd.testing.assert_frame_equal(hashed, exact)
    # and both equal a count in pandas: units per (region, size), persons = count x size
    sizes = data.groupby("unit").agg(size=("region", "size"), region=("region", "first"))
    expected = sizes.groupby(["region", "size"]).size().rename("count").reset_index()
    assert hashed["count"].tolist() == expected["count"].tolist()
    assert hashed["persons"].tolist() == (expected["size"] * expected["count"]).tolist()
    assert int(hashed["persons"].sum()) == len(data)


def test_hashed_group_sizes_refuse_like_the_text_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    data = persons()
    spread = data.copy()
    for unit in (0, 1):  # two units each get a person in another region
        row = spread.index[spread["unit"] == unit][0]
        spread.loc[row, "region"] = "east" if spread.loc[row, "region"] != "east" else "north"
    message = group_sizes(spread)
    assert message == by_text(spread, monkeypatch)
    assert isinstance(message, str) and message.startswith("2 units (column 'unit') span")
    named = group_sizes(spread, show_values=True)
    assert isinstance(named, str) and ", e.g. unit 0 in " in named
    nulls = data.astype({"unit": "Int64"})
    nulls.loc[3, "unit"] = pd.NA
    nulls.loc[5, "region"] = None
    nulls.loc[7, "unit"], nulls.loc[7, "region"] = pd.NA, None  # one row, both NULL
    assert group_sizes(nulls) == (
        "3 rows have a NULL 'unit' or 'region'; drop or fill them, or leave them out with "
        "--on-out-of-domain drop (on_out_of_domain='drop')"
    )
