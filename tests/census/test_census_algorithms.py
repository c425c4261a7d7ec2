"""The post-processing of census group sizes (Fioretto, Van Hentenryck and Zhu, "Differential
Privacy of Hierarchical Census Data: An Optimization Approach", Artificial Intelligence 296, 2021):
the tree dynamic program M_DP (Eq. 4) and its polynomial cost tables (Sec. 7, Algorithm 1), the
cumulative mechanisms M_C, M_CDP^approx (Sec. 9.1, Algorithm 2) and the chain mechanism M_CDP
(Sec. 9.2), and the relaxed programs, each against a brute force on tiny instances."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcube.mechanisms.census.baselines import relaxed_hierarchical, topdown
from dpcube.mechanisms.census.chain import (
    EQ,
    GE,
    build_chain,
    chain_dp,
    chain_isotonic,
    chain_objective,
    chain_vector,
    counts_from_levels,
    level_chain_values,
)
from dpcube.mechanisms.census.cumulative import approx_counts, gamma, gamma_inv, isotonic_nonneg
from dpcube.mechanisms.census.dp import (
    _bottom_up,
    merge_convex,
    min_plus,
    naive_tree_dp,
    solve_tree,
)
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from experiments.census_metrics import violations
from tests.helpers.census_bruteforce import (
    SPEC_H,
    all_releases,
    model1_costs,
    model3_best,
    random_hierarchy,
)

H = RegionHierarchy.from_parents(SPEC_H)


def convex_table(draw: st.DrawFn) -> tuple[int, np.ndarray]:
    lo = draw(st.integers(0, 4))
    n = draw(st.integers(1, 6))
    slopes = sorted(draw(st.lists(st.integers(-6, 6), min_size=n - 1, max_size=n - 1)))
    start = draw(st.integers(0, 9))
    return lo, np.concatenate([[start], start + np.cumsum(slopes)]).astype(float)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_slope_merge_equals_brute_force_min_plus(data: st.DataObject) -> None:
    """Random convex tables (shifted domains, ties, one child) merge like min-plus."""
    tables = [convex_table(data.draw) for _ in range(data.draw(st.integers(1, 4)))]
    lo, merged = merge_convex(tables)
    ref_lo, ref = tables[0][0], tables[0][1]
    for t_lo, t in tables[1:]:
        ref_lo, ref = ref_lo + t_lo, min_plus(ref, t)
    assert lo == ref_lo
    np.testing.assert_allclose(merged, ref, atol=1e-9)


def test_cost_tables_are_convex_intervals() -> None:
    """Every computed C_x has nondecreasing differences on a contiguous finite support."""
    rng = np.random.default_rng(9)
    for _ in range(10):
        h = random_hierarchy(rng)
        noisy = rng.normal(1.0, 2.0, size=(h.size, 3))
        for lv in _bottom_up(h, noisy, 3, 12, 7)[:-1]:
            assert lv.table is not None
            for row, n in zip(lv.table.reshape(-1, 7), lv.length.ravel(), strict=True):
                assert np.all(np.isfinite(row[:n])) and np.all(np.isinf(row[n:]))
                assert np.all(np.diff(np.diff(row[:n])) >= -1e-9)


def test_mdp_exact_against_brute_force() -> None:
    """At least 30 tiny instances (real and integer noise): M_DP = brute-force Model 1."""
    rng = np.random.default_rng(10)
    for i in range(32):
        h = random_hierarchy(rng, levels=int(rng.integers(2, 4)), max_branch=2)
        k = int(rng.integers(2, 4))
        G = int(rng.integers(1, 6 if h.level_sizes[-1] * k <= 4 else 4))
        noisy = rng.normal(G / (2 * k), 1.5, size=(h.size, k))
        if i % 2:
            noisy = np.rint(noisy)
        sol = solve_tree(h, noisy, G)
        assert sol.objective == pytest.approx(model1_costs(h, noisy, G)[0], abs=1e-9)
        assert sol.objective == pytest.approx(float(np.sum((sol.values - noisy) ** 2)), abs=1e-9)
        assert violations(h, sol.values, G) == {
            "consistency": 0,
            "faithfulness": 0,
            "negative": 0,
            "non_integer": 0,
        }


def test_golden_mdp() -> None:
    """The unique optimum with objective 1.99; the next best is 2.19."""
    noisy = np.array([[3.6, 0.4, 2.3], [1.2, 0.6, 1.4], [2.3, -0.8, 0.7]])
    sol = solve_tree(H, noisy, 6)
    assert sol.values.tolist() == [[3, 1, 2], [1, 1, 1], [2, 0, 1]]
    assert sol.objective == pytest.approx(1.99, abs=1e-9)
    costs = model1_costs(H, noisy, 6)
    assert costs[0] == pytest.approx(1.99) and costs[1] == pytest.approx(2.19)


def test_naive_dp_agreement_on_medium_instances() -> None:
    """Algorithm 1 equals the explicit min-plus DP (M_DP^OP)."""
    rng = np.random.default_rng(12)
    for _ in range(6):
        h = random_hierarchy(rng, levels=3, max_branch=3)
        k = int(rng.integers(2, 6))
        G = int(rng.integers(5, 25))
        noisy = rng.normal(G / k / 3, 3.0, size=(h.size, k))
        assert solve_tree(h, noisy, G).objective == pytest.approx(
            naive_tree_dp(h, noisy, G), abs=1e-7
        )


def test_windowed_matches_full_unless_a_bound_is_touched() -> None:
    """An untouched windowed solution is optimal; a binding window raises the flag."""
    rng = np.random.default_rng(13)
    untouched = touched = 0
    for _ in range(40):
        h = random_hierarchy(rng, levels=3, max_branch=3)
        k = 3
        truth = h.aggregate(rng.poisson(2.0, size=(h.level_sizes[-1], k)))
        G = int(truth[0].sum())
        noisy = truth + np.rint(rng.normal(0, 2.0, size=truth.shape))
        full = solve_tree(h, noisy, G)
        win = solve_tree(h, noisy, G, half_width=1, widen=False)
        if not win.touched:
            untouched += 1
            assert win.objective == pytest.approx(full.objective, abs=1e-9)
        else:
            touched += 1
        assert solve_tree(h, noisy, G, half_width=1).objective == pytest.approx(
            full.objective, abs=1e-9
        )
    assert untouched > 0 and touched > 0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=8))
def test_gamma_round_trip(n: list[int]) -> None:
    """Gamma / Gamma^-1 round-trip; Gamma^-1 of a nondecreasing vector is >= 0."""
    arr = np.array(n)
    assert gamma_inv(gamma(arr)).tolist() == n
    c = np.sort(arr)
    assert np.all(gamma_inv(c) >= 0)


def test_golden_model2_by_brute_force() -> None:
    """The exact M_C optimum 0.87 (unique), next best 2.67."""
    noisy = np.array([[3.4, 4.3, 6.2], [1.7, 1.6, 3.2], [0.6, 1.8, 3.3]])
    scored = sorted(
        (float(np.sum((gamma(n) - noisy) ** 2)), n.tolist()) for n in all_releases(H, 3, 6)
    )
    assert scored[0][0] == pytest.approx(0.87) and scored[1][0] == pytest.approx(2.67)
    assert scored[0][1] == [[3, 1, 2], [2, 0, 1], [1, 1, 1]]


def test_golden_cdp_approx() -> None:
    """Isotonic, rounding + Gamma^-1, then M_DP leaves n' unchanged."""
    noisy = np.array([[3.4, 4.3, 6.2], [1.7, 1.6, 3.2], [0.6, 1.8, 3.3]])
    np.testing.assert_allclose(
        isotonic_nonneg(noisy), [[3.4, 4.3, 6.2], [1.65, 1.65, 3.2], [0.6, 1.8, 3.3]]
    )
    n1 = approx_counts(noisy)
    assert n1.tolist() == [[3, 1, 2], [2, 0, 1], [1, 1, 1]]
    assert solve_tree(H, n1, 6).values.tolist() == n1.tolist()


def test_isotonic_step_optimal_against_brute_force() -> None:
    """PAVA with a lower bound 0 is nondecreasing, >= 0, and optimal.

    Brute force: the optimum of a bounded isotonic L2 problem has block values that are means of
    consecutive targets (or 0), so enumerating every partition into consecutive blocks with those
    values, keeping the monotone ones, finds the optimum exactly (k <= 6).
    """
    rng = np.random.default_rng(17)
    for _ in range(60):
        k = int(rng.integers(1, 7))
        y = rng.normal(0.5, 1.0, size=k)
        fit = isotonic_nonneg(y[None, :])[0]
        assert np.all(np.diff(fit) >= -1e-12) and np.all(fit >= 0)
        best = math.inf
        for cuts in range(2 ** (k - 1)):
            edges = [0] + [i + 1 for i in range(k - 1) if cuts >> i & 1] + [k]
            cand = np.concatenate(
                [np.full(b - a, max(0.0, y[a:b].mean())) for a, b in itertools.pairwise(edges)]
            )
            if np.all(np.diff(cand) >= -1e-12):
                best = min(best, float(np.sum((cand - y) ** 2)))
        assert float(np.sum((fit - y) ** 2)) == pytest.approx(best, abs=1e-9)


def test_chain_construction_running_example() -> None:
    """Post-order, depths, true chain values and the relations of M_CDP's chain
    (Sec. 9.2), corrected where the printed ones do not hold."""
    chain = build_chain(H, 3)
    names = [H.names[r] if r >= 0 else "root" for r in chain.region]
    assert names == ["GA", "NY", "US", "GA", "NY", "US", "GA", "NY", "US", "root"]
    assert chain.depth.tolist() == [3, 3, 2, 3, 3, 2, 3, 3, 2, 1]
    n = H.aggregate(np.array([[2, 0, 1], [1, 1, 1]]))
    values = [*chain_vector(H, chain, level_chain_values(H, n)).tolist(), 6]
    assert values == [2, 3, 3, 3, 4, 4, 5, 6, 6, 6]
    assert ["EQ" if r == EQ else "GE" for r in chain.relation[1:]] == [
        "GE",
        "EQ",
        "GE",
        "GE",
        "EQ",
        "GE",
        "GE",
        "EQ",
        "EQ",
    ]
    for i in range(1, len(values)):
        if chain.relation[i] == EQ:
            assert values[i] == values[i - 1]
        else:
            assert values[i] >= values[i - 1]


def test_chain_dp_exact_and_literal_rule_regression() -> None:
    """At least 40 tiny instances: chain DP = brute-force Model 3; the literal rule is not."""
    rng = np.random.default_rng(19)
    literal_worse = 0
    for _ in range(40):
        h = random_hierarchy(rng, levels=int(rng.integers(2, 4)), max_branch=2)
        k = int(rng.integers(2, 4))
        G = int(rng.integers(1, 6 if h.level_sizes[-1] * k <= 4 else 4))
        chain = build_chain(h, k)
        noisy = rng.uniform(0, G, size=len(chain.region) - 1).round(1)
        _, obj = chain_dp(chain, noisy, G)
        assert obj == pytest.approx(model3_best(h, noisy, k, G), abs=1e-9)
        _, lit = chain_dp(build_chain(h, k, rule="literal"), noisy, G)
        literal_worse += lit > obj + 1e-9
    assert literal_worse > 0


def test_golden_chain() -> None:
    """Objective 5 recovering the true n; the literal rule gives 6."""
    noisy = np.array([2, 4, 2, 3, 3, 5, 5, 7, 6.0])
    values, obj = chain_dp(build_chain(H, 3), noisy, 6)
    assert obj == 5.0
    assert values.tolist() == [2, 3, 3, 3, 4, 4, 5, 6, 6]
    assert chain_dp(build_chain(H, 3, rule="literal"), noisy, 6)[1] == 6.0
    levels = [np.array([[3], [4], [6]]), np.array([[2, 3], [3, 4], [5, 6]])]
    assert counts_from_levels(H, levels).tolist() == [[3, 1, 2], [2, 0, 1], [1, 1, 1]]


def test_pava_cross_check_equals_chain_dp() -> None:
    """Block-merged weighted PAVA + rounding has the chain DP's optimum, and its
    conversion back passes every PGSR check."""
    rng = np.random.default_rng(21)
    for _ in range(60):
        h = random_hierarchy(rng, levels=int(rng.integers(2, 4)), max_branch=3)
        k = int(rng.integers(1, 5))
        G = int(rng.integers(0, 30))
        chain = build_chain(h, k)
        flat = rng.normal(G / 2, G / 2 + 1, size=len(chain.region) - 1)
        flat = np.where(rng.random(flat.size) < 0.5, np.rint(flat), flat)
        levels = [np.zeros((k, m)) for m in h.level_sizes]
        pos = chain.region[:-1] - h.level_start[h.level[chain.region[:-1]] - 1]
        for (r, s, p), x in zip(
            zip(chain.region[:-1], chain.size[:-1], pos, strict=True), flat, strict=True
        ):
            levels[int(h.level[r]) - 1][s - 1, p] = x
        _, obj = chain_dp(chain, flat, G)
        iso = chain_isotonic(h, levels, G)
        assert chain_objective(iso, levels) == pytest.approx(obj, abs=1e-7)
        n = counts_from_levels(h, iso)
        assert violations(h, n, G) == {
            "consistency": 0,
            "faithfulness": 0,
            "negative": 0,
            "non_integer": 0,
        }


def test_relaxation_bound_and_faithfulness_flag() -> None:
    """Relaxed objective <= integer optimum; rounding the golden relaxed solution gives
    a national total of 5 != G = 6, which the faithfulness counter flags."""
    noisy = np.array([[3.6, 0.4, 2.3], [1.2, 0.6, 1.4], [2.3, -0.8, 0.7]])
    rounded, qp = relaxed_hierarchical(H, noisy, 6)
    assert float(np.sum((qp.values.reshape(3, 3) - noisy) ** 2)) <= 1.99 + 1e-6
    np.testing.assert_allclose(
        qp.values.reshape(3, 3)[1:], [[1.18, 0.42, 1.41], [2.28, 0.0, 0.71]], atol=0.01
    )
    assert int(rounded[0].sum()) == 5
    assert violations(H, rounded, 6)["faithfulness"] >= 1


def test_cv_counter_counts_exactly() -> None:
    """Raising A's size-1 count breaks (A, 1) against A1 + A2 and (N, 1) against A + B;
    raising N's size-2 count breaks (N, 2): exactly 3 inconsistent pairs."""
    h = RegionHierarchy.from_parents({"A": "N", "B": "N", "A1": "A", "A2": "A", "B1": "B"})
    n = h.aggregate(np.array([[1, 2], [0, 1], [3, 0]]))
    n[1, 0] += 1
    n[0, 1] += 2
    assert violations(h, n, int(n[0].sum()))["consistency"] == 3


def test_topdown_is_feasible() -> None:
    rng = np.random.default_rng(26)
    for _ in range(20):
        h = random_hierarchy(rng)
        truth = h.aggregate(rng.poisson(2.0, size=(h.level_sizes[-1], 4)))
        G = int(truth[0].sum())
        out = topdown(h, truth + rng.normal(0, 3, size=truth.shape), G)
        assert violations(h, out, G) == {
            "consistency": 0,
            "faithfulness": 0,
            "negative": 0,
            "non_integer": 0,
        }
    assert GE == 0
