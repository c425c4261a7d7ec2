"""Queries parsed once and every bootstrap replicate answered in one vectorised pass: the same
figures as answering each replicate and each query on its own (the straightforward loops are
kept here as the reference)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpcube
from dpcube import Histogram, Schema
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.datacube.mechanism import DataCube
from dpcube.mechanisms.spatial._common import spatial_case_schema
from dpcube.mechanisms.spatial.grids import AdaptiveGrid, UniformGrid
from dpcube.mechanisms.spatial.htf import HTF
from dpcube.mechanisms.spatial.release import brute_force_answers, leaf_overlaps
from dpcube.mechanisms.spatial.trees import KDTree, QuadTree
from dpcube.release.bounds import discrete_laplace_sum_point
from dpcube.release.uncertainty import answer_uncertainty, bootstrap_replicates

SIDE = 32
# Sums of at most a few thousand counts: float rounding of a different summation order stays
# far below 1e-9 of them.
TOL = {"rtol": 1e-9, "atol": 1e-9}
MECHANISMS = {
    "ug": lambda: UniformGrid(1.0),
    "htf": lambda: HTF(1.0),
    "kdtree": lambda: KDTree(1.0),
    "ag": lambda: AdaptiveGrid(1.0),
    "quadtree": lambda: QuadTree(1.0),
}


def _grid() -> np.ndarray:
    rng = np.random.default_rng(4)  # synthetic clustered points
    pts = np.clip(rng.normal(SIDE * 0.4, SIDE / 6, size=(6000, 2)), 0, SIDE - 1).astype(int)
    grid = np.zeros((SIDE, SIDE), dtype=np.int64)
    np.add.at(grid, (pts[:, 0], pts[:, 1]), 1)
    return grid


def _queries() -> list[dict[str, Any]]:
    rng = np.random.default_rng(5)
    out: list[dict[str, Any]] = [{}]
    for _ in range(40):
        (a0, a1), (b0, b1) = np.sort(rng.integers(0, SIDE, size=(2, 2)), axis=1).tolist()
        out.append({"p": {"bins": [[a0, a1], [b0, b1]]}})
    return out


def _leaf_release(name: str) -> Any:
    hist = Histogram(spatial_case_schema(SIDE, SIDE), _grid())
    return MECHANISMS[name]().release(hist, random_state=1, account=False)


def _fractions(release: Any, boxes: np.ndarray) -> np.ndarray:
    """(q, leaves) share of each leaf inside each box, by a loop over boxes."""
    r = release.rects
    area = ((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2])).astype(np.float64)
    out = np.zeros((len(boxes), len(r)))
    for i, ((a0, a1), (b0, b1)) in enumerate(boxes):
        dr = np.clip(np.minimum(r[:, 1], a1 + 1) - np.maximum(r[:, 0], a0), 0, None)
        dc = np.clip(np.minimum(r[:, 3], b1 + 1) - np.maximum(r[:, 2], b0), 0, None)
        out[i] = dr * dc / area
    return out


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_leaf_replicates_in_one_pass_equal_each_replicate(name: str) -> None:
    release = _leaf_release(name)
    queries = _queries()
    _truth, reps = bootstrap_replicates(release, 20, seed=3)
    boxes = release.boxes(queries)
    one_pass = release.replicate_answers(reps, release.parsed(queries))
    each = np.stack([brute_force_answers(rep.rects, rep.leaf_counts, boxes) for rep in reps])
    np.testing.assert_allclose(one_pass, each, **TOL)
    # and the summed-area pass (replicates with other leaves) on the same replicates
    moved = [type(rep).restore(rep.schema, rep.metadata, rep.tables(), {}) for rep in reps]
    moved[0].rects = moved[0].rects[::-1].copy()
    moved[0].leaf_counts = moved[0].leaf_counts[::-1].copy()
    np.testing.assert_allclose(release.replicate_answers(moved, queries), each, **TOL)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_sparse_overlaps_equal_the_loop_over_leaves(name: str) -> None:
    release = _leaf_release(name)
    queries = _queries() + list(release.table_cells()[1])[:50]
    boxes = release.boxes(queries)
    frac = _fractions(release, boxes)
    query, leaf, cells = leaf_overlaps(release.shape, release.rects, boxes)
    dense = np.zeros_like(frac)
    r = release.rects[leaf]
    dense[query, leaf] = cells / ((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2]))
    np.testing.assert_array_equal(dense, frac)
    counts = np.asarray(release.leaf_counts, dtype=np.float64)
    cut = (frac > 0) & (frac < 1)
    np.testing.assert_allclose(release.assumed_many(queries), (np.abs(counts) * frac * cut).sum(1))
    if release.variances is not None:
        np.testing.assert_allclose(
            release.variance_many(queries), (release.variances * frac**2).sum(1), **TOL
        )
    spread = (np.clip(counts, 0, None) ** 2 * frac * (1 - frac)).sum(1) / 2.0
    np.testing.assert_allclose(release.uniformity_variance_many(queries, 1.0), spread, **TOL)
    if release.bound_unavailable is None:
        own = release.raw_counts if release.raw_counts is not None else release.leaf_counts
        var = release.raw_variances if release.raw_variances is not None else release.variances
        groups, group = np.unique(var, return_inverse=True)
        one_hot = np.eye(len(groups))[np.ravel(group)]
        inside, touched = frac >= 1.0, frac > 0.0
        lower = (inside * own).sum(1) - discrete_laplace_sum_point(
            inside.astype(float) @ one_hot, groups, 0.025
        )
        upper = (touched * own).sum(1) + discrete_laplace_sum_point(
            touched.astype(float) @ one_hot, groups, 0.025
        )
        answers = release.answer_many(queries)
        got_lo, got_hi, _ = release.bound_interval_many(queries, 0.95)
        np.testing.assert_allclose(got_lo, np.maximum(np.minimum(lower, answers), 0.0), **TOL)
        np.testing.assert_allclose(got_hi, np.maximum(upper, answers), **TOL)


def test_queries_are_parsed_once_for_all_replicates(monkeypatch: pytest.MonkeyPatch) -> None:
    release = _leaf_release("htf")
    queries = _queries()
    calls = []
    original = Schema.box

    def counting(self: Schema, query: Any) -> Any:
        calls.append(1)
        return original(self, query)

    monkeypatch.setattr(Schema, "box", counting)
    answer_uncertainty(release, queries, runs=25, seed=2, intervals="model")
    assert len(calls) == len(queries)  # not once per replicate (25 x more)


def _census() -> Any:
    parents: dict[str, str | None] = {"US": None}
    for s in range(3):
        parents[f"S{s}"] = "US"
        for c in range(6):
            parents[f"S{s}C{c}"] = f"S{s}"
    h = RegionHierarchy.from_parents(parents)
    leaves = np.random.default_rng(3).poisson(15, size=(18, 5))  # synthetic group sizes
    table = dpcube.GroupSizeTable(h, h.aggregate(leaves), public_groups=True)
    return dpcube.CensusHierarchy(1.0, method="dp").release(table, random_state=1, account=False)


def test_census_replicates_and_bounds_equal_query_by_query() -> None:
    release = _census()
    queries: list[dict[str, Any]] = [{}, {"region": "S1", "size": [2, 4]}, {"region": "S2C3"}]
    queries += [{"region": n, "size": s} for n in ("S0", "S1C5") for s in range(1, 6)]
    _truth, reps = bootstrap_replicates(release, 20, seed=3)
    each = np.stack([[rep.answer(q) for q in queries] for rep in reps])
    np.testing.assert_array_equal(release.replicate_answers(reps, release.parsed(queries)), each)
    lower, upper, _ = release.bound_interval_many(queries, 0.95)
    one = [release.bound_interval_many([q], 0.95) for q in queries]
    np.testing.assert_array_equal(lower, [lo[0] for lo, _, _ in one])
    np.testing.assert_array_equal(upper, [hi[0] for _, hi, _ in one])
    assert release.variance_many(queries).tolist() == [release.variance(q) for q in queries]


def test_cube_bootstrap_from_parsed_queries_equals_plain_queries() -> None:
    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "ordinal", "range": [0, 5], "width": 1},
                {"name": "b", "kind": "nominal", "categories": ["x", "y", "z"]},
            ]
        }
    )
    cells = np.random.default_rng(2).integers(0, 20, schema.shape)  # synthetic counts
    cube = DataCube(1.0, nonnegative=True, integral=True).release(
        Histogram(schema, cells), random_state=1, account=False
    )
    queries = [{}, {"a": [1, 3]}, {"b": "y"}, {"a": [0, 2], "b": "z"}]
    _truth, reps = bootstrap_replicates(cube, 20, seed=3)
    each = np.stack([[rep.answer(q) for q in queries] for rep in reps])
    np.testing.assert_array_equal(cube.replicate_answers(reps, cube.parsed(queries)), each)


def test_leaf_replicates_keep_their_tables_between_calls() -> None:
    release = _leaf_release("htf")  # replicates with leaves of their own: summed-area tables
    queries = release.parsed(_queries())
    _truth, reps = bootstrap_replicates(release, 20, seed=3)
    first = release.replicate_answers(reps, queries, keep_bytes=1 << 30)
    assert all(rep._prefix is not None for rep in reps)
    kept = reps[0]._prefix.base
    again = release.replicate_answers(reps, queries, keep_bytes=1 << 30)
    assert all(rep._prefix.base is kept for rep in reps)  # read, not rebuilt
    np.testing.assert_array_equal(again, first)
    release.replicate_answers(reps, queries, keep_bytes=0)
    assert all(rep._prefix is None for rep in reps)  # over the limit: dropped


@pytest.mark.parametrize("gain", [0, 10**9])  # 0: always the coarser grid; 10**9: never
def test_replicates_with_their_own_leaves_on_either_table(
    gain: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpcube.mechanisms.spatial import release as leaf_module

    monkeypatch.setattr(leaf_module, "COMPRESSION_GAIN", gain)
    release = _leaf_release("kdtree")
    queries = _queries()
    _truth, reps = bootstrap_replicates(release, 20, seed=4)
    boxes = release.boxes(queries)
    rects = np.concatenate([rep.rects for rep in reps])
    counts = np.concatenate([rep.leaf_counts for rep in reps])
    replicate = np.repeat(np.arange(len(reps)), [len(rep.rects) for rep in reps])
    got = leaf_module.replicate_leaf_answers(
        release.shape, rects, counts, replicate, len(reps), boxes
    )
    each = np.stack([brute_force_answers(rep.rects, rep.leaf_counts, boxes) for rep in reps])
    np.testing.assert_allclose(got, each, **TOL)
