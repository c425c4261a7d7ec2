"""Every registered mechanism releases with a privacy unit, on DuckDB and on Spark."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpcube
from dpcube import registry
from dpcube.cli.main import main
from dpcube.cli.mechanism_flags import INPUTS, SPATIAL
from dpcube.privacy.unit import PrivacyUnit

CUBE = {
    "attributes": [
        {"name": "delay", "kind": "ordinal", "range": [0, 7], "width": 1},
        {"name": "carrier", "kind": "nominal", "categories": ["AA", "B6", "UA"]},
    ]
}
MAP = {
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
#: Parameters each mechanism needs on these schemas (as small as the conformance cases').
PARAMS: dict[str, list[str]] = {
    "matrix": ["--workload", "marginals:1"],
    "auto": ["--workload", "marginals:1"],
    "htf": ["--param", "theta_count=5"],
    "kdtree": ["--param", "height=4"],
    "quadtree": ["--param", "height=3"],
}
NAMES = sorted(n for n in registry.MECHANISMS if INPUTS[n] != "census")


def flights(n: int = 800, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    weights = rng.pareto(1.0, 40) + 0.05
    return pd.DataFrame(
        {
            "tailnum": rng.choice([f"N{i:02d}" for i in range(40)], n, p=weights / weights.sum()),
            "delay": rng.integers(0, 8, n),
            "carrier": rng.choice(["AA", "B6", "UA"], n).astype(object),
            "lat": rng.uniform(0, 1, n),
            "lon": rng.uniform(0, 1, n),
        }
    )


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    data = tmp_path / "flights.csv"
    flights().to_csv(data, index=False)
    cube, grid = tmp_path / "cube.json", tmp_path / "map.json"
    cube.write_text(json.dumps(CUBE))
    grid.write_text(json.dumps(MAP))
    return data, cube, grid


@pytest.mark.parametrize("name", NAMES)
def test_every_mechanism_releases_per_unit(
    name: str, files: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    data, cube, grid = files
    out = tmp_path / "out"
    schema = grid if name in SPATIAL else cube
    args = ["release", str(data), "--schema", str(schema), "--mechanism", name, "--epsilon", "1"]
    args += ["--out", str(out), "--total-epsilon", "10", "--no-report", *PARAMS.get(name, [])]
    assert main([*args, "--privacy-unit", "tailnum", "--max-rows-per-unit", "6"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    meta = manifest.get("metadata", manifest)
    assert meta["privacy_unit"] == {"column": "tailnum", "max_rows_per_unit": 6}
    # every declared sensitivity is at least the unit's 6 rows (group privacy or K x the norm)
    assert min(meta["sensitivity"].values()) >= 6.0
    # the exact figures of the bounding never reach a release file
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert b"rows_dropped_by_bound" not in text and b"rows_before_bounding" not in text


def test_without_a_unit_the_manifest_says_row(
    files: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    data, cube, _ = files
    out = tmp_path / "out"
    args = ["release", str(data), "--schema", str(cube), "--mechanism", "identity"]
    assert main([*args, "--epsilon", "1", "--out", str(out), "--total-epsilon", "5"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest.get("metadata", manifest)["privacy_unit"] == "row"


def test_refusals_come_before_the_ledger_is_charged(
    files: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, cube, _ = files
    base = ["release", str(data), "--schema", str(cube), "--mechanism", "identity", "--epsilon"]
    base += ["1", "--out", str(tmp_path / "o"), "--total-epsilon", "5"]
    assert main([*base, "--privacy-unit", "tailnum"]) == 2
    assert "give --max-rows-per-unit K" in capsys.readouterr().err
    assert main([*base, "--privacy-unit", "nope", "--max-rows-per-unit", "3"]) == 2
    assert "privacy unit column 'nope' is not in the data" in capsys.readouterr().err
    frame = flights()
    frame.loc[0, "tailnum"] = None
    holes = tmp_path / "holes.csv"
    frame.to_csv(holes, index=False)
    holed = [*base[:1], str(holes), *base[2:]]
    assert main([*holed, "--privacy-unit", "tailnum", "--max-rows-per-unit", "3"]) == 2
    assert "'tailnum' has 1 NULL ids" in capsys.readouterr().err
    census = ["release", str(data), "--mechanism", "census-hierarchy", "--group-by", "tailnum"]
    census += ["--region", "carrier", "--hierarchy", str(cube), "--max-size", "9"]
    census += ["--groups-are-public", "--epsilon", "1", "--out", str(tmp_path / "c")]
    assert main([*census, "--privacy-unit", "tailnum", "--max-rows-per-unit", "3"]) == 2
    assert "census mechanisms protect one person" in capsys.readouterr().err
    # nothing was charged by any of these
    main(["budget", str(data), "--json"])
    shown = capsys.readouterr()
    assert '"releases": []' in shown.out or "no total" in shown.err.lower(), shown


def test_the_older_spatial_flags_are_the_same_unit(
    files: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, _, grid = files
    base = ["release", str(data), "--schema", str(grid), "--mechanism", "ug", "--epsilon", "1"]
    base += ["--total-epsilon", "10", "--no-report", "--seed", "3"]
    old = [*base, "--out", str(tmp_path / "a"), "--user-column", "tailnum"]
    assert main([*old, "--max-points-per-user", "6"]) == 0
    new = [*base, "--out", str(tmp_path / "b"), "--privacy-unit", "tailnum"]
    assert main([*new, "--max-rows-per-unit", "6"]) == 0
    a = json.loads((tmp_path / "a" / "manifest.json").read_text())
    b = json.loads((tmp_path / "b" / "manifest.json").read_text())
    meta_a, meta_b = a.get("metadata", a), b.get("metadata", b)
    assert meta_a["privacy_unit"] == meta_b["privacy_unit"]
    assert meta_a["sensitivity"] == meta_b["sensitivity"]
    assert meta_a["params"]["user_bound"] == meta_b["params"]["user_bound"] == 6
    both = [*base, "--out", str(tmp_path / "c"), "--privacy-unit", "tailnum"]
    both += ["--max-rows-per-unit", "6", "--user-column", "tailnum"]
    assert main([*both, "--max-points-per-user", "6"]) == 2
    assert "older names of --privacy-unit" in capsys.readouterr().err


# -- Spark ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("the Spark engine needs a Java runtime")
    from dpcube.engine.spark_engine import local_session

    session = local_session(cores=1)
    yield session
    session.stop()


def test_every_mechanism_releases_per_unit_on_spark(spark: Any) -> None:
    from dpcube.engine.spark_engine import SparkEngine
    from dpcube.mechanisms.datacube.mechanism import CubeSource

    frame = flights(400)
    sdf = SparkEngine(spark).frame(frame)
    unit = {"privacy_unit": "tailnum", "max_rows_per_unit": 6, "bounding_seed": 1}
    cube, grid = dpcube.Schema.from_dict(CUBE), dpcube.Schema.from_dict(MAP)
    counted = {
        "cube": dpcube.histogram(sdf, cube, dataset="t", **unit),  # type: ignore[arg-type]
        "map": dpcube.histogram(sdf, grid, dataset="t", **unit),  # type: ignore[arg-type]
    }
    duck = dpcube.histogram(frame, cube, dataset="t", **unit)  # type: ignore[arg-type]
    np.testing.assert_array_equal(duck.counts, counted["cube"].counts)
    params: dict[str, dict[str, Any]] = {
        "matrix": {"workload": "marginals:1"},
        "auto": {"workload": "marginals:1"},
        "htf": {"theta_count": 5},
        "kdtree": {"height": 4},
        "quadtree": {"height": 3},
    }
    for name in NAMES:
        cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
        mech = cls(1.0, **params.get(name, {}))
        if name == "datacube":
            data: Any = CubeSource(
                sdf, cube, privacy_unit="tailnum", max_rows_per_unit=6, bounding_seed=1
            )
        else:
            data = counted["map" if name in SPATIAL else "cube"]
        release = mech.release(data, random_state=2, account=False)
        assert release.metadata.privacy_unit == PrivacyUnit("tailnum", 6).manifest(), name
        assert min(release.metadata.sensitivity.values()) >= 6.0, name
