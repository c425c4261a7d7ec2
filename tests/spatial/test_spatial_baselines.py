"""The baselines HTF is compared with (Shaham et al., SIGSPATIAL 2021, Sec. 5 and Figs. 4-6: UG
and AG of Qardaji, Yang and Li, ICDE 2013; the quadtree and kd-tree of Cormode et al., ICDE 2012;
Singular and Uniform), the exact exponential mechanism, PrivTree's privacy bound (Zhang, Xiao and
Xie, SIGMOD 2016) by exact enumeration, and user-level contribution bounding."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcube import Histogram
from dpcube.errors import DataError
from dpcube.mechanisms.spatial import (
    AdaptiveGrid,
    KDTree,
    PrivTree,
    QuadTree,
    Singular,
    Uniform,
    UniformGrid,
    bound_contributions,
)
from dpcube.mechanisms.spatial._common import relative_error, spatial_case_schema
from dpcube.mechanisms.spatial.em import exponential_cuts
from dpcube.mechanisms.spatial.privtree import privtree_parameters
from dpcube.mechanisms.spatial.tree import binary_tree, consistent_tree, quad_tree
from dpcube.mechanisms.spatial.trees import release_tree_counts
from dpcube.privacy.random import NO_NOISE, SeededRandomSource
from dpcube.privacy.samplers import laplace_scale_rational
from dpcube.privacy.unit import PrivacyUnit
from dpcube.schema import Schema


def _random_queries(shape: tuple[int, int], n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.integers(0, shape[0], size=(n, 2)), axis=1)
    cols = np.sort(rng.integers(0, shape[1], size=(n, 2)), axis=1)
    return np.stack([rows, cols], axis=1)


def _truth(F: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    return np.array([F[a : b + 1, c : d + 1].sum() for (a, b), (c, d) in boxes])


def test_ug_beats_singular_on_uniform_data() -> None:
    rng = np.random.default_rng(24)
    F = rng.poisson(2.0, size=(64, 64)).astype(np.int64)
    H = Histogram(spatial_case_schema(64, 64), F)
    boxes = _random_queries((64, 64), 300, 1)
    truth = _truth(F, boxes)
    ug = UniformGrid(0.1).release(H, random_state=1).answer_boxes(boxes)
    single = Singular(0.1).release(H, random_state=1)
    single_answers = single.answer_many([{"p": {"bins": b.tolist()}} for b in boxes])
    assert relative_error(truth, ug).mean() < relative_error(truth, single_answers).mean()


def test_ag_first_level_at_least_ten() -> None:
    ag = AdaptiveGrid(0.1)
    assert ag.level1_size(0, 0.1) == 10 and ag.level1_size(3_500_000, 0.1) >= 10
    F = np.random.default_rng(0).poisson(50, size=(64, 64))
    r = ag.release(Histogram(spatial_case_schema(64, 64), F), random_state=2)
    assert min(r.metadata.noise["m1"]) >= 10
    assert r.answer({}) == pytest.approx(float(np.sum(r.leaf_counts)))


def test_consistency_parent_equals_children_and_is_least_squares() -> None:
    rng = np.random.default_rng(5)
    F = rng.poisson(4, size=(6, 5)).astype(np.int64)
    for tree in (quad_tree(F, 3), binary_tree(F, 4, lambda r, a, L, w: np.maximum(1, L // 3))):
        shares = np.array([0.4, 0.3, 0.2, 0.1, 0.05])[: tree.height + 1]
        noisy, var, _ = release_tree_counts(tree, shares, SeededRandomSource(3))
        beta = consistent_tree(tree, noisy, var)
        for d in range(len(tree.levels) - 1):
            has = tree.child_counts(d) > 0
            sums = np.bincount(
                tree.levels[d + 1].parent, weights=beta[d + 1], minlength=len(beta[d])
            )
            np.testing.assert_allclose(sums[has], beta[d][has], atol=1e-9)
        # dense weighted least squares over the leaves: every node is a sum of leaves
        depths, idx = tree.leaves()
        leaf_of = {(int(d), int(i)): j for j, (d, i) in enumerate(zip(depths, idx, strict=True))}
        rows, y, w = [], [], []
        for d, level in enumerate(tree.levels):
            for i in range(len(level.rects)):
                r = level.rects[i]
                a = np.zeros(len(idx))
                for (ld, li), j in leaf_of.items():
                    lr = tree.levels[ld].rects[li]
                    if r[0] <= lr[0] and lr[1] <= r[1] and r[2] <= lr[2] and lr[3] <= r[3]:
                        a[j] = 1
                rows.append(a)
                y.append(noisy[d][i])
                w.append(1 / math.sqrt(var[d][i]))
        A, yv, wv = np.array(rows), np.array(y), np.array(w)
        x, *_ = np.linalg.lstsq(A * wv[:, None], yv * wv, rcond=None)
        got = np.array([beta[d][i] for d, i in zip(depths, idx, strict=True)])
        np.testing.assert_allclose(got, x, rtol=1e-7, atol=1e-7)


def test_tree_baselines_are_exact_without_noise_and_spend_epsilon() -> None:
    rng = np.random.default_rng(6)
    F = rng.poisson(3, size=(16, 16)).astype(np.int64)
    H = Histogram(spatial_case_schema(16, 16), F)
    boxes = _random_queries((16, 16), 50, 2)
    for mech in (
        QuadTree(1.0, height=4),
        KDTree(1.0, height=30),
        QuadTree(1.0, height=4, allocation="uniform"),
    ):
        r = mech.release(H, random_state=NO_NOISE)
        np.testing.assert_allclose(r.answer_boxes(boxes), _truth(F, boxes), atol=1e-6)
        noisy = mech.release(H, random_state=1)
        np.testing.assert_allclose(noisy.budget_paths, 1.0, rtol=1e-12)
    auto = KDTree(0.5).release(H, random_state=4)
    np.testing.assert_allclose(auto.budget_paths, 0.5, rtol=1e-12)
    u = Uniform(1.0).release(H, random_state=NO_NOISE)
    assert u.answer({"p": {"bins": [[0, 7], [0, 15]]}}) == pytest.approx(F.sum() / 2)


def test_exponential_mechanism_distribution_is_exact() -> None:
    """Pr[k] ~ exp(-eps s(k) / 2): 40,000 draws (as 40,000 identical nodes); each frequency is
    within 4.5 binomial sds of its exact probability."""
    s = np.array([9, 4, 1, 0, 3, 7, 12], dtype=np.int64)
    eps = 0.8
    m = 40_000
    lengths = np.full(m, len(s) + 1)

    def score(nodes: np.ndarray, ks: np.ndarray) -> np.ndarray:
        return s[ks - 1]

    k = exponential_cuts(score, np.zeros(m, dtype=np.int64), lengths, eps, SeededRandomSource(7))
    p = np.exp(-eps * s / 2)
    p /= p.sum()
    freq = np.bincount(k, minlength=len(s) + 1)[1:]
    sd = np.sqrt(m * p * (1 - p))
    assert np.all(np.abs(freq - m * p) <= 4.5 * sd + 1)
    noiseless = exponential_cuts(score, np.zeros(1, dtype=np.int64), np.array([8]), eps, NO_NOISE)
    assert noiseless.tolist() == [4]


def test_median_exponential_mechanism_is_eps_dp_by_brute_force() -> None:
    """For every neighbour of small nodes, the exact output distributions of the median EM
    (score |2 cnt_k - n|) differ by at most exp(eps) pointwise."""
    rng = np.random.default_rng(8)
    eps = 0.7
    for _ in range(30):
        col = rng.integers(0, 6, size=rng.integers(2, 7))

        def dist(c: np.ndarray) -> np.ndarray:
            cnt = np.cumsum(c)[:-1]
            sc = np.abs(2 * cnt - c.sum())
            p = np.exp(-eps * sc / 2)
            return p / p.sum()

        base = dist(col)
        for i in range(len(col)):
            for delta in (1, -1):
                other = col.copy()
                other[i] += delta
                if other[i] < 0:
                    continue
                ratio = np.abs(np.log(dist(other) / base))
                assert ratio.max() <= eps + 1e-12


def _split_probability(b: int, theta: int, lam: float) -> tuple[float, float]:
    """(Pr[b + Z > theta], Pr[b + Z <= theta]) for the discrete Laplace Z, P(z) ~ p^|z|,
    p = exp(-1/lam); the smaller one is computed directly (no cancellation)."""
    p = math.exp(-1 / lam)
    m = theta - b
    if m >= 0:
        split = p ** (m + 1) / (1 + p)
        return split, 1 - split
    leaf = p ** (-m) / (1 + p)
    return 1 - leaf, leaf


def _structures(
    F: np.ndarray, rect: tuple[int, int, int, int], depth: int, theta: int, lam: float, delta: int
) -> dict:
    r0, r1, c0, c1 = rect
    if r1 - r0 < 2 and c1 - c0 < 2:
        return {"leaf": 1.0}
    b = max(int(F[r0:r1, c0:c1].sum()) - depth * delta, theta - delta)
    ps, pl = _split_probability(b, theta, lam)
    out = {"leaf": pl}
    rm = r0 + (r1 - r0) // 2 if r1 - r0 >= 2 else r1
    cm = c0 + (c1 - c0) // 2 if c1 - c0 >= 2 else c1
    kids = [
        q
        for q in ((r0, rm, c0, cm), (r0, rm, cm, c1), (rm, r1, c0, cm), (rm, r1, cm, c1))
        if q[1] > q[0] and q[3] > q[2]
    ]
    combos: dict = {(): ps}
    for q in kids:
        sub = _structures(F, q, depth + 1, theta, lam, delta)
        combos = {(*key, s): pk * ps_ for key, pk in combos.items() for s, ps_ in sub.items()}
    out.update(combos)
    return out


@pytest.mark.parametrize("shape", [(1, 8), (4, 4)])
def test_privtree_structure_is_eps_tree_dp_by_exact_enumeration(shape: tuple[int, int]) -> None:
    """Exact probabilities of every PrivTree decomposition for D and each neighbour D' (one point
    added or removed anywhere): the log ratio never exceeds eps_tree."""
    eps_tree = 1.0
    lam, delta = privtree_parameters(eps_tree)
    rng = np.random.default_rng(12)
    worst = 0.0
    for trial in range(6):
        F = rng.integers(0, 3 + 4 * trial, size=shape)
        base = _structures(F, (0, shape[0], 0, shape[1]), 0, 0, lam, delta)
        assert sum(base.values()) == pytest.approx(1.0)
        for i in range(shape[0]):
            for j in range(shape[1]):
                for step in (1, -1):
                    G = F.copy()
                    G[i, j] += step
                    if G[i, j] < 0:
                        continue
                    other = _structures(G, (0, shape[0], 0, shape[1]), 0, 0, lam, delta)
                    for key, p in base.items():
                        worst = max(worst, abs(math.log(other[key] / p)))
    assert worst <= eps_tree + 1e-9
    assert worst > 0.3 * eps_tree


def test_privtree_parameters_use_the_realised_scale() -> None:
    lam, delta = privtree_parameters(0.25)
    t, s = laplace_scale_rational(7 / (3 * 0.25))
    assert lam == t / s and delta == math.ceil(lam * math.log(4)) and delta >= lam * math.log(4)


def test_privtree_adapts_to_density() -> None:
    F = np.zeros((64, 64), dtype=np.int64)
    F[:8, :8] = 500
    r = PrivTree(1.0).release(Histogram(spatial_case_schema(64, 64), F), random_state=3)
    small = [lf for lf in r.leaves if lf.row1 <= 8 and lf.col1 <= 8]
    assert len(small) >= 4
    np.testing.assert_allclose(r.budget_paths, 1.0)


def _points(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(40), rng.integers(1, 30, size=40))
    return pd.DataFrame(
        {"uid": users, "lat": rng.uniform(0, 4, users.size), "lon": rng.uniform(0, 4, users.size)}
    )


def test_bound_contributions_keeps_at_most_c_points_per_user() -> None:
    df = _points()
    schema = spatial_case_schema(4, 4)
    h = bound_contributions(df, schema, "uid", 3, seed=0.25)
    per_user = df.groupby("uid").size()
    assert h.total == int(np.minimum(per_user, 3).sum())
    assert h.report["contribution_bound"] == 3
    assert h.report["rows_dropped_by_bound"] == len(df) - h.total
    assert h.report["units"] == 40
    assert h.privacy_unit.manifest() == {"column": "uid", "max_rows_per_unit": 3}
    again = bound_contributions(df, schema, "uid", 3, seed=0.25)
    np.testing.assert_array_equal(h.counts, again.counts)
    with pytest.raises(DataError, match="privacy unit column 'who'"):
        bound_contributions(df, schema, "who", 3)
    with pytest.raises(DataError, match="NULL ids"):
        bound_contributions(
            df.assign(uid=df.uid.astype("float").where(df.index > 3)), schema, "uid", 3
        )


def test_user_level_mechanisms_require_a_matching_bound() -> None:
    df = _points()
    schema = spatial_case_schema(4, 4)
    h = bound_contributions(df, schema, "uid", 3)
    r = UniformGrid(1.0, user_bound=3, grid_size=4).release(h, random_state=1)
    assert r.curator_log["contribution_bound"] == 3 and r.curator_log["units"] == 40
    assert "contribution_bound" not in r.metadata.report
    assert r.metadata.report["privacy_unit"] == "user (at most 3 points)"
    with pytest.raises(DataError, match="keeps up to 3 rows per unit 'uid'"):
        UniformGrid(1.0, user_bound=2).release(h, random_state=1)
    with pytest.raises(DataError, match="not bounded per unit"):
        UniformGrid(1.0, user_bound=3).release(Histogram(schema, h.counts), random_state=1)


def test_user_level_noise_scales_with_c() -> None:
    """With user_bound=c the count noise has c times the scale (group privacy): brute force over
    every user of at most c points on a 2 x 2 grid changes the cell vector by at most c in L1."""
    c = 3
    r1 = Singular(1.0).release(
        Histogram(spatial_case_schema(2, 2), np.ones((2, 2))), random_state=1
    )
    hist = Histogram(spatial_case_schema(2, 2), np.ones((2, 2)), privacy_unit=PrivacyUnit("uid", c))
    rc = Singular(1.0, user_bound=c).release(hist, random_state=1)
    assert rc.metadata.noise["scale"] == pytest.approx(c * r1.metadata.noise["scale"], rel=1e-6)
    worst = 0
    for cells in np.ndindex(*(4,) * c):
        change = np.bincount(np.array(cells), minlength=4)
        worst = max(worst, int(np.abs(change).sum()))
    assert worst == c


def test_kdtree_rejects_bad_parameters() -> None:
    from dpcube.errors import ParameterError

    with pytest.raises(ParameterError, match=r"kdtree: parameter median_share=1\.5 .* \(0, 1\)"):
        KDTree(1.0, median_share=1.5)
    with pytest.raises(ParameterError, match="'geometric', 'uniform'"):
        QuadTree(1.0, allocation="fancy")
    s = Schema.from_dict(
        {
            "attributes": [
                {"name": "x", "kind": "nominal", "categories": ["a", "b"]},
                {"name": "y", "kind": "nominal", "categories": ["a", "b"]},
            ]
        }
    )
    from dpcube.errors import SchemaError

    with pytest.raises(SchemaError):
        QuadTree(1.0, height=1).release(Histogram(s, np.ones((2, 2))), random_state=1)
    assert Counter(type(m).__name__ for m in (QuadTree(1.0), KDTree(1.0))) == Counter(
        {"QuadTree": 1, "KDTree": 1}
    )


@pytest.mark.parametrize("make", [lambda: _htf_user(), lambda: KDTree(1.0, height=2, user_bound=2)])
def test_user_level_claims_bound_every_user_by_brute_force(make: Any) -> None:
    """A user of at most c = 2 points: adding any 1 or 2 points to a 2 x 3 grid moves every
    claimed measurement by at most its (scaled) declared sensitivity."""
    mech = make()
    schema = spatial_case_schema(2, 3)
    base = np.random.default_rng(1).integers(0, 4, size=(2, 3))
    for claim in mech.sensitivity_claims(schema):
        assert not claim.tight
        f0 = np.asarray(claim.function(base))
        worst = 0.0
        for cells in [(i,) for i in range(6)] + [(i, j) for i in range(6) for j in range(i, 6)]:
            x = base.copy().ravel()
            for i in cells:
                x[i] += 1
            worst = max(
                worst, float(np.abs(np.asarray(claim.function(x.reshape(2, 3))) - f0).sum())
            )
        assert worst <= claim.declared + 1e-9


def _htf_user() -> Any:
    from dpcube.mechanisms.spatial import HTF

    return HTF(1.0, height=3, user_bound=2)


def test_ug_and_ag_grids_are_aligned_with_the_binned_domain() -> None:
    """On a 64 x 64 domain with N = 25,000 the UG formula gives m = 50; 50 near-equal
    bins over 64 cells mix widths 1 and 2 and spread counts uniformly inside the wide ones, an
    error present without any noise. Aligned to the nearest divisor (64) the noiseless release
    reproduces every cell exactly; AG's level-2 cells likewise hold whole blocks of domain cells."""
    rng = np.random.default_rng(16)
    F = rng.multinomial(25_000, np.full(64 * 64, 1 / 4096)).reshape(64, 64)
    H = Histogram(spatial_case_schema(64, 64), F)
    ug = UniformGrid(1.0).release(H, random_state=NO_NOISE, account=False)
    assert ug.metadata.noise["grid"] == [64, 64]
    cells = np.array([[[i, i], [j, j]] for i in range(64) for j in range(64)])
    np.testing.assert_allclose(ug.answer_boxes(cells), F.ravel())
    ag = AdaptiveGrid(1.0).release(H, random_state=NO_NOISE, account=False)
    widths = {(r1 - r0, c1 - c0) for r0, r1, c0, c1 in ag.rects}
    m1 = ag.metadata.noise["m1"][0]
    # level-1 cells are whole 64/m1 blocks, each split into equal whole sub-blocks
    assert m1 >= 10 and 64 % m1 == 0
    assert all((64 // m1) % h == 0 and (64 // m1) % w == 0 for h, w in widths)
    assert ug.answer({}) == pytest.approx(F.sum())


@pytest.mark.parametrize("cls", [UniformGrid, QuadTree, Singular])
def test_replace_neighbours_halve_every_internal_budget(cls: Any) -> None:
    """Replace neighbours (a point moved, n public) are supported by group privacy:
    one replacement = one removal + one addition, so the declared sensitivities double and the
    count noise's scale doubles (variance about x4) against add/remove at the same epsilon."""
    H = Histogram(spatial_case_schema(8, 8), np.full((8, 8), 5))
    kwargs: dict[str, Any] = {UniformGrid: {"grid_size": 8}, QuadTree: {"consistency": False}}.get(
        cls, {}
    )
    add = cls(1.0, **kwargs)
    rep = cls(1.0, neighbour="replace", **kwargs)
    assert rep.points_per_unit == 2 and add.points_per_unit == 1
    for a, r in zip(
        add.sensitivity_claims(H.schema), rep.sensitivity_claims(H.schema), strict=True
    ):
        assert r.declared == 2 * a.declared and "replace" in r.name
    va = add.release(H, random_state=3, account=False)
    vr = rep.release(H, random_state=3, account=False)
    assert vr.metadata.report["privacy_unit"].endswith("replaced (bounded DP)")
    q = {"p": {"bins": [[0, 0], [0, 0]]}}
    # Discrete Laplace of scale t has variance 2e^(-1/t) / (1 - e^(-1/t))^2, which grows a little
    # faster than t^2: doubling t multiplies it by 4.26 at t = 1 and by 4 + O(1/t^2) for large t.
    # A leaf answer combines such variances, so its ratio lies in the same range.
    assert 4.0 <= vr.variance(q) / va.variance(q) <= 4.3
