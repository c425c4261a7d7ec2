"""Consistency enforcement (Ding, Winslett, Han and Li, "Differentially Private Data Cubes:
Optimizing Noise Sources and Consistency", SIGMOD 2011, Sec. 5, Thms. 8-10): agreement with dense
least squares, consistency of every computable pair, closed forms and fixed points, exact
variances and their dominance, the L1 and L-infinity programs."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcube.mechanisms.datacube.consistency import (
    l2_consistent,
    l2_variance,
    lp_consistent,
    meet_closure,
)
from dpcube.mechanisms.datacube.lattice import Lattice, best_sources, bits, is_subset, rollup, shape

EX21 = Lattice((2, 7, 5))


def aggregation_matrix(lat: Lattice, join: int, mask: int) -> np.ndarray:
    """Dense 0/1 matrix summing the cells of cuboid ``join`` into cuboid ``mask``."""
    n = lat.cells(join)
    eye = np.eye(n).reshape((*shape(lat, join), n))
    return np.asarray(rollup(eye, join, mask)).reshape(lat.cells(mask), n)


def dense_solution(lat: Lattice, noisy: dict, weights: dict) -> tuple[int, np.ndarray]:
    join = 0
    for c in noisy:
        join |= c
    h = np.vstack([aggregation_matrix(lat, join, c) for c in noisy])
    y = np.concatenate([np.asarray(noisy[c], dtype=float).ravel() for c in noisy])
    w = np.concatenate([np.full(lat.cells(c), np.sqrt(weights[c])) for c in noisy])
    x = np.linalg.lstsq(h * w[:, None], y * w, rcond=None)[0]
    return join, x.reshape(shape(lat, join))


@st.composite
def cubes(draw: st.DrawFn) -> tuple[Lattice, dict[int, np.ndarray], dict[int, float]]:
    cards = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    lat = Lattice(tuple(cards))
    sources = draw(st.lists(st.integers(0, lat.base), min_size=1, max_size=5, unique=True))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    noisy = {c: rng.normal(0, 5, size=shape(lat, c)) for c in sources}
    weighted = draw(st.booleans())
    weights = {c: float(rng.uniform(0.2, 3.0)) if weighted else 1.0 for c in sources}
    return lat, noisy, weights


@given(cubes())
@settings(max_examples=60, deadline=None)
def test_equal_to_dense_weighted_least_squares(cube) -> None:
    lat, noisy, weights = cube
    join, x = dense_solution(lat, noisy, weights)
    wanted = lat.down_closure(noisy)
    for via_join in (True, False):
        got = l2_consistent(lat, noisy, weights, wanted, via_join=via_join)
        for q in wanted:
            np.testing.assert_allclose(got[q], rollup(x, join, q), atol=1e-9, rtol=1e-9)


@given(cubes())
@settings(max_examples=30, deadline=None)
def test_every_pair_of_computable_cuboids_agrees(cube) -> None:
    lat, noisy, weights = cube
    wanted = lat.down_closure(noisy)
    got = l2_consistent(lat, noisy, weights, wanted)
    for small in wanted:
        for big in wanted:
            if is_subset(small, big):
                np.testing.assert_allclose(rollup(got[big], big, small), got[small], atol=1e-9)
    not_computable = [c for c in range(1 << lat.d) if c not in wanted]
    if not_computable:
        with pytest.raises(Exception, match="not computable"):
            l2_consistent(lat, noisy, weights, not_computable[:1])


def test_closed_form_two_nested_cuboids() -> None:
    lat = Lattice((4,))
    y = np.array([3.0, -1.0, 4.0, 2.0])
    y0 = 11.0
    got = l2_consistent(lat, {1: y, 0: np.array(y0)}, {1: 1.0, 0: 1.0}, [0, 1])
    assert float(got[0]) == pytest.approx((y.sum() + 4 * y0) / 5)
    np.testing.assert_allclose(got[1], y + (y0 - y.sum()) / 5)


def test_fixed_points() -> None:
    rng = np.random.default_rng(1)
    lat = Lattice((2, 3, 2))
    table = rng.integers(0, 9, size=shape(lat, lat.base)).astype(float)
    sources = [0b111, 0b011, 0b100, 0]
    exact = {c: rollup(table, lat.base, c) for c in sources}
    wanted = lat.down_closure(sources)
    for method in ("l2", "l1", "linf"):
        got = (
            l2_consistent(lat, exact, dict.fromkeys(sources, 1.0), wanted)
            if method == "l2"
            else lp_consistent(lat, exact, dict.fromkeys(sources, 1.0), wanted, method)
        )
        for q in wanted:
            np.testing.assert_allclose(got[q], rollup(table, lat.base, q), atol=1e-6)
    single = {0b101: rng.normal(size=(2, 2))}
    for method in ("l2", "l1", "linf"):
        out = (
            l2_consistent(lat, single, {0b101: 1.0}, [0b101])
            if method == "l2"
            else lp_consistent(lat, single, {0b101: 1.0}, [0b101], method)
        )
        np.testing.assert_allclose(out[0b101], single[0b101], atol=1e-7)


def test_exact_variances() -> None:
    # AllC on Ex2.1: s = 8, cell noise 2 s^2 = 128; every cell 560/9
    w_all = dict.fromkeys(range(8), 1 / 128)
    for q in range(8):
        assert l2_variance(EX21, w_all, q) == pytest.approx(560 / 9, rel=1e-12)
    # BMaxC on Ex2.1: L_pre = {C111, C110, C101, C100}, s = 4, cell noise 32
    pre = [EX21.from_label(x) for x in ("C111", "C110", "C101", "C100")]
    w = dict.fromkeys(pre, 1 / 32)
    for q in range(8):
        want = 70 / 3 if q in pre else 140 / 3
        assert l2_variance(EX21, w, q) == pytest.approx(want, rel=1e-12)


@given(cubes(), st.data())
@settings(max_examples=40, deadline=None)
def test_variance_formula_equals_dense_gls_and_dominates(cube, data: st.DataObject) -> None:
    lat, noisy, weights = cube
    join = 0
    for c in noisy:
        join |= c
    h = np.vstack([aggregation_matrix(lat, join, c) for c in noisy])
    wdiag = np.concatenate([np.full(lat.cells(c), weights[c]) for c in noisy])
    normal_inv = np.linalg.pinv(h.T @ (h * wdiag[:, None]))
    q = data.draw(st.sampled_from(lat.down_closure(noisy)))
    selected = {i: data.draw(st.integers(1, lat.cards[i])) for i in bits(q)}
    # the query vector: the first n_i cells of each dimension i in q
    vec = np.ones(shape(lat, join))
    for k, i in enumerate(bits(join)):
        if q >> i & 1:
            keep = np.zeros(lat.cards[i])
            keep[: selected[i]] = 1
            vec = vec * keep.reshape([-1 if j == k else 1 for j in range(len(bits(join)))])
    hq = vec.ravel()
    dense = float(hq @ normal_inv @ hq)
    assert l2_variance(lat, weights, q, selected) == pytest.approx(dense, rel=1e-8, abs=1e-12)
    # Theorem 10 (iv): never above the variance of the least-noisy single source (eq. 2)
    one_cell = l2_variance(lat, weights, q)
    best = best_sources(lat, {c: Fraction(1 / weights[c]) for c in noisy}, [q])[q][0]
    assert one_cell <= float(best) * (1 + 1e-9)


def test_errors_do_not_depend_on_the_data() -> None:
    rng = np.random.default_rng(7)
    lat = Lattice((3, 4, 2))
    table = rng.integers(0, 50, size=shape(lat, lat.base)).astype(float)
    sources = [0b111, 0b011, 0b001, 0]
    noise = {c: rng.normal(size=shape(lat, c)) for c in sources}
    wanted = lat.down_closure(sources)
    real = l2_consistent(
        lat,
        {c: rollup(table, lat.base, c) + noise[c] for c in sources},
        dict.fromkeys(sources, 1.0),
        wanted,
    )
    zero = l2_consistent(lat, noise, dict.fromkeys(sources, 1.0), wanted)
    for q in wanted:
        np.testing.assert_allclose(real[q] - rollup(table, lat.base, q), zero[q], atol=1e-9)


def test_lp_solutions_are_consistent_and_optimal_in_their_norm() -> None:
    rng = np.random.default_rng(3)
    pre = [EX21.from_label(x) for x in ("C111", "C110", "C101", "C100")]
    noisy = {c: rng.laplace(0, 4, size=shape(EX21, c)) for c in pre}
    weights = dict.fromkeys(pre, 1.0)
    wanted = list(range(8))
    sols = {
        "l1": lp_consistent(EX21, noisy, weights, wanted, "l1"),
        "l2": l2_consistent(EX21, noisy, weights, wanted),
        "linf": lp_consistent(EX21, noisy, weights, wanted, "linf"),
    }
    for sol in sols.values():
        for small in wanted:
            np.testing.assert_allclose(
                rollup(sol[EX21.base], EX21.base, small), sol[small], atol=1e-7
            )

    def dist(sol: dict, order: float) -> float:
        diff = np.concatenate([(sol[c] - noisy[c]).ravel() for c in pre])
        return float(np.linalg.norm(diff, ord=order))

    for name, order in (("l1", 1), ("l2", 2), ("linf", np.inf)):
        mine = dist(sols[name], order)
        assert all(mine <= dist(other, order) + 1e-6 for other in sols.values()), name
    nonneg = lp_consistent(EX21, noisy, weights, wanted, "l1", nonnegative=True)
    assert nonneg[EX21.base].min() >= -1e-9


def test_meet_closure_contains_every_meet() -> None:
    closure = meet_closure([0b110, 0b011], [0b111 & 0b110])
    assert closure == [2, 6]  # 6 & 3 = 2, and 2 is closed


@given(st.lists(st.integers(1, 4), min_size=1, max_size=5), st.data())
@settings(max_examples=60, deadline=None)
def test_broadcast_sum_chain_equals_direct(cards: list[int], data: st.DataObject) -> None:
    from dpcube.mechanisms.datacube.consistency import broadcast_sum
    from dpcube.mechanisms.datacube.lattice import expand

    lat = Lattice(tuple(cards))
    target = data.draw(st.integers(0, lat.base))
    subsets = [b for b in range(1 << lat.d) if is_subset(b, target)]
    chosen = data.draw(st.lists(st.sampled_from(subsets), unique=True, max_size=len(subsets)))
    rng = np.random.default_rng(len(chosen))
    terms = {b: rng.normal(size=shape(lat, b)) for b in chosen}
    direct = np.zeros(shape(lat, target))
    for b, a in terms.items():
        direct = direct + expand(lat, a, b, target)
    np.testing.assert_allclose(broadcast_sum(lat, terms, target), direct, atol=1e-12)
