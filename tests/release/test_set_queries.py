"""Sets of categories ``{"attr": {"in": [...]}}``: one linear query, the sum of disjoint boxes,
answered and given its variance and interval by every release kind."""

from __future__ import annotations

import numpy as np
import pytest

from dpcube import Histogram, Schema
from dpcube.errors import QueryError
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.mechanism import CensusHierarchy
from dpcube.mechanisms.census.table import GroupSizeTable
from dpcube.mechanisms.datacube import DataCube
from dpcube.mechanisms.identity import Identity
from dpcube.mechanisms.matrix.mechanism import MatrixMechanism
from dpcube.mechanisms.matrix.strategies import build_strategy
from dpcube.mechanisms.privelet.mechanism import Privelet
from tests.helpers.census_bruteforce import random_table

TREE = {
    "east": {"ne": ["UA", "B6"], "se": ["EV", "AA"]},
    "west": {"nw": ["DL", "WN"], "sw": ["AS", "HA"]},
}
SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "carrier", "kind": "nominal", "hierarchy": TREE},
            {"name": "hour", "kind": "ordinal", "range": [0, 3], "width": 1},
        ]
    }
)
COUNTS = np.arange(32).reshape(8, 4) * 3


def test_schema_reads_a_set_as_disjoint_runs_and_a_node_as_its_leaves() -> None:
    carrier = SCHEMA["carrier"]
    assert carrier.members({"in": ["UA", "DL"]}) == ((0, 0), (4, 4))
    assert carrier.members({"in": ["west", "UA"]}) == ((0, 0), (4, 7))
    assert carrier.members({"in": ["B6", "se"]}) == ((1, 3),)  # adjacent runs merge
    assert SCHEMA.box({"carrier": {"in": ["B6", "se"]}}) == ((1, 3), (0, 3))
    assert SCHEMA.box_set({"carrier": {"in": ["UA", "sw"]}, "hour": [1, 2]}) == (
        ((0, 0), (6, 7)),
        ((1, 2),),
    )
    assert SCHEMA.coverage({"carrier": {"in": ["UA", "sw"]}}) == {"carrier": "{UA, AS..HA}"}


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ({"carrier": {"in": ["east", "UA"]}}, "share categories"),
        ({"carrier": {"in": ["UA", "UA"]}}, "share categories"),
        ({"carrier": {"in": []}}, "non-empty list"),
        ({"carrier": {"in": ["XX"]}}, "no category 'XX'"),
        ({"carrier": {"in": ["UA"], "bins": [0, 1]}}, "takes no other key"),
        ({"hour": {"in": [1, 2]}}, "categories of a nominal attribute"),
    ],
)
def test_bad_sets_are_refused_with_the_reason(query: dict, fragment: str) -> None:
    r = Identity(1.0).release(Histogram(SCHEMA, COUNTS), random_state=1, account=False)
    with pytest.raises(QueryError, match=fragment):
        r.answer(query)


def test_a_list_whose_ends_are_out_of_order_says_it_is_a_range_and_how_to_ask_for_a_set() -> None:
    with pytest.raises(QueryError) as err:
        SCHEMA.box({"carrier": ["DL", "UA"]})
    message = str(err.value)
    assert "range [first, last]" in message and '{"in": ["DL", "UA"]}' in message
    assert "carrier in (DL, UA)" in message


@pytest.mark.parametrize(
    "mechanism",
    [
        Identity(1.0),
        Privelet(1.0),
        MatrixMechanism(1.0, strategy="wavelet"),
        MatrixMechanism(1.0, strategy="hierarchical"),
        DataCube(1.0, method="all"),
        DataCube(1.0, method="all", consistency="l2"),
    ],
    ids=["identity", "privelet", "matrix-wavelet", "matrix-hierarchical", "cube", "cube-l2"],
)
def test_a_set_answers_the_sum_of_its_categories(mechanism) -> None:  # type: ignore[no-untyped-def]
    r = mechanism.release(Histogram(SCHEMA, COUNTS), random_state=4, account=False)
    query = {"carrier": {"in": ["UA", "DL", "sw"]}, "hour": [1, 3]}
    parts = [{"carrier": c, "hour": [1, 3]} for c in ("UA", "DL", "AS", "HA")]
    assert r.answer(query) == pytest.approx(sum(r.answer(p) for p in parts), abs=1e-6)
    both = r.answer_many([query, {"carrier": "UA"}])
    assert both[1] == pytest.approx(r.answer({"carrier": "UA"}))
    u = r.uncertainty([query, {"carrier": "UA"}])
    assert u.answers[0] == pytest.approx(r.answer(query), abs=1e-6)
    assert np.isfinite(u.lower[0]) and u.lower[0] <= u.answers[0] <= u.upper[0]


def test_identity_set_variance_counts_its_cells() -> None:
    r = Identity(1.0).release(Histogram(SCHEMA, COUNTS), random_state=4, account=False)
    cell = r.variance({"carrier": "UA", "hour": 0})
    assert r.variance({"carrier": {"in": ["UA", "sw"]}}) == pytest.approx(3 * 4 * cell)


@pytest.mark.parametrize("strategy", ["wavelet", "hierarchical", "identity"])
def test_matrix_set_variance_is_the_quadratic_form_of_the_set_vector(strategy: str) -> None:
    """Against ``v qᵀ (AᵀA)⁺ q`` with ``q`` the set's 0/1 vector and the Gram made dense: an
    independent computation of the same exact figure."""
    r = MatrixMechanism(1.0, strategy=strategy).release(
        Histogram(SCHEMA, COUNTS), random_state=4, account=False
    )
    model = r.variance_model
    inverse = np.linalg.pinv(build_strategy(model.spec).operator.gram().dense())
    q = np.zeros((8, 4))
    q[[0, 2, 3, 6, 7], 1:3] = 1.0
    vector = q.ravel()
    expected = model.noise_variance * float(vector @ inverse @ vector)
    query = {"carrier": {"in": ["UA", "se", "sw"]}, "hour": [1, 2]}
    assert r.variance(query) == pytest.approx(expected, rel=1e-9)


def test_privelet_set_variance_counts_the_covariances_of_its_boxes() -> None:
    """Against the noise map itself: Privelet's cells are ``hn_inverse`` of coefficients with
    independent noise of variance v each, so a query q has variance ``v Σ_k (qᵀ L e_k)²`` with
    ``L e_k`` the inverse of the k-th unit coefficient. The runs of {se, sw} covary (their
    common ancestors' coefficients): adding their own variances is 10 % off."""
    from dpcube.mechanisms.privelet.transforms import hn_inverse

    r = Privelet(1.0).release(Histogram(SCHEMA, COUNTS), random_state=4, account=False)
    model = r.variance_model
    shape = tuple(ax.size for ax in model.axes)
    q = np.zeros((8, 4))
    q[[2, 3, 6, 7], 0:3] = 1.0
    loads = []
    for k in range(int(np.prod(shape))):
        unit = np.zeros(shape)
        unit.flat[k] = 1.0
        loads.append(float(np.sum(q * hn_inverse(unit, model.axes, weighted=True))))
    exact = model.coefficient_variance * float(np.sum(np.square(loads)))
    query = {"carrier": {"in": ["se", "sw"]}, "hour": [0, 2]}
    assert r.variance(query) == pytest.approx(exact, rel=1e-9)
    runs = r.variance({"carrier": "se", "hour": [0, 2]}) + r.variance(
        {"carrier": "sw", "hour": [0, 2]}
    )
    assert abs(runs / exact - 1.0) > 0.05


@pytest.mark.parametrize("consistency", [None, "l2"])
def test_cube_set_variance_is_that_of_as_many_cells(consistency: str | None) -> None:
    """A cuboid's cells are exchangeable under its noise and L2 consistency: the set {UA, AA}
    has the variance of any two of its carriers, e.g. the range UA..B6."""
    r = DataCube(1.0, method="all", consistency=consistency).release(
        Histogram(SCHEMA, COUNTS), random_state=4, account=False
    )
    assert r.variance({"carrier": {"in": ["UA", "AA"]}}) == pytest.approx(
        r.variance({"carrier": ["UA", "B6"]}), rel=1e-12
    )


def _census():  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(30)
    h = RegionHierarchy.from_parents(
        {"N": None, "A": "N", "B": "N", "a1": "A", "a2": "A", "b1": "B", "b2": "B"}
    )
    table = GroupSizeTable(h, random_table(rng, h, 4, mean=6.0), public_groups=True)
    return h, table


def test_census_set_of_regions_sums_them_and_refuses_overlaps() -> None:
    h, table = _census()
    leaves = list(h.names[h.leaves])[:3]
    r = CensusHierarchy(1.0, method="dp").release(table, random_state=2, account=False)
    query = {"region": {"in": leaves}, "size": [2, 3]}
    assert r.answer(query) == pytest.approx(
        sum(r.answer({"region": x, "size": [2, 3]}) for x in leaves)
    )
    parent = h.names[int(h.parent[h.index[leaves[0]]])]
    with pytest.raises(QueryError, match="overlap"):
        r.answer({"region": {"in": [leaves[0], parent]}})


def test_census_bound_of_a_set_is_one_sum_of_noises_and_covers() -> None:
    """The bound of a set of regions rests on the sum of their measurements: its half-width is
    the point of ONE sum of all their noises (narrower than adding the regions' own bounds),
    and it covers the true total. Coverage at level 0.8 over 200 releases: the bound's miss
    rate is at most 0.2, so the count of misses is at most Binomial(200, 0.2): mean 40, sd
    5.7; 60 misses is 3.5 sd above."""
    h, table = _census()
    leaves = list(h.names[h.leaves])[:3]
    query = {"region": {"in": leaves}, "size": [1, 2]}
    singles = [{"region": x, "size": [1, 2]} for x in leaves]
    truth = sum(table.counts[h.index[x], :2].sum() for x in leaves)
    misses = 0
    for seed in range(200):
        r = CensusHierarchy(1.0, method="dp").release(table, random_state=seed, account=False)
        u = r.uncertainty([query, *singles], level=0.8)
        assert list(u.interval_kind) == ["bound"] * 4
        if seed == 0:
            own = float(np.sum(u.upper[1:] - u.lower[1:]))
            assert u.upper[0] - u.lower[0] < own
        misses += not (u.lower[0] <= truth <= u.upper[0])
    assert misses <= 60


def test_census_table_inside_a_set_of_regions() -> None:
    _, table = _census()
    r = CensusHierarchy(1.0, method="dp").release(table, random_state=2, account=False)
    where = {"region": {"in": ["a1", "b2"]}}
    labels, queries = r.table_cells(["region", "size"], {**where, "size": [1, 2]})
    assert labels["region"] == ["a1", "a1", "b2", "b2"] and labels["size"] == [1, 2, 1, 2]
    labels, queries = r.table_cells(["size"], where)
    assert list(r.answer_many(queries)) == [
        r.answer({"region": "a1", "size": s}) + r.answer({"region": "b2", "size": s})
        for s in labels["size"]
    ]
