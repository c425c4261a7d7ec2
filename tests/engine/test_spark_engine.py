"""The Spark engine bins and counts exactly as the DuckDB engine does (same SQL, other dialect)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpcube
from dpcube.errors import DataError

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("the Spark engine needs a Java runtime", allow_module_level=True)

SCHEMA = dpcube.Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 99], "width": 10},
            {"name": "income", "kind": "ordinal", "edges": [0, 1000, 5000, 20000]},
            {"name": "job", "kind": "nominal", "hierarchy": {"A": ["a1", "it's"], "B": ["b1"]}},
            {
                "name": "loc",
                "kind": "spatial",
                "columns": ["lat", "lon"],
                "bbox": [10, 20, 11, 22],
                "resolution": [3, 4],
            },
        ]
    }
)


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    from dpcube.engine.spark_engine import SparkEngine, local_session

    session = local_session(cores=1)
    yield SparkEngine(session)
    session.stop()


def people(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(0, 100, n),
            "income": rng.uniform(0, 19999, n),
            "job": rng.choice(["a1", "it's", "b1"], n),
            "lat": rng.uniform(10, 11, n),
            "lon": rng.uniform(20, 22, n),
        }
    )


def test_spark_counts_equal_duckdb_counts(engine: Any, tmp_path: Path) -> None:
    frame = people(3000, 1)
    frame.loc[:4, "lat"] = 11.0  # the top edge of the box belongs to the last row
    path = tmp_path / "people.parquet"
    frame.to_parquet(path)
    expected = dpcube.histogram(path, SCHEMA)
    got = dpcube.histogram(path, SCHEMA, engine=engine)
    np.testing.assert_array_equal(got.counts, expected.counts)
    assert got.report == expected.report
    spark_frame = engine.session.read.parquet(str(path))
    np.testing.assert_array_equal(
        dpcube.histogram(spark_frame, SCHEMA, engine=engine).counts, expected.counts
    )


def test_spark_policies_match_duckdb(engine: Any, tmp_path: Path) -> None:
    frame = people(500, 2)
    frame.loc[0, "age"] = 150
    frame.loc[1, "income"] = -5.0
    frame.loc[2, "job"] = "pilot"
    path = tmp_path / "bad.parquet"
    frame.to_parquet(path)
    with pytest.raises(
        DataError,
        match=r"^3 of 500 rows .*column age \(attribute 'age'\): 1 rows are outside the domain "
        r"\(1 above the range\), e\.g\. above the range: 150",
    ):
        dpcube.histogram(path, SCHEMA, engine=engine, show_values=True)
    for policy in ("drop",):
        expected = dpcube.histogram(path, SCHEMA, on_out_of_domain=policy)
        got = dpcube.histogram(path, SCHEMA, engine=engine, on_out_of_domain=policy)
        np.testing.assert_array_equal(got.counts, expected.counts)
        assert (
            got.report
            == expected.report
            == {**got.report, "dropped": {"age": 1, "income": 1, "job": 1}}
        )
