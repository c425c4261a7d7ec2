"""Whole-number, non-negative, consistent releases (``to_integer``, ``dpcube release --integer``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcube import Histogram, Identity, Schema, answer_uncertainty, load_release
from dpcube.errors import ReleaseError
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.mechanism import CensusHierarchy
from dpcube.mechanisms.census.release import CensusRelease
from dpcube.mechanisms.datacube.lattice import is_subset, rollup
from dpcube.mechanisms.datacube.mechanism import DataCube
from dpcube.mechanisms.spatial._common import spatial_case_schema
from dpcube.mechanisms.spatial.htf import HTF
from dpcube.mechanisms.spatial.trees import QuadTree
from dpcube.privacy.ledger import BudgetLedger
from dpcube.release.integer import (
    controlled_round,
    is_integer,
    simplex_projection,
    topdown_hierarchy,
)

# -- the pieces --------------------------------------------------------------------------------

values = st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(values, st.floats(0, 200, allow_nan=False))
def test_simplex_projection_is_the_nearest_non_negative_table_of_the_total(
    v: list[float], total: float
) -> None:
    y = np.array(v)
    x = simplex_projection(y, np.zeros(len(y), np.int64), np.array([total]))
    assert np.all(x >= 0)
    assert x.sum() == pytest.approx(total, abs=1e-6 * max(1.0, total))
    # KKT of min ||x - y||^2 on {x >= 0, sum x = t}: x - y = -theta on the support, and
    # x - y >= -theta (y <= theta) off it
    support = x > 1e-12
    if support.any():
        theta = float(np.mean(y[support] - x[support]))
        assert np.allclose(y[support] - x[support], theta, atol=1e-6)
        assert np.all(y[~support] <= theta + 1e-6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 30, allow_nan=False), min_size=1, max_size=30))
def test_controlled_rounding_keeps_the_whole_total_and_moves_each_cell_less_than_one(
    v: list[float],
) -> None:
    x = np.array(v)
    total = np.rint(x.sum())
    if not np.floor(x).sum() <= total <= np.ceil(x).sum():  # a total no rounding reaches
        return
    r = controlled_round(x, np.zeros(len(x), np.int64), np.array([total]))
    assert r.dtype == np.int64 and np.all(r >= 0)
    assert r.sum() == total
    assert np.all(np.abs(r - x) < 1 + 1e-9)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 20, allow_nan=False), min_size=2, max_size=12))
def test_largest_remainders_reach_the_rounding_lps_optimum(v: list[float]) -> None:
    """The L1 rounding problem under one sum, solved by HiGHS as an LP (its constraint matrix,
    bounds and one row of ones, is totally unimodular), has the objective the largest
    remainders give."""
    from scipy.optimize import linprog

    x = np.array(v)
    total = float(np.rint(x.sum()))
    floor = np.floor(x)
    if not floor.sum() <= total <= np.ceil(x).sum():
        return
    frac = x - floor
    # z in [0, 1] (up or not); |floor + z - x| = |z - frac| = frac + (1 - 2 frac) z on [0, 1]
    result = linprog(
        1.0 - 2.0 * frac,
        A_eq=np.ones((1, len(x))),
        b_eq=[total - floor.sum()],
        bounds=[(0.0, 1.0)] * len(x),
        method="highs",
    )
    assert result.status == 0
    optimum = float(result.fun + frac.sum())
    ours = controlled_round(x, np.zeros(len(x), np.int64), np.array([total]))
    assert float(np.abs(ours - x).sum()) == pytest.approx(optimum, abs=1e-7)


@st.composite
def random_trees(draw: Any) -> tuple[RegionHierarchy, np.ndarray]:
    """A random hierarchy of 2 or 3 levels and noisy rows (negatives included) for every region."""
    levels = draw(st.integers(2, 3))
    parents: dict[str, str] = {}
    frontier = ["root"]
    for lv in range(1, levels):
        nxt = []
        for p in frontier:
            for c in range(draw(st.integers(1, 4))):
                name = f"{p}.{c}"
                parents[name] = p
                nxt.append(name)
        frontier = nxt
        assert lv
    h = RegionHierarchy.from_parents(parents)
    cols = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**16))
    noisy = np.random.default_rng(seed).normal(3.0, 4.0, size=(h.size, cols))
    return h, noisy


@settings(max_examples=60, deadline=None)
@given(random_trees(), st.integers(0, 60))
def test_topdown_on_random_hierarchies_is_whole_non_negative_and_consistent(
    tree: tuple[RegionHierarchy, np.ndarray], groups: int
) -> None:
    h, noisy = tree
    out = topdown_hierarchy(noisy, h.parent, h.level, root_total=groups)
    assert out.dtype == np.int64 and np.all(out >= 0)
    assert out[0].sum() == groups
    assert np.array_equal(h.aggregate(out[h.leaves]), out)  # every region = its children


# -- data cubes ----------------------------------------------------------------------------------


def _nominal(cards: list[int]) -> Schema:
    return Schema.from_dict(
        {
            "attributes": [
                {"name": f"a{i}", "kind": "nominal", "categories": [str(j) for j in range(k)]}
                for i, k in enumerate(cards)
            ]
        }
    )


@settings(max_examples=12, deadline=None)
@given(
    st.lists(st.integers(2, 4), min_size=2, max_size=3),
    st.sampled_from([None, "l2", "l1"]),
    st.sampled_from(["all", "k=1", "k=2"]),
    st.integers(0, 2**16),
)
def test_random_cubes_become_whole_non_negative_and_consistent(
    cards: list[int], consistency: str | None, publish: str, seed: int
) -> None:
    schema = _nominal(cards)
    rng = np.random.default_rng(seed)
    counts = rng.poisson(rng.choice([0.2, 3.0], size=schema.shape))  # sparse: negatives likely
    release = DataCube(0.5, method="all", consistency=consistency, publish=publish).release(
        Histogram(schema, counts), random_state=seed, account=False
    )
    whole = release.to_integer()
    assert whole.kind == "cuboids" and is_integer(whole.metadata)
    lattice = whole.geometry.lattice
    published = {whole.geometry.mask(list(c)): whole.cuboid(list(c)) for c in whole.published}
    totals = set()
    for mask, cells in published.items():
        assert np.all(cells >= 0) and np.array_equal(cells, np.rint(cells)), mask
        totals.add(float(cells.sum()))
        for big, big_cells in published.items():  # each cuboid sums to every published parent
            if mask != big and is_subset(mask, big):
                assert np.array_equal(rollup(big_cells, big, mask), cells)
    assert len(totals) == 1  # one grand total across cuboids
    # ... the released one (its least-variance estimate) made whole
    assert totals == {float(max(0, round(release.answer({}))))}
    assert lattice.d == len(cards)


def test_cube_integer_release_answers_with_no_interval_and_says_why(tmp_path: Path) -> None:
    schema = _nominal([3, 4])
    counts = np.random.default_rng(0).poisson(1.0, size=schema.shape)
    release = DataCube(1.0, consistency="l2").release(
        Histogram(schema, counts), random_state=1, account=False
    )
    assert answer_uncertainty(release, [{"a0": "1"}]).kind == "exact"
    whole = release.to_integer()
    u = answer_uncertainty(whole, [{"a0": "1"}])
    assert u.kind == "none" and not u.trusted(0) and "made whole" in u.reason
    loaded = load_release(whole.save(tmp_path / "cube"))
    assert is_integer(loaded.metadata)
    for c in whole.published:
        assert np.array_equal(loaded.cuboid(list(c)), whole.cuboid(list(c)))  # type: ignore[attr-defined]
    manifest = json.loads((tmp_path / "cube" / "manifest.json").read_text())
    assert manifest["metadata"]["report"]["integer"]["consistent"] is True
    assert "TopDown" in json.dumps(manifest["metadata"]["report"]["integer"])


def test_a_sum_cube_cannot_be_made_whole() -> None:
    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "nominal", "categories": ["x", "y"]},
                {"name": "v", "kind": "ordinal", "range": [0, 3], "width": 1},
            ]
        }
    )
    mechanism = DataCube(1.0, measure="sum", value="v", bounds=[0, 3])
    assert "sum measure" in str(mechanism.integer_unavailable(schema))
    assert DataCube(1.0).integer_unavailable(schema) is None


# -- cells, census, spatial ---------------------------------------------------------------------


def test_cells_become_whole_keep_their_total_and_charge_nothing(tmp_path: Path) -> None:
    schema = _nominal([5, 6])
    ledger = BudgetLedger(tmp_path / "d.ledger")
    ledger.set_total(1.0)
    counts = np.random.default_rng(2).poisson(0.5, size=schema.shape)
    release = Identity(0.5).release(Histogram(schema, counts), ledger=ledger, random_state=3)
    spent = ledger.spent()
    charges = len(ledger.charges())
    whole = release.to_integer()
    # post-processing: the ledger is exactly as it was
    assert ledger.spent() == spent and len(ledger.charges()) == charges
    assert whole.metadata.release_id == release.metadata.release_id
    assert whole.counts.dtype == np.int64 and np.all(whole.counts >= 0)
    assert whole.counts.sum() == max(0, round(float(release.counts.sum())))
    assert np.any(release.counts < 0)  # the test would not see the projection otherwise
    u = answer_uncertainty(whole, [{"a0": "1"}], runs=20, seed=0)
    assert u.kind == "bootstrap" and not u.trusted(0)  # model-based: never trusted
    assert whole.to_integer() is whole
    loaded = load_release(whole.save(tmp_path / "cells"))
    assert np.array_equal(loaded.counts, whole.counts) and is_integer(loaded.metadata)  # type: ignore[attr-defined]


def _census_table() -> Any:
    from dpcube.mechanisms.census.table import GroupSizeTable

    rng = np.random.default_rng(0)
    h = RegionHierarchy.from_parents(
        {"A": "US", "B": "US", "A1": "A", "A2": "A", "B1": "B", "B2": "B", "B3": "B"}
    )
    leaves = rng.poisson(2.0, size=(5, 4))
    return GroupSizeTable(h, h.aggregate(leaves)).declare_public_groups(declared_by="test")


@pytest.mark.parametrize("method", ["dp", "topdown"])
def test_census_integer_release_is_consistent_and_keeps_its_bounds(
    method: str, tmp_path: Path
) -> None:
    table = _census_table()
    release = CensusHierarchy(1.0, method=method).release(table, random_state=0, account=False)
    whole = release.to_integer()
    assert isinstance(whole, CensusRelease) and is_integer(whole.metadata)
    assert whole.is_whole_and_consistent()
    # every census method already releases such a table: the step changes nothing
    assert np.array_equal(whole.values, release.values)
    queries = [{"region": "A1", "size": [1, 2]}, {"size": 1}]
    u = answer_uncertainty(whole, queries)
    assert u.kind == "bound" and u.untrusted is None
    assert np.all((u.lower <= u.answers) & (u.answers <= u.upper))
    loaded = load_release(whole.save(tmp_path / "census"))
    assert np.array_equal(loaded.values, whole.values) and is_integer(loaded.metadata)  # type: ignore[attr-defined]


def test_an_inconsistent_census_table_is_made_consistent() -> None:
    release = CensusHierarchy(1.0, method="topdown").release(
        _census_table(), random_state=0, account=False
    )
    broken = release.values.copy()
    broken[3, 0] -= 3  # a leaf no longer sums into its parent, and may go negative
    edited = CensusRelease(release.metadata, release.hierarchy, broken, release.groups)
    assert not edited.is_whole_and_consistent()
    whole = edited.to_integer()
    assert whole.is_whole_and_consistent()
    assert "projected" in json.dumps(whole.metadata.report["integer"])


@pytest.mark.parametrize("make", [lambda: HTF(0.5), lambda: QuadTree(0.5, height=3)])
def test_spatial_leaves_become_whole_and_keep_their_bounds(make: Any, tmp_path: Path) -> None:
    schema = spatial_case_schema(16, 16)
    rng = np.random.default_rng(4)
    grid = np.zeros((16, 16), dtype=np.int64)
    grid[2:5, 3:6] = rng.poisson(4.0, size=(3, 3))  # mostly empty: negative leaves likely
    release = make().release(Histogram(schema, grid), random_state=5, account=False)
    whole = release.to_integer()
    counts = whole.leaf_counts
    assert counts.dtype == np.int64 and np.all(counts >= 0)
    assert counts.sum() == max(0, round(float(np.sum(release.leaf_counts))))
    queries = [{"p": [[0, 7], [0, 7]]}, {"p": [[2, 4], [3, 5]]}]
    u = answer_uncertainty(whole, queries)
    assert u.kind == "bound" and u.untrusted is None
    assert np.all((u.lower <= u.answers) & (u.answers <= u.upper))
    loaded = load_release(whole.save(tmp_path / "leaves"))
    assert np.array_equal(loaded.leaf_counts, counts)  # type: ignore[attr-defined]
    assert np.array_equal(answer_uncertainty(loaded, queries).upper, u.upper)


def test_a_kind_without_whole_numbers_refuses() -> None:
    from dpcube.release.base import Release

    class Other(Release):
        kind = "other"

        def answer_many(self, queries: Any) -> Any:
            return np.zeros(len(queries))

        def tables(self) -> dict[str, Any]:
            return {}

        @classmethod
        def restore(cls, *args: Any) -> Any:
            raise NotImplementedError

    release = Identity(1.0).release(
        Histogram(_nominal([2]), np.array([1, 2])), random_state=0, account=False
    )
    other = Other(None, release.metadata)
    with pytest.raises(ReleaseError, match="no whole-number post-processing"):
        other.to_integer()
