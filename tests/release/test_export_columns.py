"""What an export carries, the same way for every release kind: bin edges and coordinates as the
schema writes them (no float artefacts), the interval's confidence level in ``level``, and
census sizes named by the unit the curator grouped by."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from dpcube import DataCube, Histogram, Identity, Schema, UniformGrid
from dpcube.cli.main import main
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.mechanism import CensusHierarchy
from dpcube.mechanisms.census.table import GroupSizeTable
from dpcube.release.formats import encode

#: Edges that adding the width in floating point gets wrong: 30.1 + 59 * 0.1 is
#: 36.00000000000001, 33.7 + 0.64 * 5 / 64 ... are off in the last digits.
ORDINAL = {"name": "lat", "kind": "ordinal", "range": [30.1, 40], "width": 0.1}
SPATIAL = {
    "name": "loc",
    "kind": "spatial",
    "columns": ["la", "lo"],
    "bbox": [33.7, -118.67, 34.34, -118.15],
    "resolution": [64, 52],
}


def _decimals(values: list[str]) -> bool:
    """Every text is a decimal of at most 6 places (what the schema's numbers give)."""
    return all(len(v.split(".")[1]) <= 6 if "." in v else True for v in values)


def test_ordinal_edges_in_a_csv_are_the_schema_s_decimals() -> None:
    schema = Schema.from_dict({"attributes": [ORDINAL]})
    release = Identity(1.0).release(
        Histogram(schema, np.ones(schema.shape, dtype=np.int64)), random_state=1, account=False
    )
    rows = list(csv.DictReader(io.StringIO(encode(release.to_arrow(), "csv").decode())))
    assert rows[59]["lat_lo"] == "36" and rows[59]["lat"] == "[36, 36.1)"
    assert _decimals([r["lat_lo"] for r in rows] + [r["lat_hi"] for r in rows])
    assert [float(r["lat_lo"]) for r in rows[:3]] == [30.1, 30.2, 30.3]


def test_spatial_cell_and_leaf_bounds_are_the_schema_s_decimals() -> None:
    schema = Schema.from_dict({"attributes": [SPATIAL]})
    counts = np.random.default_rng(2).integers(0, 5, schema.shape)
    release = UniformGrid(1.0, grid_size=8).release(
        Histogram(schema, counts), random_state=1, account=False
    )
    table = release.to_arrow(runs=20, seed=1)
    rows = list(csv.DictReader(io.StringIO(encode(table, "csv").decode())))
    bounds = [r[c] for r in rows for c in ("loc_lat_lo", "loc_lat_hi", "loc_lon_lo", "loc_lon_hi")]
    assert _decimals(bounds), sorted(bounds, key=len)[-1]
    cells = Identity(1.0).release(Histogram(schema, counts), random_state=1, account=False)
    rows = list(csv.DictReader(io.StringIO(encode(cells.to_arrow(), "csv").decode())))
    assert _decimals([r["loc_lat_lo"] for r in rows] + [r["loc_lon_hi"] for r in rows])
    assert rows[1]["loc_lon_lo"] == "-118.66"


def _census(unit: str | None = "tail_num"):  # type: ignore[no-untyped-def]
    h = RegionHierarchy.from_parents({"US": None, "GA": "US", "NY": "US"})
    table = GroupSizeTable(h, h.aggregate(np.array([[3, 1, 2], [2, 2, 0]])), public_groups=True)
    table.unit = unit
    return CensusHierarchy(1.0, method="dp").release(table, random_state=3, account=False)


@pytest.mark.parametrize("kind", ["cells", "cuboids", "census", "spatial"])
def test_the_interval_level_is_the_level_column_in_every_kind(kind: str) -> None:
    schema = Schema.from_dict(
        {"attributes": [{"name": "c", "kind": "nominal", "categories": ["a", "b"]}, ORDINAL]}
    )
    hist = Histogram(schema, np.ones(schema.shape, dtype=np.int64))
    release = {
        "cells": lambda: Identity(1.0).release(hist, random_state=1, account=False),
        "cuboids": lambda: DataCube(1.0, method="all").release(hist, random_state=1, account=False),
        "census": _census,
        "spatial": lambda: UniformGrid(1.0, grid_size=4).release(
            Histogram(Schema.from_dict({"attributes": [SPATIAL]}), np.ones((64, 52), np.int64)),
            random_state=1,
            account=False,
        ),
    }[kind]()
    cuboid = ["c"] if kind == "cuboids" else None
    table = release.to_arrow(0.8, cuboid=cuboid, runs=20, seed=1)
    assert "level" in table.column_names and "confidence_level" not in table.column_names
    assert set(table.column("level").to_pylist()) == {0.8}


def test_census_tables_name_the_unit_not_persons(tmp_path: Path) -> None:
    release = _census("tail_num")
    table = release.to_pandas(runs=20, seed=1)
    assert {"region", "region_level", "size", "level"} <= set(table.columns)
    assert release.explorer_view()["hierarchy"]["size_label"] == "records per tail_num"
    release.save(tmp_path / "r")
    assert main(["report", str(tmp_path / "r")]) == 0
    html = (tmp_path / "r" / "report.html").read_text()
    assert "records per tail_num" in html and "(persons)" not in html
    loaded = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert loaded["state"]["unit"] == "tail_num"
    assert _census(None).size_label == "records per group"
