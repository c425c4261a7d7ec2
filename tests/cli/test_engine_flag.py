"""``dpcube release --engine spark`` is used or refused by name, never ignored (issue #13 part 6).

The data cube counts its cuboids with DuckDB GROUPING SETS, the census mechanism computes its
group-size table in DuckDB, and the spatial user-level bound runs in DuckDB: for these the flag
used to be dropped silently and the release ran on DuckDB. Each is now refused before the data is
read or the budget touched.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpcube import registry
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


@pytest.mark.parametrize("case", ["datacube", "census-hierarchy", "ug --user-column"])
def test_engine_spark_refused_by_name_before_anything_is_read(
    files: dict[str, Path], case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _cases(files)[case]
    # The same command on DuckDB releases (the refusal is about the engine, nothing else).
    assert main([*argv, "--total-epsilon", "5", "--seed", "1"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    budget_before = sorted(p.read_bytes() for p in files["home"].rglob("*") if p.is_file())
    out = files["out"].parent / "rel-spark"
    argv = [*argv[:3], str(out), *argv[4:]]
    code = main([*argv, "--engine", "spark"])
    err = capsys.readouterr().err
    assert code == 2
    mechanism = case.split()[0]
    assert f"error: --engine spark: --mechanism {mechanism} counts its input with duckdb only" in (
        err
    )
    assert "rerun without --engine spark" in err and err.count("\n") == 1
    assert not out.exists()
    assert sorted(p.read_bytes() for p in files["home"].rglob("*") if p.is_file()) == budget_before


def test_histogram_mechanisms_accept_both_engines() -> None:
    """Every other mechanism counts a histogram, which both engines build: nothing to refuse."""
    args = argparse.Namespace(engine="spark", user_column=None)
    narrowed = {"datacube", "census-hierarchy"}
    for name in registry.MECHANISMS:
        cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
        engines, _ = cls.counting_engines(args)
        assert ("spark" in engines) == (name not in narrowed), name
