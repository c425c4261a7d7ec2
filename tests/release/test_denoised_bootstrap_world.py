"""The kd-tree's bound (and, switched on, the clustered bootstrap world) discount the leaves'
noise (experiments/docs/coverage.md "Empty rectangles"): a released count in
empty space is noise, not points; counted as points it widens the intervals there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcube import Histogram
from dpcube.mechanisms.spatial import release as leaf_release
from dpcube.mechanisms.spatial._common import spatial_case_schema
from dpcube.mechanisms.spatial.htf import HTF
from dpcube.mechanisms.spatial.release import negative_count_variance, noise_discounted_counts
from dpcube.mechanisms.spatial.trees import KDTree


def _laplace(rng: np.random.Generator, size: int, variance: float) -> np.ndarray:
    """Synthetic symmetric noise of a known variance (Laplace scale b: variance 2 b^2); this
    tests an estimator, no release is made from it."""
    return rng.laplace(0.0, np.sqrt(variance / 2.0), size)


def test_negative_counts_estimate_the_noise_variance_of_empty_leaves() -> None:
    rng = np.random.default_rng(11)
    v = 50.0
    empty = _laplace(rng, 4000, v)  # about 2000 negative counts
    dense = 10_000.0 + _laplace(rng, 500, v)  # never negative
    est = negative_count_variance(np.concatenate([empty, dense]))
    assert est is not None
    # E[e^2 | e < 0] = v; e^2 of a Laplace has sd sqrt(20) b^2 = sqrt(5) v, so the mean of
    # ~2000 of them has a relative sd of sqrt(5 / 2000) = 0.05: 20 % is 4 sd.
    assert abs(est / v - 1.0) < 0.2
    # Leaves holding a few points are negative less often, but Laplace noise is memoryless:
    # given e < -n, n + e is distributed as e given e < 0, so the estimate stays v (here ~1200
    # negatives of 4000 at n = 5, sd of b = 5: relative sd sqrt(5 / 1200) = 0.065, 4 sd = 0.26).
    few = 5.0 + _laplace(rng, 4000, v)
    assert np.sum(few < 0) < np.sum(empty < 0)
    low = negative_count_variance(few)
    assert low is not None and abs(low / v - 1.0) < 0.26
    assert negative_count_variance(np.array([-1.0] * 19 + [3.0])) is None  # too few to tell


def test_discounting_empties_most_noise_leaves_and_keeps_dense_ones() -> None:
    rng = np.random.default_rng(12)
    v = 8.0
    empty = noise_discounted_counts(_laplace(rng, 4000, v), np.full(4000, v))
    # Kept only where c > sd: P = exp(-sqrt 2) / 2 = 0.122 for Laplace noise; the share of 4000
    # has sd 0.005, so 0.16 is 7 sd above.
    assert np.mean(empty > 0) < 0.16
    dense = np.full(100, 400.0) + _laplace(rng, 100, v)
    kept = noise_discounted_counts(dense, np.full(100, v))
    # sqrt(c^2 - v) = c - v / (2c) + ...: at c ~ 400 a loss of about 0.01
    assert np.all(dense - kept < 0.02) and np.all(kept <= dense)
    # E[c^2 - v] = n^2: the squares are unbiased before the clip at 0 (here c >> sd, no clip);
    # sd of the mean of c^2 over 100 leaves is about 2 n sqrt(v) / 10 = 226, so 5 sd = 1130.
    assert abs(np.mean(kept**2) - 400.0**2) < 1130.0


def _quadrant(side: int) -> np.ndarray:
    """Points in the top-left quadrant only: three quarters of the grid are empty."""
    rng = np.random.default_rng(13)
    F = np.zeros((side, side), dtype=np.int64)
    half = side // 2
    F[:half, :half] = rng.poisson(20.0, (half, half))
    return F


def test_the_clustered_world_holds_little_mass_where_the_release_is_noise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    side, block, v = 64, 4, 100.0
    rng = np.random.default_rng(14)
    # 256 leaves of 4 x 4 cells: 64 hold 1000 points, 192 are empty; released with noise of
    # variance 100 (sd 10). The metadata is an HTF release's (the world re-runs HTF).
    hist = Histogram(spatial_case_schema(side, side), _quadrant(side))
    htf = HTF(1.0).release(hist, random_state=5, account=False)
    rects, counts, empty = [], [], []
    for r in range(0, side, block):
        for c in range(0, side, block):
            rects.append([r, r + block, c, c + block])
            empty.append(r >= side // 2 or c >= side // 2)
            counts.append(0.0 if empty[-1] else 1000.0)
    noisy = np.array(counts) + _laplace(rng, len(counts), v)
    release = leaf_release.LeafRelease(
        htf.schema, htf.metadata, np.array(rects), noisy, np.full(len(counts), v)
    )
    assert not release.reruns_keep_the_leaves  # HTF: the clustered world
    mask = np.zeros((side, side), dtype=bool)
    mask[side // 2 :, :] = mask[:, side // 2 :] = True

    def world_mass_in_empty_space() -> int:
        truth = release.bootstrap_world().truth.counts  # type: ignore[attr-defined]
        return int(truth[mask].sum())

    monkeypatch.setattr(leaf_release, "DENOISE_CLUSTERED_WORLD", True)
    assert release.bootstrap_world_version == "clustered-denoised-2"
    denoised = world_mass_in_empty_space()
    monkeypatch.setattr(leaf_release, "DENOISE_CLUSTERED_WORLD", False)
    assert release.bootstrap_world_version == "clustered-cascade-1"
    raw = world_mass_in_empty_space()
    # Raw: the positive parts of 192 noises, 192 E[max(e, 0)] = 192 b / 2 = 679 expected (b =
    # 7.07; sd of the sum 85). De-noised: only noises above one sd survive (exp(-sqrt 2) / 2 =
    # 12 %), each shrunk to sqrt(e^2 - v): E = 1.57 a leaf (numerical integral), 0.44 of the raw
    # (sd of the ratio about 0.1). The world is seeded: one fixed draw.
    assert raw > 400
    assert denoised < 0.7 * raw


def test_the_kd_tree_bound_discounts_noise_only_where_the_release_shows_it() -> None:
    side = 64
    F = _quadrant(side)
    hist = Histogram(spatial_case_schema(side, side), F)
    kd = KDTree(1.0).release(hist, random_state=6, account=False)
    assert kd.variances is None
    noise = kd.leaf_noise_variances()  # estimated from the negative counts of empty space
    assert noise is not None and np.all(noise > 0)
    queries = [
        {"p": {"bins": [[r, r + 9], [c, c + 9]]}}
        for r in range(0, side - 10, 6)
        for c in range(0, side - 10, 6)
    ]
    plain = kd.uniformity_variance_many(queries, 0.0)
    discounted = kd.uniformity_variance_many(queries, 0.0, discount_noise=True)
    assert np.all(discounted <= plain + 1e-9)
    assert np.any(discounted < plain)
    # Dense leaves lose about v / (2 c) of their count: over the populated quadrant (queries
    # offset by one cell, so they cut the kd-tree's multi-cell leaves) the bound barely moves.
    dense = [
        {"p": {"bins": [[r, r + 6], [c, c + 6]]}} for r in range(1, 25, 4) for c in range(1, 25, 4)
    ]
    d0 = kd.uniformity_variance_many(dense, 0.0)
    d1 = kd.uniformity_variance_many(dense, 0.0, discount_noise=True)
    assert d0.sum() > 0 and d1.sum() > 0.95 * d0.sum()


def test_the_coverage_experiment_switches_the_denoised_world_on_only_when_asked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from experiments import coverage

    monkeypatch.setattr(leaf_release, "DENOISE_CLUSTERED_WORLD", False)
    small = ["--quick", "--releases", "1", "--runs", "20", "--queries", "10"]
    assert coverage.main([*small, "--out", str(tmp_path / "a")]) == 0
    assert leaf_release.DENOISE_CLUSTERED_WORLD is False
    assert coverage.main([*small, "--denoised-world", "--out", str(tmp_path / "b")]) == 0
    assert leaf_release.DENOISE_CLUSTERED_WORLD is True
    assert (tmp_path / "b" / "coverage_runs.csv").exists()
