"""dpcube.histogram: identical counts from every kind of source, equal to a numpy reference
binning; bad input gives one-line errors; the out-of-domain policies count what they do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

import dpcube
from dpcube.engine.duckdb_engine import SQL
from dpcube.errors import DataError, DomainTooLargeError, SchemaError
from dpcube.histogram import Histogram, histogram
from dpcube.schema import Schema

OCC_TREE = {"Prof": {"Eng": None, "Doc": None}, "Svc": ["Cook", "Driver"], "Other": None}
LEAVES = ["Eng", "Doc", "Cook", "Driver", "Other"]
INCOME_EDGES = [0.0, 20_000.0, 50_000.0, 100_000.0, 1e9]
BBOX = (33.7, -118.7, 34.4, -117.8)
RES = (4, 5)

SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 99], "width": 10},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
            {"name": "occupation", "kind": "nominal", "hierarchy": OCC_TREE, "column": "occ"},
            {"name": "income", "kind": "ordinal", "edges": INCOME_EDGES},
            {
                "name": "loc",
                "kind": "spatial",
                "columns": ["lat", "lon"],
                "bbox": list(BBOX),
                "resolution": list(RES),
            },
        ]
    }
)


def people(n: int, seed: int) -> pd.DataFrame:
    """Random rows inside the domain, including values exactly on bin edges and the bbox edges."""
    rng = np.random.default_rng(seed)
    lat0, lon0, lat1, lon1 = BBOX
    df = pd.DataFrame(
        {
            "age": rng.integers(0, 100, n),
            "sex": rng.choice(["F", "M"], n),
            "occ": rng.choice(LEAVES, n),
            "income": np.round(rng.uniform(0, 200_000, n), 2),
            "lat": rng.uniform(lat0, lat1, n),
            "lon": rng.uniform(lon0, lon1, n),
        }
    )
    if n >= 2:  # both sexes present (see test_csv_nominal_columns_keep_their_text)
        df.loc[[0, 1], "sex"] = ["F", "M"]
    if n >= 8:
        df.loc[0, ["age", "income", "lat", "lon"]] = [99, 20_000.0, lat1, lon1]  # top edges
        df.loc[1, ["age", "income", "lat", "lon"]] = [0, 0.0, lat0, lon0]  # bottom edges
        df.loc[2, ["income"]] = [50_000.0]
    return df


def reference_counts(df: pd.DataFrame) -> NDArray[np.int64]:
    """The same binning in numpy, written from the schema's definitions."""
    lat0, lon0, lat1, lon1 = BBOX
    age = np.minimum(np.floor(df["age"].to_numpy() / 10).astype(int), 9)
    sex = pd.Categorical(df["sex"], categories=["F", "M"]).codes
    occ = pd.Categorical(df["occ"], categories=LEAVES).codes
    income = np.searchsorted(INCOME_EDGES, df["income"].to_numpy(), side="right") - 1
    row = np.minimum(
        np.floor((df["lat"].to_numpy() - lat0) / (lat1 - lat0) * RES[0]).astype(int), RES[0] - 1
    )
    col = np.minimum(
        np.floor((df["lon"].to_numpy() - lon0) / (lon1 - lon0) * RES[1]).astype(int), RES[1] - 1
    )
    counts = np.zeros(SCHEMA.shape, dtype=np.int64)
    np.add.at(counts, (age, sex, occ, income, row, col), 1)
    return counts


def sources(df: pd.DataFrame, tmp: Path) -> dict[str, Any]:
    csv, parquet = tmp / "people.csv", tmp / "people.parquet"
    df.to_csv(csv, index=False)
    df.to_parquet(parquet, index=False)
    con = duckdb.connect()
    return {
        "csv": csv,
        "csv-str": str(csv),
        "parquet": parquet,
        "pandas": df,
        "polars": pl.from_pandas(df),
        "arrow": pa.Table.from_pandas(df, preserve_index=False),
        "duckdb-relation": con.read_parquet(str(parquet)),
        "sql": SQL(f"SELECT * FROM read_parquet('{parquet}')"),
        "sql-on-connection": SQL("SELECT * FROM people_table", connection=_table(con, df)),
    }


def _table(con: duckdb.DuckDBPyConnection, df: pd.DataFrame) -> duckdb.DuckDBPyConnection:
    con.execute("CREATE TABLE people_table AS SELECT * FROM df")
    return con


def test_every_source_gives_the_reference_histogram(tmp_path: Path) -> None:
    df = people(20_000, seed=1)
    want = reference_counts(df)
    assert want.sum() == len(df)
    for name, source in sources(df, tmp_path).items():
        h = histogram(source, SCHEMA)
        assert isinstance(h, Histogram) and h.schema == SCHEMA
        assert h.counts.dtype == np.int64 and h.counts.shape == SCHEMA.shape, name
        np.testing.assert_array_equal(h.counts, want, err_msg=name)
        assert h.report["rows"] == h.report["counted"] == len(df)
        assert h.report["dropped"] == {} and h.report["clipped"] == {}
    # The public name too.
    np.testing.assert_array_equal(dpcube.histogram(df, SCHEMA).counts, want)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(n=st.integers(2, 60), seed=st.integers(0, 2**32 - 1))
def test_sources_agree_on_random_tables(tmp_path: Path, n: int, seed: int) -> None:
    df = people(n, seed)
    want = reference_counts(df)
    csv, parquet = tmp_path / f"{seed}-{n}.csv", tmp_path / f"{seed}-{n}.parquet"
    df.to_csv(csv, index=False)
    df.to_parquet(parquet, index=False)
    sources = (("csv", csv), ("parquet", parquet), ("pandas", df), ("polars", pl.from_pandas(df)))
    for name, source in sources:
        np.testing.assert_array_equal(histogram(source, SCHEMA).counts, want, err_msg=name)


def test_csv_nominal_columns_keep_their_text(tmp_path: Path) -> None:
    s = Schema.from_dict(
        {
            "attributes": [
                {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
                {"name": "county", "kind": "nominal", "categories": ["01", "02", "10"]},
            ]
        }
    )
    df = pd.DataFrame({"sex": ["F", "F", "F"], "county": ["01", "02", "01"]})
    csv = tmp_path / "only_f.csv"
    df.to_csv(csv, index=False)
    assert histogram(df, s).counts.tolist() == [[2, 1, 0], [0, 0, 0]]
    assert histogram(csv, s).counts.tolist() == [[2, 1, 0], [0, 0, 0]]


def test_parquet_directory_source(tmp_path: Path) -> None:
    df = people(3000, seed=2)
    d = tmp_path / "parts"
    d.mkdir()
    df.iloc[:1000].to_parquet(d / "a.parquet", index=False)
    df.iloc[1000:].to_parquet(d / "b.parquet", index=False)
    np.testing.assert_array_equal(histogram(d, SCHEMA).counts, reference_counts(df))


# ---------------------------------------------------------------------------------------------
# Bad input: one line naming the column, the value and how many rows
# ---------------------------------------------------------------------------------------------


def bad(df: pd.DataFrame, **changes: Any) -> pd.DataFrame:
    out = df.copy()
    for col, (rows, value) in changes.items():
        out[col] = out[col].astype(object)
        out.loc[rows, col] = value
    return out


def error_of(source: Any, **kwargs: Any) -> str:
    with pytest.raises(DataError) as info:
        histogram(source, SCHEMA, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_out_of_domain_value_names_column_value_and_rows() -> None:
    df = people(500, seed=3)
    df.loc[[5, 6, 7], "age"] = 150
    message = error_of(df, show_values=True)
    assert "column age (attribute 'age')" in message
    assert "3 rows are outside the domain" in message and "150 (3 rows)" in message
    assert "on_out_of_domain='drop' or 'clip'" in message


def test_out_of_domain_counts_every_cause_and_hides_values_by_default() -> None:
    """The old message counted only the first cause of the first column (the
    rows below the range) and printed raw private values."""
    df = people(500, seed=3)
    df["sex"] = df["sex"].astype(object)
    df.loc[[1, 2], "age"] = -7  # below
    df.loc[[3, 4, 5], "age"] = 150  # above
    df.loc[[6], "age"] = np.nan  # NULL
    df.loc[[6, 8], "sex"] = None  # NULL in another column; row 6 counted once in the total
    df.loc[[9], "occ"] = "Pilot"  # unknown category
    message = error_of(df)
    assert message.startswith("8 of 500 rows cannot be counted: ")  # rows 1-6, 8, 9
    assert (
        "column age (attribute 'age'): 6 rows are outside the domain or NULL "
        "(2 below the range, 3 above the range, 1 NULL)" in message
    )
    assert "column sex (attribute 'sex'): 2 rows are NULL (2 NULL)" in message
    assert (
        "column occ (attribute 'occupation'): 1 rows are outside the domain (1 not a known category)"
        in message
    )
    for private in ("-7", "150", "Pilot", "None"):
        assert private not in message, private
    assert "--show-values" in message
    shown = error_of(df, show_values=True)
    assert "below the range: -7.0 (2 rows)" in shown and "'Pilot' (1 rows)" in shown
    assert "--show-values" not in shown


def test_out_of_domain_spatial_names_the_coordinate() -> None:
    df = people(200, seed=3)
    df.loc[[1], "lat"] = BBOX[0] - 1
    df.loc[[2, 3], "lon"] = BBOX[3] + 1
    message = error_of(df)
    assert "rows are outside the domain (1 lat below the range, 2 lon above the range)" in message
    assert message.startswith("3 of 200 rows")


def test_below_range_and_unknown_category() -> None:
    df = people(500, seed=4)
    df.loc[[1, 2], "income"] = -5.0
    message = error_of(df, show_values=True)
    assert "column income" in message and "2 rows" in message and "-5.0" in message
    df = people(500, seed=4)
    df.loc[[3, 4, 9, 10], "occ"] = "Pilot"
    message = error_of(df, show_values=True)
    assert "column occ (attribute 'occupation')" in message and "'Pilot' (4 rows)" in message


def test_null_names_column_and_rows(tmp_path: Path) -> None:
    df = people(400, seed=5)
    df["sex"] = df["sex"].astype(object)
    df.loc[[0, 10], "sex"] = None
    message = error_of(df, show_values=True)
    assert "column sex (attribute 'sex'): 2 rows are NULL" in message and "None (2 rows)" in message
    csv = tmp_path / "nulls.csv"
    df.to_csv(csv, index=False)  # an empty field in CSV is NULL too
    assert "2 rows are NULL" in error_of(csv)
    df = people(400, seed=5)
    df.loc[[7], "lat"] = np.nan  # NaN from pandas arrives as NULL
    message = error_of(df)
    assert "column lat, lon (attribute 'loc'): 1 rows are NULL" in message


def test_wrong_type_for_an_ordinal(tmp_path: Path) -> None:
    df = people(100, seed=6)
    df["age"] = df["age"].astype(str)
    df.loc[3, "age"] = "forty"
    message = error_of(df)
    assert (
        "column 'age' has type VARCHAR but attribute 'age' is ordinal and needs numbers" in message
    )
    # the unparsable values are counted, and not echoed
    assert "(1 of 100 rows hold a value that is not a number)" in message
    assert "forty" not in message
    csv = tmp_path / "t.csv"
    df.to_csv(csv, index=False)
    assert "column 'age' has type VARCHAR" in error_of(csv)
    assert "(1 of 100 rows hold a value that is not a number)" in error_of(csv)
    df = people(100, seed=6)
    df["lon"] = "west"
    assert "attribute 'loc' is spatial and needs numbers" in error_of(df)


def test_unknown_column() -> None:
    df = people(50, seed=7).rename(columns={"occ": "job"})
    message = error_of(df)
    assert "attribute 'occupation' reads column 'occ', which the data does not have" in message
    assert "job" in message


def test_other_bad_sources(tmp_path: Path) -> None:
    assert "does not exist" in error_of(tmp_path / "nope.csv")
    weird = tmp_path / "data.xlsx"
    weird.write_text("x")
    assert "cannot tell the format" in error_of(weird)
    assert "cannot read a list as data" in error_of([1, 2, 3])
    assert "on_out_of_domain must be one of" in error_of(people(5, 0), on_out_of_domain="ignore")
    with pytest.raises(DataError, match="unknown engine 'spark2'"):
        histogram(people(5, 0), SCHEMA, engine="spark2")


def test_too_large_domain_is_refused_before_reading() -> None:
    with pytest.raises(DomainTooLargeError, match="cells"):
        histogram("/nonexistent/file.parquet", SCHEMA, max_cells=SCHEMA.size - 1)


# ---------------------------------------------------------------------------------------------
# Policies: drop and clip count what they do and lose nothing else
# ---------------------------------------------------------------------------------------------


def test_drop_policy_reports_counts_and_keeps_the_rest() -> None:
    df = people(2000, seed=8)
    df.loc[[1, 2, 3], "age"] = 250
    df.loc[[4], "age"] = -1
    df.loc[[5, 6], "occ"] = "Pilot"
    df.loc[[7], "lat"] = 40.0
    df["sex"] = df["sex"].astype(object)
    df.loc[[8, 9], "sex"] = None
    df.loc[[3], "sex"] = (
        None  # a row bad twice is dropped once (charged to its first bad attribute)
    )
    h = histogram(df, SCHEMA, on_out_of_domain="drop")
    assert h.report["dropped"] == {"age": 4, "sex": 2, "occupation": 2, "loc": 1}
    assert h.report["rows"] == 2000 and h.report["counted"] == 2000 - 9
    keep = df.drop(index=[1, 2, 3, 4, 5, 6, 7, 8, 9])
    np.testing.assert_array_equal(h.counts, reference_counts(keep))


def test_clip_policy_moves_to_edge_bins() -> None:
    df = people(2000, seed=9)
    clean = df.copy()
    df.loc[[1, 2], "age"] = 250  # -> age bin 9
    df.loc[[3], "income"] = -10.0  # -> income bin 0
    df.loc[[4], "lat"] = BBOX[2] + 1  # -> last row
    df.loc[[5], "lon"] = BBOX[1] - 1  # -> first column
    h = histogram(df, SCHEMA, on_out_of_domain="clip")
    assert h.report["clipped"] == {"age": 2, "income": 1, "loc": 2}
    assert h.report["counted"] == 2000 and h.counts.sum() == 2000
    clean.loc[[1, 2], "age"] = 99
    clean.loc[[3], "income"] = 0.0
    clean.loc[[4], "lat"] = BBOX[2]
    clean.loc[[5], "lon"] = BBOX[1]
    np.testing.assert_array_equal(h.counts, reference_counts(clean))


def test_clip_does_not_hide_nulls_or_unknown_categories() -> None:
    df = people(100, seed=10)
    df.loc[[1], "occ"] = "Pilot"
    assert "'Pilot' (1 rows)" in error_of(df, on_out_of_domain="clip", show_values=True)
    df = people(100, seed=10)
    df.loc[[2], "income"] = np.nan
    assert "1 rows are NULL" in error_of(df, on_out_of_domain="clip")


# ---------------------------------------------------------------------------------------------
# Bin edges
# ---------------------------------------------------------------------------------------------


def counts_1d(schema: Schema, column: str, values: list[float], **kw: Any) -> list[int]:
    return histogram(pd.DataFrame({column: values}), schema, **kw).counts.tolist()


def test_ordinal_edges_versus_range_and_width() -> None:
    by_edges = Schema.from_dict(
        {"attributes": [{"name": "v", "kind": "ordinal", "edges": [0, 18, 65, 101]}]}
    )
    assert counts_1d(by_edges, "v", [0, 17.999, 18, 64, 65, 100, 100.5]) == [2, 2, 3]
    with pytest.raises(DataError, match=r"101.0 \(1 rows\)"):
        counts_1d(by_edges, "v", [5, 101.0], show_values=True)  # the last edge is excluded
    by_width = Schema.from_dict(
        {"attributes": [{"name": "v", "kind": "ordinal", "range": [0, 100], "width": 10}]}
    )
    # [0,10), ..., [90,100), and {100} in the last bin because the range includes hi.
    assert counts_1d(by_width, "v", [0, 9.99, 10, 99, 100]) == [2, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1]
    with pytest.raises(DataError, match=r"100.5 \(1 rows\)"):
        counts_1d(by_width, "v", [100.5], show_values=True)
    odd = Schema.from_dict(
        {"attributes": [{"name": "v", "kind": "ordinal", "range": [0, 95], "width": 10}]}
    )
    assert odd.shape == (10,) and counts_1d(odd, "v", [95, 90, 89.9]) == [0] * 8 + [1, 2]


def test_spatial_edges() -> None:
    s = Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "p",
                    "kind": "spatial",
                    "columns": ["lat", "lon"],
                    "bbox": [10, 20, 12, 30],
                    "resolution": [2, 5],
                }
            ]
        }
    )
    df = pd.DataFrame(
        {
            "lat": [10.0, 12.0, 11.0, 10.999, 12.0, 10.0],
            "lon": [20.0, 30.0, 25.0, 21.999, 20.0, 30.0],
        }
    )
    c = histogram(df, s).counts
    expected = np.zeros((2, 5), dtype=np.int64)
    for r, k in [(0, 0), (1, 4), (1, 2), (0, 0), (1, 0), (0, 4)]:
        expected[r, k] += 1
    np.testing.assert_array_equal(c, expected)
    for lat, lon in [(12.0001, 25.0), (9.999, 25.0), (11.0, 30.0001), (11.0, 19.9)]:
        with pytest.raises(
            DataError, match=r"column lat, lon \(attribute 'p'\): 1 rows are outside the domain"
        ):
            histogram(pd.DataFrame({"lat": [lat], "lon": [lon]}), s)


# ---------------------------------------------------------------------------------------------
# Histogram wrapper
# ---------------------------------------------------------------------------------------------


def test_histogram_wrapper_validation() -> None:
    s = Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "nominal", "categories": ["a", "b"]}]}
    )
    h = Histogram(s, [3.0, 4.0])
    assert h.counts.dtype == np.int64 and h.total == 7
    with pytest.raises(SchemaError, match=r"shape \(3,\) do not match the schema's shape \(2,\)"):
        Histogram(s, [1, 2, 3])
    with pytest.raises(DataError, match="non-negative; found -1"):
        Histogram(s, [1, -1])
    with pytest.raises(DataError, match="whole numbers"):
        Histogram(s, [1.5, 2])
    with pytest.raises(DataError, match="whole numbers"):
        Histogram(s, [np.nan, 2])


def test_many_rows_in_one_cell_are_counted_exactly(tmp_path: Path) -> None:
    """Counts come back as int64 even when one cell holds more than 2^31 rows would allow in int32."""
    s = Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "nominal", "categories": ["a", "b"]}]}
    )
    con = duckdb.connect()
    rel = con.sql("SELECT CASE WHEN i % 3 = 0 THEN 'b' ELSE 'a' END AS x FROM range(300000) t(i)")
    assert histogram(rel, s).counts.tolist() == [200000, 100000]
    table = pa.table({"x": pa.array(["a", "b", "b"])})
    pq.write_table(table, tmp_path / "x.parquet")
    assert histogram(tmp_path / "x.parquet", s).counts.tolist() == [1, 2]
