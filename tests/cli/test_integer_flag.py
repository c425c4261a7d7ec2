"""``dpcube release --integer``: every release kind made whole, and refused before the charge."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpcube import load_release
from dpcube.cli.main import main
from dpcube.release.integer import is_integer


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
    return ["release", str(f["data"]), "--out", str(f["out"]), "--epsilon", "0.5",
            "--total-epsilon", "5", "--seed", "3", "--integer", *extra]  # fmt: skip


def _cases(f: dict[str, Path]) -> dict[str, list[str]]:
    return {
        "cells": _release(f, "--mechanism", "identity", "--schema", str(f["schema"])),
        "cuboids": _release(f, "--mechanism", "datacube", "--schema", str(f["schema"])),
        "census_hierarchy": _release(
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
        "spatial_leaves": _release(f, "--mechanism", "htf", "--schema", str(f["spatial"])),
    }


@pytest.mark.parametrize("kind", ["cells", "cuboids", "census_hierarchy", "spatial_leaves"])
def test_integer_flag_makes_every_kind_whole(
    files: dict[str, Path], kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(_cases(files)[kind])
    err = capsys.readouterr().err
    assert code == 0, err
    release = load_release(files["out"])
    assert release.kind == kind and is_integer(release.metadata)
    manifest = json.loads((files["out"] / "manifest.json").read_text())
    record = manifest["metadata"]["report"]["integer"]
    assert record["whole"] and record["non_negative"] and record["consistent"]
    assert "TopDown" in record["method"] and "nothing charged" in record["budget"]
    if kind == "cells":
        figures = release.counts  # type: ignore[attr-defined]
    elif kind == "cuboids":
        figures = np.concatenate([release.cuboid(list(c)).ravel() for c in release.published])  # type: ignore[attr-defined]
    elif kind == "census_hierarchy":
        figures = release.values  # type: ignore[attr-defined]
        assert release.is_whole_and_consistent()  # type: ignore[attr-defined]
    else:
        figures = release.leaf_counts  # type: ignore[attr-defined]
    assert np.all(figures >= 0) and np.array_equal(figures, np.rint(figures))
    # one charge, of the release's epsilon: the integer step spent nothing
    code = main(["budget", str(files["data"]), "--json"])
    budget = json.loads(capsys.readouterr().out)
    assert budget["spent"]["epsilon"] == pytest.approx(0.5)


def test_integer_flag_is_refused_before_the_charge_for_a_sum_cube(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _release(
        files, "--mechanism", "datacube", "--schema", str(files["schema"]),
        "--param", "measure=sum", "--param", "value=hh", "--param", "bounds=[0,99]",
    )  # fmt: skip
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "--integer cannot apply" in err and "sum measure" in err
    assert "nothing was charged" in err
    assert not files["out"].exists()
    # without --integer the same release goes through: the refusal was the flag's
    assert main([a for a in argv if a != "--integer"]) == 0
