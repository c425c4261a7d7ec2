"""The counting paths on a real (if small) Spark cluster.

``local-cluster[2,1,1024]`` starts a standalone master, and two workers that each launch an
executor JVM (1 core, 1 GiB) from the pip-installed pyspark (its ``bin/`` and ``jars/`` are the
``SPARK_HOME``). Tasks, the rows they read and the shuffles of GROUPING SETS, window functions and
the fingerprint's Python UDF therefore cross process boundaries, which ``local[n]`` (one JVM)
never tests. The results must equal DuckDB's.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpcube
from dpcube.engine import fingerprint
from dpcube.mechanisms.datacube.counting import counts_from_source
from dpcube.mechanisms.datacube.geometry import CubeGeometry
from dpcube.mechanisms.spatial import bound_contributions

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("the Spark engine needs a Java runtime", allow_module_level=True)

pytestmark = pytest.mark.slow

SCHEMA = dpcube.Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 9], "width": 1},
            {"name": "job", "kind": "nominal", "categories": ["it's", "a`b", "ü"]},
        ]
    }
)
SPATIAL = dpcube.Schema.from_dict(
    {
        "attributes": [
            {
                "name": "loc",
                "kind": "spatial",
                "columns": ["lat", "lon"],
                "bbox": [0.0, 0.0, 1.0, 1.0],
                "resolution": [4, 4],
            }
        ]
    }
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from dpcube.engine.spark_engine import spark_session

    # pyspark's launcher gives the JVMs its own directory as SPARK_HOME (bin/, jars/); the
    # executors run this interpreter (with dpcube's dependencies) for the Python UDF
    session = spark_session(
        "local-cluster[2,1,1024]",
        {
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.pyspark.python": sys.executable,
        },
    )
    yield session
    session.stop()


def test_counting_paths_on_two_executor_jvms(cluster: Any, tmp_path: Path) -> None:
    sc = cluster.sparkContext
    assert sc.master == "local-cluster[2,1,1024]"
    rng = np.random.default_rng(5)
    n = 2000
    frame = pd.DataFrame(
        {
            "age": rng.integers(0, 10, n),
            "job": rng.choice(["it's", "a`b", "ü"], n),
            "lat": rng.uniform(0, 1, n),
            "lon": rng.uniform(0, 1, n),
            "user": rng.integers(0, 50, n),
            "hh": rng.integers(0, 400, n),
        }
    )
    frame["county"] = np.where(frame["hh"] % 2 == 0, "even", "odd")
    path = tmp_path / "people.parquet"
    frame.to_parquet(path)
    # read by the executors from the file, in 4 partitions: the rows never pass the driver
    df = cluster.read.parquet(str(path)).repartition(4)
    assert df.rdd.getNumPartitions() == 4
    hosts = sc._jsc.sc().getExecutorIds().size()
    assert hosts == 2  # two executor JVMs are up

    geo = CubeGeometry(SCHEMA)
    masks = [0, 1, 2, 3]
    duck, _ = counts_from_source(geo, frame, masks)
    spark, _ = counts_from_source(geo, df, masks)
    for mask in masks:
        np.testing.assert_array_equal(duck[mask], spark[mask])

    hierarchy = {"even": "all", "odd": "all"}
    args = {"unit": "hh", "region": "county", "hierarchy": hierarchy, "max_size": 20}
    np.testing.assert_array_equal(
        dpcube.group_sizes(df, **args, dataset="t").counts, dpcube.group_sizes(frame, **args).counts
    )

    np.testing.assert_array_equal(
        bound_contributions(df, SPATIAL, "user", 5, seed=7, dataset="t").counts,
        bound_contributions(frame, SPATIAL, "user", 5, seed=7, dataset="t").counts,
    )
    # the fingerprint's Python UDF runs in Python workers under the executors
    assert fingerprint(df) == fingerprint(path)
