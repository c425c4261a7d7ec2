"""Small seeded releases of every kind, saved once per test session, for the service tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcube import DataCube, Histogram, Identity, Schema, UniformGrid

#: Bootstrap replicates in the tests: the fewest accepted (MIN_RUNS), to keep them fast.
RUNS = 20

CELL_SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 3], "width": 1},
            {"name": "income", "kind": "ordinal", "edges": [0, 100, 500]},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
        ]
    }
)
CUBE_SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "a", "kind": "nominal", "categories": ["x", "y"]},
            {"name": "b", "kind": "nominal", "categories": ["u", "v", "w"]},
        ]
    }
)
SPATIAL_SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {
                "name": "loc",
                "kind": "spatial",
                "columns": ["lat", "lon"],
                "bbox": [10.0, 20.0, 14.0, 28.0],
                "resolution": [4, 8],
            }
        ]
    }
)


def make_releases(root: Path) -> dict[str, Path]:
    """Save one seeded release of each kind under ``root``; their directories by kind."""
    from dpcube.mechanisms.census.mechanism import CensusHierarchy

    out = {
        "cells": Identity(1.0).release(
            Histogram(CELL_SCHEMA, np.arange(16).reshape(4, 2, 2)), random_state=7
        ),
        "cube": DataCube(1.0, method="all").release(
            Histogram(CUBE_SCHEMA, np.arange(6).reshape(2, 3) * 5), random_state=3
        ),
        "grid": UniformGrid(1.0, grid_size=2).release(
            Histogram(SPATIAL_SCHEMA, np.random.default_rng(1).integers(0, 20, (4, 8))),
            random_state=2,
        ),
    }
    case = CensusHierarchy.conformance_cases()[0]
    counts = np.random.default_rng(4).integers(1, 4, case.schema.shape)
    out["census"] = case.make("add_remove").release(
        case.prepare(Histogram(case.schema, counts)), random_state=5
    )
    paths = {}
    for name, release in out.items():
        paths[name] = release.save(root / name)
    return paths


@pytest.fixture(scope="session")
def release_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_releases(tmp_path_factory.mktemp("served"))
