"""Spatial leaf intervals widened by the uniformity error of cut leaves, and flagged where the
interval is mostly that bound (coverage on clustered data, experiments/docs/coverage.md)."""

from __future__ import annotations

import itertools

import numpy as np

from dpcube import Histogram
from dpcube.mechanisms.spatial._common import spatial_case_schema
from dpcube.mechanisms.spatial.release import LeafRelease
from dpcube.mechanisms.spatial.trees import KDTree
from dpcube.privacy import NO_NOISE
from dpcube.release.uncertainty import UNTRUSTED_NOTE, answer_uncertainty, format_answer


def _one_leaf_release(count: float) -> LeafRelease:
    """A 1 x 4 grid released as one leaf (noise switched off: only the layout matters)."""
    schema = spatial_case_schema(1, 4)
    r = KDTree(1.0).release(Histogram(schema, np.zeros((1, 4), np.int64)), random_state=NO_NOISE)
    return LeafRelease(schema, r.metadata, np.array([[0, 1, 0, 4]]), np.array([count]))


def test_uniformity_variance_is_the_bhatia_davis_bound() -> None:
    release = _one_leaf_release(8.0)
    half = [{"p": {"bins": [[0, 0], [0, 1]]}}]  # f = 1/2 of the leaf
    whole = [{"p": {"bins": [[0, 0], [0, 3]]}}]  # f = 1: not cut
    assert release.uniformity_variance_many(half, 0.0).tolist() == [8.0**2 * 0.25]
    assert release.uniformity_variance_many(half, 1.0).tolist() == [8.0**2 * 0.25 / 2]
    assert release.uniformity_variance_many(whole, 0.0).tolist() == [0.0]
    # Brute force: every layout of the 8 points over the 4 cells, weighted equally, has a share
    # inside the query whose variance is at most the bound (and the two-point layouts, all in
    # or all out, reach it when they are equally likely).
    shares = [
        sum(1 for c in cells if c < 2) / 8
        for cells in itertools.combinations_with_replacement(range(4), 8)
    ]
    assert np.var(np.asarray(shares) * 8) <= 8.0**2 * 0.25
    assert np.var(np.array([0.0, 8.0])) == 8.0**2 * 0.25


def test_widened_intervals_contain_the_bootstrap_ones_and_flag_the_bound(
    clustered_grid: np.ndarray,
) -> None:
    side = 32
    F = clustered_grid
    # 5,000 tightly clustered points: the kd-tree's leaves (median splits, so the bound widens
    # its intervals) are cut by the rectangles where the cluster lies.
    release = KDTree(1.0).release(
        Histogram(spatial_case_schema(side, side), F), random_state=4, account=False
    )
    queries = [
        {"p": {"bins": [[0, r], [0, c]]}} for r in range(4, side, 5) for c in range(3, side, 7)
    ]
    plain = answer_uncertainty(
        release, queries, intervals="model", runs=20, seed=3, uniformity_kappa=None
    )
    wide = answer_uncertainty(release, queries, intervals="model", runs=20, seed=3)
    assert np.all(wide.lower <= plain.lower) and np.all(wide.upper >= plain.upper)
    assert np.any(wide.upper > plain.upper)  # some query cuts a populated leaf
    # model-based intervals, widened or not, are never trusted, and every line says so
    assert wide.untrusted is not None and wide.untrusted.all()
    assert set(wide.interval_kind.tolist()) == {"model"}
    assert all(UNTRUSTED_NOTE in format_answer(a, wide, i) for i, a in enumerate(wide.answers))
    # The true answers: the bound covers them at least as often as the bootstrap alone.
    truth = np.array(
        [F[: q["p"]["bins"][0][1] + 1, : q["p"]["bins"][1][1] + 1].sum() for q in queries]
    )
    inside_plain = np.mean((truth >= plain.lower) & (truth <= plain.upper))
    inside_wide = np.mean((truth >= wide.lower) & (truth <= wide.upper))
    assert inside_wide >= inside_plain
