"""Transforms of Privelet (Xiao, Wang and Gehrke, "Differential Privacy via Wavelet Transforms",
ICDE 2010): the Haar transform of Sec. IV (Fig. 2), the nominal transform of Sec. V (Fig. 3,
Eq. (5)) and the HN transform of Sec. VI, on exact vectors; their generalized sensitivities
(Lemmas 2 and 4, Thm. 2) by brute force; and their exact variances (Lemmas 3 and 5, Thm. 3)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcube.errors import SchemaError
from dpcube.mechanisms.privelet.transforms import (
    HaarAxis,
    IdentityAxis,
    NominalAxis,
    NominalTree,
    axis_from_dict,
    coefficient_support,
    generalized_sensitivity,
    haar_forward,
    haar_inverse,
    haar_weights,
    hn_forward,
    hn_inverse,
    mean_subtract,
    nominal_forward,
    nominal_inverse,
    nominal_weights,
)
from dpcube.schema import Hierarchy

FIG3 = NominalTree.from_groups([3, 3])


# -- Haar (Sec. IV, Fig. 2) ------------------------------------------------------------------------


def test_haar_fig2_vector() -> None:
    c = haar_forward([9, 3, 6, 2, 8, 4, 5, 7])
    np.testing.assert_array_equal(c, [5.5, -0.5, 1, 0, 3, 2, 2, -1])
    # the paper's values: c0 = 5.5, c1 = -0.5, c2 = 1, c4 = 3; v2 = c0 + c1 + c2 - c4 = 3
    assert (c[0], c[1], c[2], c[4]) == (5.5, -0.5, 1.0, 3.0)
    assert c[0] + c[1] + c[2] - c[4] == 3
    np.testing.assert_array_equal(haar_inverse(c), [9, 3, 6, 2, 8, 4, 5, 7])


def test_haar_weights_and_trivial_domain() -> None:
    np.testing.assert_array_equal(haar_weights(8), [8, 8, 4, 4, 2, 2, 2, 2])
    ax = HaarAxis(1)
    assert (ax.size, ax.rho, ax.support) == (1, 1, 1)
    np.testing.assert_array_equal(ax.weights, [1])
    np.testing.assert_array_equal(haar_forward([7]), [7])


@pytest.mark.parametrize("levels", range(13))
def test_haar_round_trip_and_eq3(levels: int) -> None:
    rng = np.random.default_rng(levels)
    x = rng.normal(size=2**levels)
    c = haar_forward(x)
    np.testing.assert_allclose(haar_inverse(c), x, atol=1e-9)
    if levels <= 5:  # Eq. (3): v = c0 + sum_i g_i c_i along the leaf's ancestors
        m = 2**levels
        for leaf in range(m):
            value, p = c[0], 1
            for i in range(1, levels + 1):
                span = m >> (i - 1)
                node = leaf // span
                sign = 1 if leaf % span < span // 2 else -1
                value += sign * c[2 ** (i - 1) + node]
                p += 1
            assert value == pytest.approx(x[leaf], abs=1e-9)


def test_haar_rejects_non_power_of_two_vector() -> None:
    with pytest.raises(SchemaError, match="power-of-two"):
        haar_forward([1, 2, 3])


# -- nominal (Sec. V, Fig. 3) ----------------------------------------------------------------------


def test_nominal_fig3_vector() -> None:
    c = nominal_forward([9, 4, 5, 2, 4, 6], FIG3)
    np.testing.assert_allclose(c, [30, 3, -3, 3, -2, -1, -2, 0, 2], atol=1e-12)
    np.testing.assert_array_equal(nominal_weights(FIG3), [1, 1, 1] + [0.75] * 6)
    assert FIG3.nodes == 9 and FIG3.height == 3
    # the paper: v1 = c3 + c0/6 + c1/3 = 9
    assert c[3] + c[0] / 6 + c[1] / 3 == pytest.approx(9)
    np.testing.assert_allclose(nominal_inverse(c, FIG3), [9, 4, 5, 2, 4, 6], atol=1e-12)


def test_eq5_equals_breadth_first_inverse() -> None:
    rng = np.random.default_rng(1)
    c = mean_subtract(rng.normal(size=9), FIG3)
    fan = [2, 3]  # fanouts of the root and of the level-2 nodes
    leaves = nominal_inverse(c, FIG3)
    for leaf in range(6):
        group = leaf // 3
        value = c[3 + leaf] + c[0] / (fan[0] * fan[1]) + c[1 + group] / fan[1]
        assert leaves[leaf] == pytest.approx(value)


def test_mean_subtraction_properties() -> None:
    rng = np.random.default_rng(2)
    noisy = rng.normal(size=9)
    once = mean_subtract(noisy, FIG3)
    assert once[0] == noisy[0]
    for group in ([1, 2], [3, 4, 5], [6, 7, 8]):
        assert abs(once[group].sum()) < 1e-12
    np.testing.assert_allclose(mean_subtract(once, FIG3), once, atol=1e-15)
    exact = nominal_forward([9, 4, 5, 2, 4, 6], FIG3)
    np.testing.assert_allclose(mean_subtract(exact, FIG3), exact, atol=1e-12)


def test_hierarchy_contraction_and_ragged_tree() -> None:
    h = Hierarchy.from_mapping({"a": {"a1": ["x", "y"]}, "b": ["z"], "c": None})
    tree = NominalTree.from_hierarchy(h)
    # a -> a1 and b -> z are single-child chains: contracted; root over (a1, z, c), a1 over (x, y)
    assert tree.child_count.tolist() == [3, 2, 0, 0, 0, 0]
    assert tree.height == 3 and tree.leaves == 4
    v = np.array([4.0, 1.0, 7.0, 2.0])  # leaves in depth-first order: x, y, z, c
    np.testing.assert_allclose(nominal_inverse(nominal_forward(v, tree), tree), v)
    with pytest.raises(SchemaError, match="single child"):
        NominalTree([1, 0], [0])


# -- HN (Sec. VI) ----------------------------------------------------------------------------------


def test_2x2_examples() -> None:
    np.testing.assert_array_equal(
        hn_forward([[4, 2], [6, 0]], [HaarAxis(2), HaarAxis(2)]), [[3, 2], [0, -1]]
    )
    weighted = hn_forward([[4, 2], [6, 0]], [HaarAxis(2), HaarAxis(2)], weighted=True)
    np.testing.assert_array_equal(weighted, 4 * np.array([[3, 2], [0, -1]]))  # W_HN = 4 everywhere
    gender = NominalAxis(NominalTree.flat(2))
    np.testing.assert_allclose(
        hn_forward([[3, 1], [0, 2]], [HaarAxis(2), gender]), [[3, 0, 0], [1, 1, -1]]
    )
    np.testing.assert_array_equal(
        np.outer(HaarAxis(2).weights, gender.weights), np.full((2, 3), 2.0)
    )


def _axes_catalogue() -> list[list[object]]:
    return [
        [HaarAxis(5), NominalAxis(FIG3)],
        [NominalAxis(NominalTree.flat(3)), HaarAxis(4), IdentityAxis(2)],
        [
            HaarAxis(3),
            NominalAxis(NominalTree.from_groups([2, 3])),
            HaarAxis(2),
            NominalAxis(NominalTree.flat(2)),
        ],
    ]


@pytest.mark.parametrize("axes", _axes_catalogue())
def test_hn_round_trip_linearity_and_axis_order(axes: list) -> None:
    rng = np.random.default_rng(3)
    shape = tuple(ax.n for ax in axes)
    m1, m2 = rng.integers(0, 9, size=shape), rng.integers(0, 9, size=shape)
    c1, c2 = hn_forward(m1, axes), hn_forward(m2, axes)
    np.testing.assert_allclose(hn_forward(m1 + m2, axes), c1 + c2, atol=1e-9)  # Prop. 1
    np.testing.assert_allclose(hn_inverse(c1, axes), m1, atol=1e-9)
    np.testing.assert_allclose(
        hn_inverse(hn_forward(m1, axes, weighted=True), axes, weighted=True), m1, atol=1e-9
    )
    for perm in itertools.permutations(range(len(axes))):  # any axis order, same C and M*
        permuted = hn_forward(np.transpose(m1, perm), [axes[p] for p in perm])
        np.testing.assert_allclose(np.transpose(permuted, np.argsort(perm)), c1, atol=1e-9)
        noisy = c1 + rng.normal(size=c1.shape)
        back = hn_inverse(np.transpose(noisy, perm), [axes[p] for p in perm])
        np.testing.assert_allclose(
            np.transpose(back, np.argsort(perm)), hn_inverse(noisy, axes), atol=1e-9
        )


def test_padding_101() -> None:
    ax = HaarAxis(101)
    assert (ax.size, ax.rho, ax.bound_factor) == (128, 8, 4.5)
    x = np.arange(101.0)
    np.testing.assert_allclose(hn_inverse(hn_forward(x, [ax]), [ax]), x, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(["haar", "flat", "groups", "identity"]), min_size=1, max_size=3),
    st.lists(st.integers(1, 6), min_size=3, max_size=3),
    st.integers(0, 2**31),
)
def test_round_trip_property(kinds: list[str], sizes: list[int], seed: int) -> None:
    axes = []
    for kind, n in zip(kinds, sizes, strict=False):
        if kind == "haar":
            axes.append(HaarAxis(n))
        elif kind == "flat":
            axes.append(NominalAxis(NominalTree.flat(n)))
        elif kind == "groups":
            axes.append(NominalAxis(NominalTree.from_groups([n, 2])))
        else:
            axes.append(IdentityAxis(n))
    x = np.random.default_rng(seed).normal(size=tuple(ax.n for ax in axes))
    np.testing.assert_allclose(
        hn_inverse(hn_forward(x, axes, weighted=True), axes, weighted=True), x, atol=1e-9
    )
    for ax in axes:
        assert axis_from_dict(ax.to_dict()).to_dict() == ax.to_dict()


# -- generalized sensitivity and support by brute force (Lemmas 2 and 4) ---------------------------


def _brute(axes: list) -> tuple[float, list[float], int]:
    shape = tuple(ax.n for ax in axes)
    totals, support = [], 0
    for cell in np.ndindex(*shape):
        e = np.zeros(shape)
        e[cell] = 1
        coeff = hn_forward(e, axes, weighted=True)
        totals.append(float(np.abs(coeff).sum()))
        support = max(support, int(np.count_nonzero(np.abs(coeff) > 1e-12)))
    return max(totals), totals, support


@pytest.mark.parametrize("levels", range(6))
def test_haar_sensitivity_every_leaf(levels: int) -> None:
    _best, totals, support = _brute([HaarAxis(2**levels)])
    np.testing.assert_allclose(totals, 1 + levels)  # every leaf attains 1 + l (Lemma 2)
    assert support == HaarAxis(2**levels).support


@pytest.mark.parametrize(
    ("tree", "h"),
    [
        (FIG3, 3),
        (NominalTree.flat(2), 2),
        (NominalTree.flat(7), 2),
        (NominalTree.from_groups([2, 4, 3]), 3),
    ],
)
def test_nominal_sensitivity_equals_height(tree: NominalTree, h: int) -> None:
    _best, totals, support = _brute([NominalAxis(tree)])
    np.testing.assert_allclose(totals, h)  # uniform depth: every leaf attains h (Lemma 4)
    assert NominalAxis(tree).rho == h and support == tree.support


@pytest.mark.parametrize(
    ("axes", "rho"),
    [
        ([HaarAxis(4), NominalAxis(FIG3)], 9),
        ([HaarAxis(2), HaarAxis(2)], 4),
        ([HaarAxis(2), NominalAxis(NominalTree.flat(2))], 4),
        ([HaarAxis(3), IdentityAxis(3), NominalAxis(NominalTree.from_groups([2, 2]))], 9),
        ([HaarAxis(5), HaarAxis(3)], 12),  # padded: P = 1 + ceil(log2 5) = 4, 1 + 2 = 3
    ],
)
def test_hn_sensitivity_is_product(axes: list, rho: int) -> None:
    best, _totals, support = _brute(axes)
    assert generalized_sensitivity(axes) == rho
    assert best == pytest.approx(rho)
    assert support == coefficient_support(axes)


def test_padded_sensitivity_would_be_unsafe_unpadded() -> None:
    # Lemma 2's 1 + log2 |A| holds for powers of two: for |A| = 5 its 3.32 is below what a cell
    # actually attains
    best, _, _ = _brute([HaarAxis(5)])
    assert best == 4 > 1 + np.log2(5)


def test_ragged_sensitivity_is_height() -> None:
    h = Hierarchy.from_mapping({"a": {"a1": ["x", "y"], "a2": None}, "b": None, "c": None})
    tree = NominalTree.from_hierarchy(h)
    best, _totals, support = _brute([NominalAxis(tree)])
    assert tree.height == 4 and best == pytest.approx(4)  # root, a, a1, x
    assert support == tree.support


# -- exact variances (Lemmas 3 and 5, Thm. 3) ------------------------------------------------------


def _explicit_variance(axes: list, box: tuple[tuple[int, int], ...]) -> float:
    """sum_c (g(c) / W(c))**2 from the inverse applied to unit coefficients (no closed form)."""
    size = tuple(ax.size for ax in axes)
    w = np.ones(size)
    for k, ax in enumerate(axes):
        shape = [1] * len(axes)
        shape[k] = ax.size
        w = w * ax.weights.reshape(shape)
    sl = tuple(slice(lo, hi + 1) for lo, hi in box)
    total = 0.0
    for c in np.ndindex(*size):
        e = np.zeros(size)
        e[c] = 1
        g = hn_inverse(e, axes)[sl].sum()
        total += (g / w[c]) ** 2
    return total


def test_haar_table_7_4() -> None:
    ax = HaarAxis(8)
    want = {
        (1, 1): Fraction(11, 32),
        (1, 8): 1,
        (1, 4): Fraction(1, 2),
        (1, 3): Fraction(19, 32),
        (3, 5): Fraction(23, 32),
        (2, 7): Fraction(19, 16),
    }
    for (a, b), v in want.items():
        assert ax.interval_variance(a - 1, b - 1) == pytest.approx(float(v), rel=1e-12)
    table = [1.0, 1.0, 1.1875, 1.4219, 1.6367, 1.8623, 2.0828, 2.3058, 2.5276, 2.7501]
    for levels, v in enumerate(table, start=1):
        got = HaarAxis(2**levels).max_interval_variance()
        assert got == pytest.approx(v, abs=6e-5)
        assert got <= (2 + levels) / 2  # Lemma 3


def test_nominal_variances_7_4() -> None:
    ax = NominalAxis(FIG3)
    assert ax.interval_variance(0, 5) == pytest.approx(1)
    assert ax.interval_variance(0, 2) == pytest.approx(0.75)
    assert ax.interval_variance(4, 4) == pytest.approx(137 / 108)
    gender = NominalAxis(NominalTree.flat(2))
    assert gender.interval_variance(0, 0) == pytest.approx(0.75)
    for n, v in ((10, 2.926), (100, 3.881)):
        leaves = NominalAxis(NominalTree.flat(n)).interval_variance(np.arange(n), np.arange(n))
        assert leaves.max() == pytest.approx(v, abs=1e-3) and leaves.max() < 4  # Lemma 5


def test_without_mean_subtraction_variance_explodes() -> None:
    # Without the mean subtraction of Sec. V: worst query over flat 100 leaves 393 instead of
    # 3.881; Fig. 3: 13.7
    off = NominalAxis(NominalTree.flat(100), mean_subtraction=False)
    assert off.max_interval_variance() == pytest.approx(393, abs=0.1)
    fig3 = NominalAxis(FIG3, mean_subtraction=False)
    assert fig3.max_interval_variance() == pytest.approx(13.7, abs=0.05)


def test_closed_form_variance_equals_explicit_sums() -> None:
    axes = [HaarAxis(3), NominalAxis(NominalTree.from_groups([2, 2]))]
    for lo0, hi0, lo1, hi1 in [(0, 2, 0, 3), (1, 1, 2, 3), (0, 1, 1, 2), (2, 2, 0, 0)]:
        closed = axes[0].interval_variance(lo0, hi0) * axes[1].interval_variance(lo1, hi1)
        assert closed == pytest.approx(_explicit_variance(axes, ((lo0, hi0), (lo1, hi1))), rel=1e-9)


@pytest.mark.parametrize(
    "axis", [HaarAxis(6), NominalAxis(FIG3), NominalAxis(NominalTree.flat(4)), IdentityAxis(4)]
)
def test_every_interval_variance_matches_explicit(axis) -> None:
    for lo, hi in zip(*np.triu_indices(axis.n), strict=True):
        assert axis.interval_variance(lo, hi) == pytest.approx(
            _explicit_variance([axis], ((lo, hi),)), rel=1e-9
        )


def test_whole_domain_variance() -> None:
    # V(whole domain) = 1 (only the base contributes, Thm. 3) holds for power-of-two
    # domains only: with padding, the real domain is a partial range of the padded one
    assert HaarAxis(64).interval_variance(0, 63) == 1
    assert NominalAxis(FIG3).interval_variance(0, 5) == pytest.approx(1)
    assert HaarAxis(5).interval_variance(0, 4) == pytest.approx(27 / 32)
    assert HaarAxis(5).interval_variance(0, 4) == pytest.approx(
        _explicit_variance([HaarAxis(5)], ((0, 4),))
    )


def _random_tree(draw_sizes: list[int], depth_flags: list[bool]) -> Hierarchy:
    """A ragged hierarchy: groups of leaves, some nested one level deeper, some single-child."""
    tree: dict[str, object] = {}
    leaf = 0
    for g, (size, deeper) in enumerate(zip(draw_sizes, depth_flags, strict=False)):
        leaves = [f"v{leaf + j}" for j in range(size)]
        leaf += size
        tree[f"g{g}"] = {f"s{g}": leaves} if deeper else leaves
    return Hierarchy.from_mapping(tree)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=4),
    st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_random_ragged_hierarchies(sizes: list[int], deeper: list[bool]) -> None:
    """Brute force on random ragged hierarchies (single-child chains included): the sensitivity
    is the contracted height, the support is exact, and every interval's V is exact."""
    tree = NominalTree.from_hierarchy(_random_tree(sizes, deeper))
    axis = NominalAxis(tree)
    best, _totals, support = _brute([axis])
    assert best == pytest.approx(axis.rho) and support == axis.support
    x = np.arange(1.0, axis.n + 1)
    np.testing.assert_allclose(nominal_inverse(nominal_forward(x, tree), tree), x, atol=1e-9)
    for lo, hi in zip(*np.triu_indices(axis.n), strict=True):
        assert axis.interval_variance(lo, hi) == pytest.approx(
            _explicit_variance([axis], ((lo, hi),)), rel=1e-9
        )
