"""``dpcube query``/``export`` on inputs at the edges: a level whose interval cannot be computed,
a JSON ``--where`` nested past what can be read, a cuboid that names no attribute. Each is one
line and exit 2 (each was "internal error, please report")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcube import DataCube, Histogram, Identity, Schema
from dpcube.cli.main import main

SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "a", "kind": "nominal", "categories": ["x", "y"]},
            {"name": "b", "kind": "nominal", "categories": ["u", "v", "w"]},
        ]
    }
)


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("extremes")
    data = Histogram(SCHEMA, np.arange(6).reshape(2, 3))
    return {
        "cells": Identity(1.0).release(data, random_state=1).save(root / "cells"),
        "cube": DataCube(1.0, method="all").release(data, random_state=2).save(root / "cube"),
    }


def one_line_error(capsys: pytest.CaptureFixture[str], *fragments: str) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err, err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize("level", ["0.9999999999999999", "1e-300"])
def test_a_level_whose_interval_cannot_be_computed_is_one_line(
    releases: dict[str, Path], capsys: pytest.CaptureFixture[str], level: str
) -> None:
    assert main(["query", str(releases["cells"]), "--where", "a=x", "--level", level]) == 2
    one_line_error(capsys, "whose interval can be computed", "0.9999999999999998")


def test_a_where_nested_too_deep_is_one_line(
    releases: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    where = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert main(["query", str(releases["cells"]), "--where", where]) == 2
    one_line_error(capsys, "--where nests arrays and objects too deeply")


def test_a_cuboid_naming_no_attribute_is_one_line(
    releases: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.csv"
    argv = ["export", str(releases["cube"]), "--format", "csv", "--out", str(out)]
    assert main([*argv, "--cuboid", "../../etc"]) == 2
    one_line_error(capsys, "'../../etc', which is not an attribute", "the schema has a, b")
    assert not out.exists()
