"""HTF (Shaham et al., SIGSPATIAL 2021): the tree of its DP space partitioning (Sec. 4.2,
Algorithm 2), its data perturbation with pruning and the budget across levels (Sec. 4.3,
Algorithm 3, Eqs. 14-17), queries and the error metric of Sec. 5, and determinism under a seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcube import Histogram
from dpcube.errors import BudgetError, ParameterError, SchemaError
from dpcube.mechanisms.spatial import HTF, LeafRelease
from dpcube.mechanisms.spatial._common import (
    COL,
    ROW,
    geometric_shares,
    relative_error,
    spatial_case_schema,
    tree_height,
)
from dpcube.mechanisms.spatial.homogeneity import objective
from dpcube.mechanisms.spatial.htf import htf_partition
from dpcube.mechanisms.spatial.release import brute_force_answers, density
from dpcube.mechanisms.spatial.tree import Tree, axis_for_height, htf_perturb
from dpcube.privacy.random import NO_NOISE, SeededRandomSource
from dpcube.privacy.samplers import discrete_laplace_variance, laplace_scale_rational
from dpcube.release.base import ReleaseMetadata
from dpcube.schema import Schema

INF = float("inf")


def _data(rows: int = 32, cols: int = 32, n: int = 20_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    F = np.zeros((rows, cols), dtype=np.int64)
    r = np.clip(rng.normal(rows * 0.3, rows / 8, n), 0, rows - 1).astype(int)
    c = np.clip(rng.normal(cols * 0.6, cols / 5, n), 0, cols - 1).astype(int)
    np.add.at(F, (r, c), 1)
    return F


def _assert_tiles(rects: np.ndarray, shape: tuple[int, int]) -> None:
    cover = np.zeros(shape, dtype=np.int64)
    for r0, r1, c0, c1 in rects:
        assert r0 < r1 and c0 < c1
        cover[r0:r1, c0:c1] += 1
    assert np.all(cover == 1)


def test_structure() -> None:
    F = _data()
    h = 9
    tree = htf_partition(F, h, 1e-2, 3, SeededRandomSource(11))
    assert tree.height == h and len(tree.levels) <= h + 1
    assert tree.levels[0].counts[0] == F.sum()
    for d in range(len(tree.levels) - 1):
        parent = tree.levels[d]
        kids = tree.levels[d + 1]
        np.testing.assert_array_equal(
            np.bincount(kids.parent, weights=kids.counts, minlength=len(parent.rects))[
                tree.child_counts(d) > 0
            ],
            parent.counts[tree.child_counts(d) > 0],
        )
        for p in np.flatnonzero(tree.child_counts(d) > 0):
            pr = parent.rects[p]
            children = kids.rects[kids.parent == p]
            assert len(children) == 2
            cover = np.zeros((pr[1] - pr[0], pr[3] - pr[2]), dtype=np.int64)
            for r0, r1, c0, c1 in children:
                cover[r0 - pr[0] : r1 - pr[0], c0 - pr[2] : c1 - pr[2]] += 1
            assert np.all(cover == 1)
            a, b = children
            axis = ROW if a[3] == b[3] and a[2] == b[2] else COL
            height = h - d
            ext = (pr[1] - pr[0], pr[3] - pr[2])
            want = axis_for_height(height)
            if ext[want] < 2:
                want = 1 - want
            assert axis == want
        one_by_one = (parent.rects[:, 1] - parent.rects[:, 0] == 1) & (
            parent.rects[:, 3] - parent.rects[:, 2] == 1
        )
        assert np.all(tree.child_counts(d)[one_by_one] == 0)
    depths, idx = tree.leaves()
    leaves = np.concatenate(
        [tree.levels[d].rects[idx[depths == d]] for d in range(len(tree.levels))]
    )
    _assert_tiles(leaves, F.shape)
    exact = np.concatenate(
        [tree.levels[d].counts[idx[depths == d]] for d in range(len(tree.levels))]
    )
    assert exact.sum() == F.sum()


def test_released_leaves_tile_the_grid() -> None:
    F = _data()
    r = HTF(1.0, height=10, theta_count=20).release(
        Histogram(spatial_case_schema(32, 32), F), random_state=5
    )
    _assert_tiles(r.rects, F.shape)
    assert sum((a1 - a0) * (b1 - b0) for a0, a1, b0, b1, _ in r.leaves) == F.size


def test_split_quality_two_blocks() -> None:
    F = np.ones((8, 8), dtype=np.int64)
    F[:, :3] = 9
    tree = htf_partition(F, 1, 1.0, 10, NO_NOISE)
    left, right = tree.levels[1].rects
    assert left.tolist() == [0, 8, 0, 3] and right.tolist() == [0, 8, 3, 8]
    assert objective(F[:, :3], 3, COL) == 0.0 and objective(F[:, 3:], 5, COL) == 0.0


def test_geometric_shares() -> None:
    for h in range(1, 21):
        s = geometric_shares(h, 0.37)
        assert s.sum() == pytest.approx(0.37, rel=1e-12)
        np.testing.assert_allclose(s[:-1] / s[1:], 2 ** (1 / 3), rtol=1e-12)
    np.testing.assert_allclose(geometric_shares(2, 1.0), [0.412599, 0.327480, 0.259921], atol=1e-6)
    s15 = geometric_shares(15, 1.0)
    assert s15[15] == pytest.approx(0.0066108, abs=1e-7)
    assert s15[0] == pytest.approx(0.2115465, abs=1e-7)


def _path_sums(tree: Tree, draws: list) -> dict[tuple[int, int], float]:
    """eps of every count draw on each released leaf's root-to-leaf path, from the ledger."""
    decision: dict[tuple[int, int], float] = {}
    final: dict[tuple[int, int], float] = {}
    for d in draws:
        for i in d.nodes.tolist():
            (decision if d.kind == "decision" else final)[(d.depth, i)] = d.epsilon
    sums = {}
    for (depth, i), eps in final.items():
        total, dd, ii = eps + decision.get((depth, i), 0.0), depth, i
        while dd > 0:
            ii = int(tree.levels[dd].parent[ii])
            dd -= 1
            total += decision[(dd, ii)]
        sums[(depth, i)] = total
    return sums


@pytest.mark.parametrize("theta_count,theta_cells", [(50, 5), (-INF, 0), (INF, 5), (300, 40)])
def test_every_path_spends_eps_data(theta_count: float, theta_cells: float) -> None:
    F = _data()
    h, eps_data = 10, 0.7
    tree = htf_partition(F, h, 1e-2, 3, SeededRandomSource(15))
    out = htf_perturb(
        tree,
        geometric_shares(h, eps_data),
        eps_data,
        theta_count,
        theta_cells,
        SeededRandomSource(16),
    )
    sums = _path_sums(tree, out.draws)
    assert len(sums) == len(out.rects)
    for total in sums.values():
        assert total == pytest.approx(eps_data, rel=1e-12)
    np.testing.assert_allclose(out.path_data_epsilon, eps_data, rtol=1e-12)
    _assert_tiles(out.rects, F.shape)


def test_global_ledger_and_negative_data_budget() -> None:
    F = _data()
    mech = HTF(0.5, eps_level=1e-3, theta_count=10)
    r = mech.release(Histogram(spatial_case_schema(32, 32), F), random_state=1)
    n = r.metadata.noise
    assert n["eps_height"] + n["height"] * 1e-3 + n["eps_data"] == pytest.approx(0.5, rel=1e-12)
    assert n["eps_data"] > 0
    np.testing.assert_allclose(r.budget_paths, 0.5, rtol=1e-12)
    big = np.zeros((64, 64), dtype=np.int64)
    big[10:20, 10:20] = 35_000
    # The data asks for h = 11, whose partition (11 x 1e-3) leaves no data budget: the height is
    # lowered to the tallest tree with a data budget (9) instead of failing after the charge.
    low = HTF(0.01, eps_level=1e-3).release(
        Histogram(spatial_case_schema(64, 64), big), random_state=NO_NOISE
    )
    assert low.metadata.noise["height"] == 9 and low.metadata.noise["eps_data"] > 0
    with pytest.raises(BudgetError, match="no data budget"):
        HTF(0.01, eps_level=1e-3, height=10).release(
            Histogram(spatial_case_schema(64, 64), big), random_state=NO_NOISE
        )
    assert tree_height(3_500_000, 0.01) == 11


def test_only_the_root_when_theta_is_infinite() -> None:
    """theta_count = +inf: one leaf, the root, drawn with eps_data - (root share). Its empirical
    variance over 3,000 seeds matches the discrete Laplace variance (~2/eps^2): the sample
    variance of Laplace noise has relative sd sqrt(5/n) = 4.1 %, so 15 % is over 3.5 sd."""
    F = _data(8, 8, 500)
    h, eps_data = 4, 0.2
    tree = htf_partition(F, h, 1e-2, 3, SeededRandomSource(0))
    shares = geometric_shares(h, eps_data)
    eps_root = eps_data - shares[h]
    values = []
    for seed in range(3000):
        out = htf_perturb(tree, shares, eps_data, INF, 0, SeededRandomSource(seed))
        assert len(out.rects) == 1 and out.rects[0].tolist() == [0, 8, 0, 8]
        values.append(out.counts[0])
    want = float(discrete_laplace_variance(1 / eps_root))
    assert want == pytest.approx(2 / eps_root**2, rel=0.01)
    assert out.variances[0] == pytest.approx(want)
    assert np.var(values) == pytest.approx(want, rel=0.15)
    assert np.mean(values) == pytest.approx(F.sum(), abs=5 * math.sqrt(want / 3000))


def test_no_pruning_and_extent_rule() -> None:
    F = _data()
    h, eps_data = 8, 1.0
    tree = htf_partition(F, h, 1e-2, 3, SeededRandomSource(1))
    shares = geometric_shares(h, eps_data)
    out = htf_perturb(tree, shares, eps_data, -INF, 0, SeededRandomSource(2))
    assert len(out.rects) == len(tree.leaves()[1])
    final = [d for d in out.draws if d.kind != "decision"]
    assert all(d.kind == "childless" for d in final)
    bottom = [d for d in final if d.depth == h]
    assert bottom and all(d.epsilon == pytest.approx(shares[0], rel=1e-12) for d in bottom)
    # theta_cells = 5 with noise on: every node visited below the root has a parent whose noisy
    # decision count exceeded theta_count and which has at least 5 cells
    theta = 60
    out = htf_perturb(tree, shares, eps_data, theta, 5, SeededRandomSource(3))
    decision = {
        (d.depth, int(i)): int(v)
        for d in out.draws
        if d.kind == "decision"
        for i, v in zip(d.nodes, d.values, strict=True)
    }
    visited = {(d.depth, int(i)) for d in out.draws for i in d.nodes}
    assert any(depth >= 3 for depth, _ in visited)
    for depth, i in visited:
        if depth == 0:
            continue
        parent = int(tree.levels[depth].parent[i])
        r = tree.levels[depth - 1].rects[parent]
        assert decision[(depth - 1, parent)] > theta
        assert (r[1] - r[0]) * (r[3] - r[2]) >= 5


def test_pruned_leaves_fail_a_test() -> None:
    """Every released leaf is childless or failed one of the tests (checked with noise off)."""
    F = _data()
    h, eps_data, theta = 9, 1.0, 80
    tree = htf_partition(F, h, 1e-2, 3, SeededRandomSource(4))
    out = htf_perturb(tree, geometric_shares(h, eps_data), eps_data, theta, 5, NO_NOISE)
    for d in out.draws:
        if d.kind == "pruned":
            rects = tree.levels[d.depth].rects[d.nodes]
            cells = (rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])
            assert np.all((tree.levels[d.depth].counts[d.nodes] <= theta) | (cells < 5))
        if d.kind == "childless":
            assert np.all(tree.child_counts(d.depth)[d.nodes] == 0)
        if d.kind == "decision":
            kept = np.setdiff1d(
                d.nodes,
                [
                    i
                    for e in out.draws
                    if e.kind == "pruned" and e.depth == d.depth
                    for i in e.nodes
                ],
            )
            rects = tree.levels[d.depth].rects[kept]
            assert np.all(tree.levels[d.depth].counts[kept] > theta)
            assert np.all((rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2]) >= 5)


@pytest.mark.parametrize("shape,height", [((1, 1), 3), ((1, 1024), 4), ((2, 2), 25), ((4, 4), 40)])
def test_childless_safety(shape: tuple[int, int], height: int) -> None:
    for F in (np.zeros(shape, dtype=np.int64), np.arange(math.prod(shape)).reshape(shape)):
        r = HTF(1.0, height=height, eps_level=1e-3).release(
            Histogram(spatial_case_schema(*shape), F), random_state=7
        )
        _assert_tiles(r.rects, shape)
        np.testing.assert_allclose(r.budget_paths, 1.0, rtol=1e-12)
    empty = np.zeros((16, 16), dtype=np.int64)
    r = HTF(0.5).release(Histogram(spatial_case_schema(16, 16), empty), random_state=NO_NOISE)
    assert r.metadata.noise["height"] == 1
    _assert_tiles(r.rects, (16, 16))


def test_query_answering() -> None:
    F = _data()
    schema = spatial_case_schema(32, 32)
    r = HTF(1.0, height=6, theta_count=0, theta_cells=0).release(
        Histogram(schema, F), random_state=NO_NOISE
    )
    for r0, r1, c0, c1 in r.rects[:50]:
        q = {"p": {"bins": [[int(r0), int(r1) - 1], [int(c0), int(c1) - 1]]}}
        assert r.answer(q) == pytest.approx(F[r0:r1, c0:c1].sum(), abs=1e-6)
    assert r.answer({}) == pytest.approx(F.sum())
    meta = ReleaseMetadata("htf", {}, 1.0, None, "add_remove")
    leaf = LeafRelease(
        spatial_case_schema(2, 4), meta, np.array([[0, 2, 0, 2], [0, 2, 2, 4]]), np.array([12, 0])
    )
    assert leaf.answer({"p": {"bins": [[0, 0], [1, 1]]}}) == pytest.approx(3.0)
    noisy = HTF(0.3, height=8, theta_count=5).release(Histogram(schema, F), random_state=3)
    rng = np.random.default_rng(19)
    boxes = np.sort(rng.integers(0, 32, size=(1000, 2, 2)), axis=2)
    np.testing.assert_allclose(
        noisy.answer_boxes(boxes),
        brute_force_answers(noisy.rects, noisy.leaf_counts, boxes),
        rtol=1e-6,
        atol=1e-6,
    )
    queries = [{"p": {"bins": b.tolist()}} for b in boxes[:20]]
    np.testing.assert_allclose(noisy.answer_many(queries), noisy.answer_boxes(boxes[:20]))
    z = density((32, 32), noisy.rects, noisy.leaf_counts)
    assert z.sum() == pytest.approx(float(noisy.leaf_counts.sum()))


def test_variance_is_the_sum_over_leaves() -> None:
    meta = ReleaseMetadata("htf", {}, 1.0, None, "add_remove")
    leaf = LeafRelease(
        spatial_case_schema(2, 4),
        meta,
        np.array([[0, 2, 0, 2], [0, 2, 2, 4]]),
        np.array([12, 0]),
        np.array([8.0, 2.0]),
    )
    assert leaf.variance({"p": {"bins": [[0, 0], [1, 2]]}}) == pytest.approx(8.0 / 16 + 2.0 / 16)


def test_metric() -> None:
    assert relative_error(np.array([0, 100, 10]), np.array([10, 90, 0])).tolist() == [
        50.0,
        10.0,
        50.0,
    ]


def test_heights() -> None:
    assert [tree_height(3_500_000, e) for e in (0.1, 0.3, 0.5)] == [15, 16, 17]
    assert tree_height(1_000_000, 0.1) == 13
    F = np.zeros((16, 16), dtype=np.int64)
    F[3:8, 2:9] = 100_000
    for eps, want in ((0.1, 15), (0.3, 16), (0.5, 17)):
        r = HTF(eps, theta_count=1e9).release(
            Histogram(spatial_case_schema(16, 16), F), random_state=NO_NOISE
        )
        assert r.metadata.noise["height"] == want


def test_determinism() -> None:
    H = Histogram(spatial_case_schema(32, 32), _data())
    a = HTF(0.5).release(H, random_state=22)
    b = HTF(0.5).release(H, random_state=22)
    c = HTF(0.5).release(H, random_state=23)
    np.testing.assert_array_equal(a.rects, b.rects)
    np.testing.assert_array_equal(a.leaf_counts, b.leaf_counts)
    assert not (a.rects.shape == c.rects.shape and np.array_equal(a.leaf_counts, c.leaf_counts))


def test_two_ordinal_attributes_and_bad_schemas() -> None:
    s = Schema.from_dict(
        {
            "attributes": [
                {"name": "x", "kind": "ordinal", "range": [0, 7], "width": 1},
                {"name": "y", "kind": "ordinal", "range": [0, 3], "width": 1},
            ]
        }
    )
    F = np.arange(32).reshape(8, 4)
    r = HTF(1.0, height=6, theta_count=0, theta_cells=0).release(
        Histogram(s, F), random_state=NO_NOISE
    )
    assert r.answer({"x": [2, 5], "y": [1, 1]}) == pytest.approx(F[2:6, 1].sum())
    bad = Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 7], "width": 1}]}
    )
    with pytest.raises(SchemaError, match="one spatial attribute or two ordinal"):
        HTF(1.0).release(Histogram(bad, np.ones(8)), random_state=1)
    with pytest.raises(ParameterError, match="htf: parameter even_axis='z' is outside its domain"):
        HTF(1.0, even_axis="z")


def test_save_and_load_round_trip(tmp_path) -> None:
    from dpcube.release.base import load_release

    H = Histogram(spatial_case_schema(32, 32), _data())
    r = HTF(0.5, theta_count=10).release(H, random_state=3)
    r.save(tmp_path / "r")
    back = load_release(tmp_path / "r")
    assert isinstance(back, LeafRelease)
    np.testing.assert_array_equal(back.rects, r.rects)
    np.testing.assert_array_equal(back.budget_paths, r.budget_paths)
    q = [{"p": {"bins": [[1, 20], [3, 30]]}}, {}]
    np.testing.assert_allclose(back.answer_many(q), r.answer_many(q))
    np.testing.assert_allclose(back.variance_many(q), r.variance_many(q))


def _prune_probability(count: int, theta: int, eps: float) -> tuple[float, float]:
    """(Pr[count + Z <= theta], Pr[count + Z > theta]) for the discrete Laplace of the realised
    scale t/s used by add_discrete_laplace (P(z) ~ p^|z|, p = exp(-s/t))."""
    t, s = laplace_scale_rational(1.0 / eps)
    p = math.exp(-s / t)
    m = theta - count
    if m >= 0:
        keep = p ** (m + 1) / (1 + p)
        return 1 - keep, keep
    prune = p ** (-m) / (1 + p)
    return prune, 1 - prune


def _pruned_sets(
    tree: Tree, counts: list[np.ndarray], shares: np.ndarray, theta: int, depth: int, i: int
) -> dict:
    """Exact distribution of the set of released leaves below node (depth, i) (Algorithm 3)."""
    kids = (
        np.flatnonzero(tree.levels[depth + 1].parent == i) if depth + 1 < len(tree.levels) else []
    )
    if len(kids) == 0:
        return {((depth, i),): 1.0}
    prune, keep = _prune_probability(
        int(counts[depth][i]), theta, float(shares[tree.height - depth])
    )
    out = {((depth, i),): prune}
    combos: dict = {(): keep}
    for k in kids:
        sub = _pruned_sets(tree, counts, shares, theta, depth + 1, int(k))
        combos = {a + b: pa * pb for a, pa in combos.items() for b, pb in sub.items()}
    out.update(combos)
    return out


def test_pruning_decisions_are_dp_by_exact_enumeration() -> None:
    """Algorithm 3's released-leaf set on a fixed 4 x 4 partition of height 4: for D and every
    D' with one point more, the exact probabilities of every leaf set differ by at most the
    decision budget on the changed cell's path (below eps_data)."""
    F = np.array([[3, 0, 1, 2], [0, 4, 2, 0], [1, 1, 0, 5], [2, 0, 0, 1]])
    h, eps_data, theta = 4, 1.0, 2
    tree = htf_partition(F, h, 1.0, 3, NO_NOISE)
    shares = geometric_shares(h, eps_data)
    counts = [lv.counts for lv in tree.levels]
    base = _pruned_sets(tree, counts, shares, theta, 0, 0)
    assert sum(base.values()) == pytest.approx(1.0)
    worst = 0.0
    for r in range(4):
        for c in range(4):
            G = F.copy()
            G[r, c] += 1
            other = _pruned_sets(
                tree, [_tree_counts(lv.rects, G) for lv in tree.levels], shares, theta, 0, 0
            )
            worst = max(worst, max(abs(math.log(other[k] / p)) for k, p in base.items()))
    assert 0.1 < worst <= eps_data - shares[0] + 1e-12


def _tree_counts(rects: np.ndarray, G: np.ndarray) -> np.ndarray:
    return np.array([G[a:b, c:d].sum() for a, b, c, d in rects])
