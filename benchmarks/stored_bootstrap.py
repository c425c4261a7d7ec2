"""A bootstrap answer from stored replicates against re-running the mechanism, in the same run.

Releases a kd-tree (epsilon 1) of a clustered synthetic 256 x 256 grid (200,000 points), stores
``--runs`` bootstrap replicates with it (``dpcube.release.uncertainty.store_bootstrap``, what
``dpcube release --bootstrap-runs`` does), saves it, then times in CPU seconds
(``time.process_time``; ``OPENBLAS_NUM_THREADS=1`` recommended on a shared machine):

- storing the replicates (once, at release time);
- loading the release and answering ``--queries`` rectangles from the stored replicates;
- the baseline: the same answers on a freshly loaded release whose replicates are computed
  (the mechanism re-run ``--runs`` times, as for a release without stored replicates).

The two give the same intervals (same seed); the script checks it.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/stored_bootstrap.py [--runs 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    import dpcube
    from dpcube import Histogram
    from dpcube.mechanisms.spatial._common import spatial_case_schema
    from dpcube.mechanisms.spatial.trees import KDTree
    from dpcube.release.uncertainty import answer_uncertainty, store_bootstrap

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--queries", type=int, default=10)
    args = parser.parse_args(argv)
    side = 256
    rng = np.random.default_rng(0)  # synthetic data
    pts = np.clip(rng.normal(side / 2, side / 6, size=(200_000, 2)), 0, side - 1).astype(int)
    grid = np.zeros((side, side), dtype=np.int64)
    np.add.at(grid, (pts[:, 0], pts[:, 1]), 1)
    release = KDTree(1.0).release(
        Histogram(spatial_case_schema(side, side), grid), random_state=1, account=False
    )
    queries = [
        {"p": {"bins": [[i, i + 90], [20 + i, 200]]}} for i in range(0, 10 * args.queries, 10)
    ]
    t = time.process_time()
    store_bootstrap(release, runs=args.runs, seed=1)
    store_s = time.process_time() - t
    with tempfile.TemporaryDirectory() as tmp:
        out = release.save(Path(tmp) / "rel")
        size = sum(f.stat().st_size for f in out.iterdir())
        t = time.process_time()
        stored = answer_uncertainty(dpcube.load_release(out), queries)
        stored_s = time.process_time() - t
        t = time.process_time()
        baseline = dpcube.load_release(out)
        baseline.stored_replicates = None  # as a release saved without replicates
        rerun = answer_uncertainty(baseline, queries, runs=args.runs, seed=1)
        rerun_s = time.process_time() - t
    same = np.allclose(stored.lower, rerun.lower) and np.allclose(stored.upper, rerun.upper)
    print(f"kd-tree, {len(release.rects):,} leaves; {args.runs} replicates; {len(queries)} queries")
    print(
        f"store replicates (once, at release): {store_s:8.2f} CPU s; release on disk {size / 1e6:.1f} MB"
    )
    print(f"load + answer from stored replicates: {stored_s:8.2f} CPU s")
    print(f"load + answer re-running (baseline):  {rerun_s:8.2f} CPU s")
    print(f"speed-up: {rerun_s / max(stored_s, 1e-9):.1f}x; same intervals: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
