"""``dpcube release --engine spark`` is used, never ignored.

The data cube's cuboids, the census group-size table and the spatial user-level bound used to be
counted in DuckDB only (the flag was first ignored, then refused); they now run on Spark, and a
seeded release there equals the one on DuckDB. ``--spark-master``/``--spark-conf`` without
``--engine spark`` are refused, never ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpcube.cli.main import main


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    rng = np.random.default_rng(0)
    n = 300
    people = pd.DataFrame(
        {
            "age": rng.integers(0, 10, n),
            "sex": rng.choice(["F", "M"], n),
            "hh": rng.integers(0, 100, n),
            "lat": rng.uniform(0.0, 1.0, n),
            "lon": rng.uniform(0.0, 1.0, n),
            "user": rng.integers(0, 20, n),
        }
    )
    people["county"] = np.where(people["hh"] < 50, "c1", "c2")
    people.to_csv(tmp_path / "people.csv", index=False)
    schema = {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 9], "width": 1},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
        ]
    }
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(schema))
    spatial = {
        "attributes": [
            {
                "name": "loc",
                "kind": "spatial",
                "columns": ["lat", "lon"],
                "bbox": [0.0, 0.0, 1.0, 1.0],
                "resolution": [8, 8],
            }
        ]
    }
    (tmp_path / "spatial.yaml").write_text(yaml.safe_dump(spatial))
    (tmp_path / "regions.csv").write_text("region,parent\nnation,\nc1,nation\nc2,nation\n")
    return {
        "data": tmp_path / "people.csv",
        "schema": tmp_path / "schema.yaml",
        "spatial": tmp_path / "spatial.yaml",
        "regions": tmp_path / "regions.csv",
        "home": tmp_path / "home",
        "out": tmp_path / "rel",
    }


def _release(f: dict[str, Path], *extra: str) -> list[str]:
    return ["release", str(f["data"]), "--out", str(f["out"]), "--epsilon", "1", *extra]


def _cases(f: dict[str, Path]) -> dict[str, list[str]]:
    return {
        "datacube": _release(f, "--mechanism", "datacube", "--schema", str(f["schema"])),
        "census-hierarchy": _release(
            f,
            "--mechanism",
            "census-hierarchy",
            "--group-by",
            "hh",
            "--region",
            "county",
            "--hierarchy",
            str(f["regions"]),
            "--max-size",
            "20",
            "--groups-are-public",
        ),
        "ug --user-column": _release(
            f,
            "--mechanism",
            "ug",
            "--schema",
            str(f["spatial"]),
            "--user-column",
            "user",
            "--max-points-per-user",
            "5",
        ),
    }


def _spark_available() -> bool:
    import importlib.util
    import shutil

    return importlib.util.find_spec("pyspark") is not None and shutil.which("java") is not None


needs_spark = pytest.mark.skipif(not _spark_available(), reason="needs pyspark and Java")
SPARK = ["--engine", "spark", "--spark-master", "local[1]"]


@pytest.fixture(scope="module")
def stop_spark_after() -> Iterator[None]:
    """The CLI starts a Spark session in this process; stop it after this module's tests."""
    yield
    if _spark_available():
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()


@needs_spark
@pytest.mark.parametrize("case", ["datacube", "census-hierarchy", "ug --user-column"])
def test_spark_release_equals_duckdb_release(
    files: dict[str, Path], case: str, capsys: pytest.CaptureFixture[str], stop_spark_after: None
) -> None:
    """A seeded release counted on Spark equals the same seeded release counted on DuckDB: the
    counts (and, with --seed, the choice of each user's points) are identical, so the same noise
    gives the same published values."""
    argv = _cases(files)[case]
    out = {e: files["out"].parent / f"rel-{e}" for e in ("duckdb", "spark")}
    runs = {"duckdb": [], "spark": [*SPARK, "--spark-conf", "spark.sql.shuffle.partitions=2"]}
    for engine, extra in runs.items():
        command = [*argv[:3], str(out[engine]), *argv[4:], "--seed", "1", "--total-epsilon", "9"]
        assert main([*command, *extra]) == 0, capsys.readouterr().err
    frames = {e: [pd.read_parquet(p) for p in sorted(out[e].glob("*.parquet"))] for e in out}
    assert len(frames["duckdb"]) == len(frames["spark"]) >= 1
    for duck, spark in zip(frames["duckdb"], frames["spark"], strict=True):
        pd.testing.assert_frame_equal(duck, spark)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--spark-master", "local[2]"],
            "error: --spark-master configure the Spark engine, but the counting runs on --engine "
            "duckdb; add --engine spark or drop them",
        ),
        (
            ["--engine", "duckdb", "--spark-conf", "spark.executor.memory=1g"],
            "error: --spark-conf configure the Spark engine",
        ),
        (
            ["--engine", "spark", "--spark-conf", "spark.executor.memory"],
            "error: --spark-conf 'spark.executor.memory' is not KEY=VALUE",
        ),
    ],
)
def test_spark_flags_without_spark_or_malformed_are_refused(
    files: dict[str, Path], extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before Spark starts, the data is read or the budget is touched (no Spark needed)."""
    code = main([*_cases(files)["datacube"], *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert not files["out"].exists() and not files["home"].exists()
