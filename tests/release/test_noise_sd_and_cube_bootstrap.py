"""Census answers carry their noise-only sd; non-linear data cubes get a bootstrap:
no release kind answers without an error estimate when one can be computed."""

from __future__ import annotations

import numpy as np
import pytest

from dpcube import Histogram, Schema
from dpcube.mechanisms.census import privacy as P
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.mechanism import CensusHierarchy
from dpcube.mechanisms.census.table import GroupSizeTable
from dpcube.mechanisms.datacube import DataCube
from dpcube.privacy.random import resolve_random_state
from dpcube.release.uncertainty import answer_uncertainty, format_answer


def _table() -> GroupSizeTable:
    h = RegionHierarchy.from_parents({"A": "US", "B": "US"})
    leaves = np.array([[40, 20, 10, 5], [30, 25, 5, 2]], dtype=np.int64)  # synthetic group sizes
    return GroupSizeTable(h, h.aggregate(leaves), public_groups=True)


@pytest.mark.parametrize(
    ("method", "measure"), [("dp", P.noisy_counts), ("cdp", P.noisy_cumulative)]
)
def test_census_noise_sd_matches_the_measurement_noise(method: str, measure: object) -> None:
    table = _table()
    release = CensusHierarchy(1.0, method=method).release(table, random_state=1, account=False)
    queries = [{"region": "A", "size": [1, 2]}, {"region": "US", "size": [2, 4]}]
    predicted = release.variance_many(queries)
    assert np.all(np.isfinite(predicted))
    # Brute force: draw the measurement itself many times and take the sample variance of the
    # query's figure (sizes lo..hi of its region, from counts or from cumulative counts). With
    # 4000 draws the sample variance's relative SE is about sqrt(2/4000 * kurtosis-ish) < 5 %;
    # discrete Laplace has excess kurtosis 3, so SE ~ sqrt((2 + 3) / 4000) = 3.5 %: 15 % = 4 SE.
    source = resolve_random_state(7)
    draws = []
    for _ in range(4000):
        noisy, _ = measure(table, 1.0, source, "add_remove")  # type: ignore[operator]
        noisy = np.asarray(noisy, dtype=np.float64)
        counts = noisy if method == "dp" else np.diff(noisy, axis=1, prepend=0)
        a = table.hierarchy.region_index("A")
        us = table.hierarchy.region_index("US")
        draws.append([counts[a, 0:2].sum(), counts[us, 1:4].sum()])
    empirical = np.var(np.asarray(draws), axis=0)
    np.testing.assert_allclose(empirical, predicted, rtol=0.15)
    u = answer_uncertainty(release, queries, intervals="model", runs=20, seed=1)
    assert u.kind == "bootstrap"
    assert "noise only, not the error" in format_answer(u.answers[0], u, 0)


def _cube_schema() -> Schema:
    return Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "nominal", "categories": ["0", "1", "2"]},
                {"name": "b", "kind": "nominal", "categories": ["0", "1"]},
                {"name": "c", "kind": "ordinal", "range": [0, 3], "width": 1},
            ]
        }
    )


def test_clamped_data_cube_gets_a_bootstrap() -> None:
    schema = _cube_schema()
    counts = np.random.default_rng(0).integers(0, 20, schema.shape)  # synthetic data
    hist = Histogram(schema, counts)
    cube = DataCube(1.0, nonnegative=True, integral=True)
    release = cube.release(hist, random_state=1, account=False)
    queries = [{"a": "1"}, {"b": "0", "c": [1, 2]}]
    u = answer_uncertainty(release, queries, intervals="model", runs=30, seed=2)
    assert u.kind == "bootstrap" and np.all(np.isfinite(u.stddev)) and np.all(u.stddev > 0)
    assert np.all(u.lower <= u.answers) and np.all(u.answers <= u.upper)
    # The world is the released estimate: its answers are the release's (made whole, >= 0).
    world = release.bootstrap_world()
    np.testing.assert_allclose(
        world.truth.answer_many(queries), np.maximum(release.answer_many(queries), 0), atol=1.0
    )
    l1 = DataCube(1.0, consistency="l1").release(hist, random_state=1, account=False)
    assert answer_uncertainty(l1, queries, intervals="model", runs=20, seed=3).kind == "bootstrap"
