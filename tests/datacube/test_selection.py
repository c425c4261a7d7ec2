"""Lattice, K_part variances and the selection algorithms (Ding, Winslett, Han and Li,
"Differentially Private Data Cubes: Optimizing Noise Sources and Consistency", SIGMOD 2011:
magnification and K_part, Secs. 2-3 and Example 3.1; Algorithm 1 (BMax), Sec. 4.1, Thm. 6 and
Example 4.1; Algorithm 2 (PMost), Sec. 4.2, Thm. 7 and Example 4.2)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcube.mechanisms.datacube.lattice import Lattice, best_sources, is_subset, parse_publish
from dpcube.mechanisms.datacube.mechanism import select
from dpcube.mechanisms.datacube.selection import (
    Coverage,
    allocated_bound,
    bound_max_variance,
    feasible,
    optimal_budgets,
    publish_most,
)

EX21 = Lattice((2, 7, 5))  # Sex, Age, Salary
L_ALL = list(range(8))
ADULT = Lattice((9, 16, 7, 15, 6, 5, 2, 2))


def C(label: str) -> int:
    return EX21.from_label(label)


def labels(masks) -> set[str]:
    return {EX21.label(m) for m in masks}


def brute_force_opt(lat: Lattice, published: list[int]) -> Fraction:
    """min over all non-empty L_pre ⊆ L_all of 2 |L_pre|^2 max_C min mag (eps = 1)."""
    cov = Coverage(lat, published)
    best = None
    cands = list(range(1 << lat.d))
    for r in range(1, len(cands) + 1):
        for subset in itertools.combinations(cands, r):
            if 2 * r * r > (best or math.inf):
                break
            worst = int(cov.best_mag(subset).max())
            if worst == np.iinfo(np.int64).max:
                continue
            value = Fraction(2 * r * r * worst)
            if best is None or value < best:
                best = value
    assert best is not None
    return best


# -- magnification (Sec. 3, eq. (2)) ---------------------------------------------------------------
def test_mag_values() -> None:
    expected = {
        ("C011", "C111"): 2, ("C110", "C111"): 5, ("C101", "C111"): 7, ("C010", "C111"): 10,
        ("C001", "C111"): 14, ("C100", "C111"): 35, ("C000", "C111"): 70, ("C000", "C110"): 14,
        ("C000", "C100"): 2,
    }  # fmt: skip
    for (a, b), m in expected.items():
        assert EX21.mag(C(a), C(b)) == m
    assert math.isinf(EX21.mag(C("C111"), C("C011")))
    for c in range(8):
        assert EX21.deg(c) == EX21.mag(c, EX21.base)
        assert EX21.cells(c) * EX21.deg(c) == 70


@given(st.lists(st.integers(1, 6), min_size=1, max_size=6), st.data())
@settings(max_examples=60, deadline=None)
def test_mag_multiplicative_on_chains(cards: list[int], data: st.DataObject) -> None:
    lat = Lattice(tuple(cards))
    c3 = data.draw(st.integers(0, lat.base))
    c2 = data.draw(st.integers(0, lat.base)) & c3
    c1 = data.draw(st.integers(0, lat.base)) & c2
    assert lat.mag(c1, c3) == lat.mag(c1, c2) * lat.mag(c2, c3)


# -- K_part variances (Example 3.1) and the level-wise programme -----------------------------------
def kpart_variances(sources: list[int]) -> dict[str, Fraction]:
    s = len(sources)
    out = best_sources(EX21, {m: Fraction(2 * s * s) for m in sources}, L_ALL)
    return {EX21.label(m): out[m][0] for m in L_ALL}


def test_example_3_1() -> None:
    assert set(kpart_variances(L_ALL).values()) == {128}
    base = kpart_variances([EX21.base])
    assert base == {
        "C111": 2, "C011": 4, "C110": 10, "C101": 14, "C010": 20, "C001": 28, "C100": 70, "C000": 140,
    }  # fmt: skip
    part = kpart_variances([C("C111"), C("C110"), C("C101"), C("C100")])
    assert {k for k, v in part.items() if v == 32} == {"C111", "C110", "C101", "C100"}
    assert {k for k, v in part.items() if v == 64} == {"C011", "C010", "C001", "C000"}
    # Example 3.2: C000 from C110 alone would have mag 14 -> 2 * 4^2 * 14 = 448
    assert 2 * 16 * EX21.mag(C("C000"), C("C110")) == 448


@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.data())
@settings(max_examples=60, deadline=None)
def test_levelwise_equals_direct_min(cards: list[int], data: st.DataObject) -> None:
    lat = Lattice(tuple(cards))
    sources = data.draw(st.lists(st.integers(0, lat.base), min_size=1, max_size=6, unique=True))
    wanted = [c for c in range(1 << lat.d) if lat.computable(c, sources)]
    out = best_sources(lat, {m: Fraction(1) for m in sources}, wanted)
    for c in wanted:
        assert out[c][0] == min(lat.mag(c, s) for s in sources)
        parent = out[c][1]
        if parent >= 0:  # the chain through the parent attains the minimum
            assert out[c][0] == out[parent][0] * lat.mag(c, parent)


# -- Algorithm 1 (BMax, Sec. 4.1) ------------------------------------------------------------------
def test_example_4_1() -> None:
    cov = Coverage(EX21, L_ALL)
    assert labels(feasible(cov, Fraction(80), 2) or ()) == {"C111", "C101"}
    m = cov.threshold(Fraction(80), 2)
    row = cov.mag[cov.candidates.index(C("C111"))]
    assert {EX21.label(L_ALL[k]) for k in np.flatnonzero(row <= m)} == {
        "C111",
        "C110",
        "C010",
        "C101",
        "C011",
    }
    sel = bound_max_variance(EX21, L_ALL)
    assert sel.theta_star_u == 64 and sel.bound_u == 64
    assert sel.info["trace"] == [
        (64.0, True),
        (32.0, False),
        (48.0, False),
        (56.0, False),
        (60.0, False),
        (62.0, False),
        (63.0, False),
    ]
    assert labels(sel.sources) == {"C111", "C110", "C101", "C100"}
    assert sel.info["feasible_s"] == [4]
    assert brute_force_opt(EX21, L_ALL) == 64


def test_partial_lattices() -> None:
    two = EX21.level(2)
    sel = bound_max_variance(EX21, two)
    assert sel.theta_star_u == Fraction(14.0625) and sel.bound_u == 14
    assert [t[0] for t in sel.info["trace"]] == [9.0, 13.5, 15.75, 14.625, 14.0625]
    assert labels(sel.sources) == {"C111"}
    one = bound_max_variance(EX21, EX21.level(1))
    assert one.bound_u == 18 and labels(one.sources) == {"C100", "C010", "C001"}
    total = bound_max_variance(EX21, [0])
    assert labels(total.sources) == {"C000"} and total.bound_u == 2


@given(st.lists(st.integers(2, 8), min_size=1, max_size=3), st.data())
@settings(max_examples=12, deadline=None)
def test_guarantees_against_brute_force(cards: list[int], data: st.DataObject) -> None:
    lat = Lattice(tuple(cards))
    published = data.draw(
        st.lists(st.integers(0, lat.base), min_size=1, max_size=1 << lat.d, unique=True)
    )
    sel = bound_max_variance(lat, sorted(published))
    base_bound = 2 * max(lat.mag(c, lat.base) for c in published)
    assert sel.bound_u <= min(2 * len(published) ** 2, base_bound)
    opt = brute_force_opt(lat, sorted(published))
    assert opt <= sel.bound_u <= (math.log(len(published)) + 1) ** 2 * opt


def test_selection_independent_of_epsilon() -> None:
    from dpcube.mechanisms.datacube import DataCube
    from dpcube.schema import Schema

    schema = Schema.from_dict(
        {"attributes": [{"name": n, "kind": "nominal", "categories": [str(i) for i in range(k)]}
                        for n, k in zip("sab", (2, 7, 5), strict=True)]}
    )  # fmt: skip
    for method in ("bmax", "pmost"):
        plans = {
            eps: DataCube(eps, method=method).plan(schema).selection for eps in (0.25, 1.0, 2.0)
        }
        assert len({p.sources for p in plans.values()}) == 1
        assert len({p.bound_u for p in plans.values()}) == 1  # theta' * eps^2 is constant


def test_adult_structure() -> None:
    sel = bound_max_variance(ADULT, list(range(256)))
    assert sel.theta_star_u == sel.bound_u == 32256 == 2 * 24**2 * 28
    assert len(sel.sources) == 24 and ADULT.base in sel.sources
    assert sel.info["feasible_s"] == [24]
    assert sel.bound_u < 131072 and sel.bound_u < 3628800


# -- Algorithm 2 (PMost, Sec. 4.2) -----------------------------------------------------------------
def test_example_4_2() -> None:
    cov = Coverage(EX21, L_ALL)
    counts = {}
    for s in range(1, 9):
        m = cov.threshold(Fraction(40), s)
        counts[s] = 0 if m is None else int(cov.greedy(m)[1][min(s, len(cov.greedy(m)[0])) - 1])
    assert counts == {1: 6, 2: 6, 3: 6, 4: 4, 5: 0, 6: 0, 7: 0, 8: 0}
    sel = publish_most(EX21, L_ALL, Fraction(40))
    assert labels(sel.sources) == {"C111", "C101"} and sel.info["precise"] == 6
    v = kpart_variances(list(sel.sources))
    assert {k for k, x in v.items() if x <= 40} == {"C111", "C110", "C011", "C101", "C100", "C001"}
    assert v["C010"] == v["C000"] == 80


def test_adult_publish_most() -> None:
    bmax = bound_max_variance(ADULT, list(range(256)))
    full = publish_most(ADULT, list(range(256)), bmax.bound_u)
    assert full.info["precise"] == 256 and full.sources == bmax.sources
    base_only = 2 * max(ADULT.deg(c) for c in range(256))
    precise = []
    for k in range(1, 11):
        sel = publish_most(ADULT, list(range(256)), bmax.bound_u * Fraction(k, 10))
        precise.append(sel.info["precise"])
        if k == 5:
            assert len(sel.sources) == 15 and ADULT.base in sel.sources
        assert sel.bound_u <= base_only
    assert precise == [137, 170, 193, 209, 221, 230, 238, 244, 249, 256]
    # Never worse than the s = 1 (K_base) or s = |L| (K_all) solutions
    for k in (1, 5, 10):
        theta0 = bmax.bound_u * Fraction(k, 10)
        weight = publish_most(ADULT, list(range(256)), theta0).info["greedy_weight"]
        assert weight >= sum(2 * ADULT.deg(c) <= theta0 for c in range(256))
        assert weight >= (256 if 2 * 256**2 <= theta0 else 0)


def test_equal_weights_reproduce_unweighted() -> None:
    plain = publish_most(ADULT, list(range(256)), Fraction(16128))
    weighted = publish_most(ADULT, list(range(256)), Fraction(16128), {c: 3.0 for c in range(256)})
    assert plain.sources == weighted.sources
    # a heavy weight on the total cuboid makes it precise
    heavy = publish_most(EX21, L_ALL, Fraction(40), {0: 100.0})
    assert 2 * len(heavy.sources) ** 2 * min(EX21.mag(0, s) for s in heavy.sources) <= 40


# -- non-uniform budgets (Ding et al., Sec. 7.2) ---------------------------------------------------
@pytest.mark.parametrize("cards", [(2, 7, 5), (3, 3, 3, 3), (9, 16, 7, 15, 6)])
def test_optimal_budgets_never_worse_and_shares_sum_to_one(cards: tuple[int, ...]) -> None:
    lat = Lattice(cards)
    published = list(range(1 << lat.d))
    uniform = bound_max_variance(lat, published)
    opt = optimal_budgets(lat, published, uniform)
    assert sum(opt.shares) == 1 and all(s > 0 for s in opt.shares)
    assert opt.bound_u <= uniform.bound_u
    cov = Coverage(lat, published)
    assert opt.bound_u == allocated_bound(cov, opt.sources, opt.shares)
    # every published cuboid is computable from the chosen sources
    assert all(lat.computable(c, opt.sources) for c in published)


def test_select_methods_and_publish_parsing() -> None:
    assert select(EX21, L_ALL, "all").bound_u == 128
    assert select(EX21, L_ALL, "base").bound_u == 140
    assert parse_publish("all", ["a", "b"]) == [0, 1, 2, 3]
    assert parse_publish(2, ["a", "b", "c"]) == [3, 5, 6]
    assert parse_publish("a,b;", ["a", "b", "c"]) == [0, 3]
    with pytest.raises(Exception, match="unknown attribute 'z'"):
        parse_publish("a,z", ["a", "b"])
    assert all(is_subset(0, c) for c in L_ALL)
