"""Release time and query throughput of HTF and the spatial baselines.

One run: a 1024 x 1024 grid with 3.5M points (the LA-like proxy of ``python -m experiments.spatial``),
each mechanism released once at eps = 0.1, then 10^5 random rectangles answered from the
release. Baselines in the same run: the Identity mechanism's release time (noise on every cell)
and, for the queries, a direct loop over the leaves (sum_L c_L |Q & L| / |L|) on 10^3 queries.

    .venv/bin/python benchmarks/spatial/bench_release.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from dpcube import Histogram, Identity
from dpcube.mechanisms.spatial import (
    HTF,
    AdaptiveGrid,
    KDTree,
    PrivTree,
    QuadTree,
    Singular,
    Uniform,
    UniformGrid,
)
from dpcube.mechanisms.spatial._common import spatial_case_schema
from dpcube.mechanisms.spatial.release import LeafRelease, brute_force_answers

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # experiments/ beside src/
from experiments.spatial import la_proxy


def main() -> None:
    F = la_proxy(3_500_000, side=1024)
    H = Histogram(spatial_case_schema(1024, 1024), F)
    rng = np.random.default_rng(0)
    boxes = np.sort(rng.integers(0, 1024, size=(100_000, 2, 2)), axis=2)
    t = time.perf_counter()
    Identity(0.1).release(H, random_state=1)
    t_identity = time.perf_counter() - t
    print(f"grid 1024 x 1024, {F.sum():,} points, eps = 0.1; Identity release {t_identity:.2f} s")
    print(
        f"{'mechanism':<12}{'release s':>10}{'x Identity':>11}{'leaves':>9}{'queries/s':>12}{'loop q/s':>10}{'speed-up':>10}"
    )
    mechanisms = [
        HTF(0.1),
        UniformGrid(0.1),
        AdaptiveGrid(0.1),
        QuadTree(0.1),
        KDTree(0.1),
        PrivTree(0.1),
        Uniform(0.1),
        Singular(0.1),
    ]
    for mech in mechanisms:
        t = time.perf_counter()
        release = mech.release(H, random_state=1)
        t_release = time.perf_counter() - t
        if isinstance(release, LeafRelease):
            t = time.perf_counter()
            release.answer_boxes(boxes)
            qps = len(boxes) / (time.perf_counter() - t)
            t = time.perf_counter()
            brute_force_answers(release.rects, release.leaf_counts, boxes[:1000])
            loop = 1000 / (time.perf_counter() - t)
            leaves = len(release.rects)
        else:
            queries = [{"p": {"bins": b.tolist()}} for b in boxes]
            t = time.perf_counter()
            release.answer_many(queries)
            qps = len(boxes) / (time.perf_counter() - t)
            loop, leaves = float("nan"), 1024 * 1024
        print(
            f"{mech.name:<12}{t_release:>10.2f}{t_release / t_identity:>11.1f}{leaves:>9}{qps:>12,.0f}{loop:>10,.0f}{qps / loop:>10.0f}"
        )


if __name__ == "__main__":
    main()
