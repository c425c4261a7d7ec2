"""The data-cube experiments' own code paths (the runs themselves are in experiments/docs)."""

from __future__ import annotations

import numpy as np

from dpcube.mechanisms.datacube.lattice import Lattice, rollup
from experiments.datacube import Cube, lpre_summary, lpre_timing


def test_fig9b_lpre_choices_time_every_choice() -> None:
    """Fig. 9(b): Base, PMost, BMax, All and random L_pre of sizes 1..8 (each containing the base
    cuboid) on a 2 x 3 x 2 cube; every row has both timings and the summary is computed."""
    lat = Lattice((2, 3, 2))
    base = np.random.default_rng(0).integers(0, 5, size=(2, 3, 2))
    rows = lpre_timing(Cube(lat, base), seeds=2, sizes=(1, 2, 4, 8, 16))
    names = [r["lpre"] for r in rows]
    assert names[:4] == ["Base", "PMost", "BMax", "All"]
    assert rows[0]["size"] == 1 and rows[3]["size"] == 8  # All measures the 2^3 cuboids
    assert [r["size"] for r in rows[4:]] == [1, 1, 2, 2, 4, 4, 8, 8]  # 16 > 8 cuboids: skipped
    assert all(r["noise_aggregation_cpu"] >= 0 and r["consistency_cpu"] >= 0 for r in rows)
    summary = lpre_summary(rows)
    assert set(summary) == {"consistency_slope", "consistency_r2", "noise_spearman"}
    assert -1.0 <= summary["noise_spearman"] <= 1.0


def test_cube_truth_rolls_up_through_supersets_to_the_base_rollup() -> None:
    """Cube.truth sums each cuboid from a cached parent with one more dimension (a
    speed-up); integer sums are exact, so every cuboid must equal the direct roll-up of the base
    cuboid, and counts() must hand back the same arrays."""
    lat = Lattice((3, 2, 4, 2))
    base = np.random.default_rng(1).integers(0, 7, size=(3, 2, 4, 2))
    cube = Cube(lat, base)
    for mask in reversed(range(1 << lat.d)):  # small cuboids last, base first
        assert np.array_equal(cube.truth(mask), rollup(base, lat.base, mask))
    fresh = Cube(lat, base)  # an order that starts from the apex, so parents are built on demand
    counts = fresh.counts(range(1 << lat.d))
    for mask, arr in counts.items():
        assert arr.dtype == np.int64
        assert np.array_equal(arr, rollup(base, lat.base, mask))
