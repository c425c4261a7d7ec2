"""``Release.to_pandas()`` with intervals on thousands of leaves, against the per-replicate path.

Releases UG (a fixed 64 x 64 grid: 4,096 leaves) and HTF on a clustered synthetic 256 x 256 grid
(200,000 points), a census hierarchy (1 + 10 + 400 regions, sizes 1..10: 4,110 rows) and, with
``--large``, HTF on a 1024 x 1024 grid (300,000 points; ``--large-runs`` replicates, as each
re-run of HTF there takes seconds), with ``--geolife CSV`` HTF of the GeoLife points over
Beijing on 1024 x 1024 (e.g. the CSV unpacked from ``geolife/geolife_sample.txt.gz`` of the
shared data sets), then times in wall seconds, best of ``--repeat``:

- ``to_pandas()`` (the default ``trusted`` intervals: bounds for these kinds);
- ``to_pandas(intervals="model")`` with the ``--runs`` bootstrap replicates already drawn (what a
  release saved with ``--bootstrap-runs`` or a warm service does), and the first call, which
  also re-runs the mechanism ``--runs`` times;
- the baseline in the same run: the replicates answered one by one from the rows' query dicts,
  each parsed again for every replicate (the path ``to_pandas`` took before queries were parsed
  once and the replicates answered in one pass), and the noise floor of answering the rows once.

The script checks that the two give the same answers (to 1e-9).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/release/bench_to_pandas.py [--runs 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def large_htf() -> Any:
    from dpcube import Histogram
    from dpcube.mechanisms.spatial._common import spatial_case_schema
    from dpcube.mechanisms.spatial.htf import HTF

    side = 1024
    rng = np.random.default_rng(0)  # synthetic data
    pts = np.clip(rng.normal(side / 2, side / 8, size=(300_000, 2)), 0, side - 1).astype(int)
    grid = np.zeros((side, side), dtype=np.int64)
    np.add.at(grid, (pts[:, 0], pts[:, 1]), 1)
    hist = Histogram(spatial_case_schema(side, side), grid)
    return HTF(0.1).release(hist, random_state=1, account=False)


def geolife_htf(path: str) -> Any:
    """HTF (epsilon 0.1) of the GeoLife points over Beijing on a 1024 x 1024 grid (the city map
    of docs/location.md); ``path``: a CSV with ``lat`` and ``lng`` columns."""
    import dpcube

    schema = dpcube.Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "loc",
                    "kind": "spatial",
                    "columns": ["lat", "lng"],
                    "bbox": [39.75, 116.15, 40.10, 116.60],
                    "resolution": [1024, 1024],
                }
            ]
        }
    )
    hist = dpcube.histogram(path, schema, on_out_of_domain="drop")
    return dpcube.HTF(0.1).release(hist, random_state=1, account=False)


def releases() -> dict[str, Any]:
    import dpcube
    from dpcube import Histogram
    from dpcube.mechanisms.census.hierarchy import RegionHierarchy
    from dpcube.mechanisms.spatial._common import spatial_case_schema
    from dpcube.mechanisms.spatial.grids import UniformGrid
    from dpcube.mechanisms.spatial.htf import HTF

    side = 256
    rng = np.random.default_rng(0)  # synthetic data
    pts = np.clip(rng.normal(side / 2, side / 6, size=(200_000, 2)), 0, side - 1).astype(int)
    grid = np.zeros((side, side), dtype=np.int64)
    np.add.at(grid, (pts[:, 0], pts[:, 1]), 1)
    hist = Histogram(spatial_case_schema(side, side), grid)
    parents: dict[str, str | None] = {"US": None}
    for s in range(10):
        parents[f"S{s}"] = "US"
        for c in range(40):
            parents[f"S{s}C{c}"] = f"S{s}"
    h = RegionHierarchy.from_parents(parents)
    leaves = rng.poisson(30, size=(400, 10))
    table = dpcube.GroupSizeTable(h, h.aggregate(leaves), public_groups=True)
    return {
        "UG 64 x 64": UniformGrid(1.0, grid_size=64).release(hist, random_state=1, account=False),
        "HTF": HTF(1.0).release(hist, random_state=1, account=False),
        "census M_DP": dpcube.CensusHierarchy(1.0, method="dp").release(
            table, random_state=1, account=False
        ),
    }


def measure(name: str, release: Any, runs: int, repeat: int) -> bool:
    """Time one release (see the module docstring), print its line; whether the answers agree."""
    from dpcube.release.uncertainty import bootstrap_errors, bootstrap_replicates

    _, queries = release.table_cells()
    plain = [dict(q) for q in queries]  # query dicts, parsed again wherever answered
    t = time.perf_counter()
    truth, reps = bootstrap_replicates(release, runs, seed=7)
    first = time.perf_counter() - t
    trusted = best(lambda: release.to_pandas(seed=7, runs=runs), repeat)
    model = best(lambda: release.to_pandas(intervals="model", seed=7, runs=runs), repeat)
    floor = best(lambda: release.answer_many(plain), repeat)

    def per_replicate() -> np.ndarray:
        target = truth.answer_many(plain)
        return np.stack([rep.answer_many(plain) - target for rep in reps])

    baseline = best(per_replicate, 1)
    fast = bootstrap_errors(release, plain, runs=runs, seed=7)
    # the summed-area tables' entries reach the release's total: their float rounding is ~1e-16
    # of it per entry, so answers agree to 1e-12 of the total, not to 1e-9 absolute
    total = max(1.0, float(np.abs(release.answer_many([{}])).max()))
    same = bool(np.allclose(per_replicate(), fast, rtol=1e-9, atol=1e-12 * total))
    print(
        f"{name:12s} {len(plain):6d} {trusted:8.3f} {model:8.3f} {model + first:10.3f} "
        f"{baseline:9.3f} {floor:7.3f} {baseline / model:8.1f}x"
        + ("" if same else "  DIFFERENT ANSWERS")
    )
    return same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--large", action="store_true", help="also HTF on 1024 x 1024")
    parser.add_argument("--large-runs", type=int, default=20)
    parser.add_argument(
        "--geolife",
        metavar="CSV",
        help="also HTF of these GeoLife points (lat, lng) on 1024 x 1024",
    )
    args = parser.parse_args(argv)
    print(
        f"{'release':12s} {'rows':>6s} {'trusted':>8s} {'model':>8s} {'model 1st':>10s} "
        f"{'baseline':>9s} {'floor':>7s} {'speed-up':>9s}"
    )
    ok = all([measure(n, r, args.runs, args.repeat) for n, r in releases().items()])
    if args.large:
        ok = measure("HTF 1024", large_htf(), args.large_runs, args.repeat) and ok
    if args.geolife:
        ok = measure("GeoLife HTF", geolife_htf(args.geolife), args.large_runs, args.repeat) and ok
    print(f"seconds, best of {args.repeat}; {args.runs} replicates; same answers: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
