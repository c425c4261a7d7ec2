"""Time the phases of DP data-cube publishing against the All baseline, in the same run.

For each table: cuboid selection (Algorithms 1-2), noise on the measured cuboids, K_part aggregation
of the other cuboids, and L2 consistency, for BMax/BMaxC and PMost/PMostC, and the same phases for
All/AllC (all 2^d cuboids measured; Ding et al., SIGMOD 2011, Sec. 6). Prints seconds (CPU time of
this process, best of ``--repeat``) and the ratio All / method. Tables: Adult's 8 categorical
columns (the true counts come from the CSV through DuckDB GROUPING SETS and are timed as "counting")
and the 10-dimension table of Exp-IV/VI (Adult + two synthetic dimensions of cardinality 4; errors
and times do not depend on the data, so its counts are zeros).

    .venv/bin/python benchmarks/datacube/bench_datacube.py --data-dir ../shared/data
    .venv/bin/python benchmarks/datacube/bench_datacube.py --data-dir ../shared/data --tables adult
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from dpcube.mechanisms.datacube.consistency import l2_consistent
from dpcube.mechanisms.datacube.counting import counts_from_source
from dpcube.mechanisms.datacube.geometry import CubeGeometry
from dpcube.mechanisms.datacube.lattice import Lattice, best_sources, shape
from dpcube.mechanisms.datacube.mechanism import aggregate, measure, select
from dpcube.privacy.random import SeededRandomSource

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # experiments/ beside src/
from experiments.datacube import ADULT_DIMS, adult_schema


def timed(f: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best CPU time of ``repeat`` calls and the last result."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        start = time.process_time()
        result = f()
        best = min(best, time.process_time() - start)
    return best, result


def phases(
    lattice: Lattice,
    method: str,
    counts: Callable[[list[int]], dict[int, Any]],
    repeat: int,
    consistency: bool,
) -> dict[str, float]:
    published = list(range(1 << lattice.d))
    out: dict[str, float] = {}
    out["selection"], sel = timed(lambda: select(lattice, published, method), repeat)
    out["counting"], true = timed(lambda: counts(list(sel.sources)), repeat)
    out["noise"], (noisy, variances, _) = timed(
        lambda: measure(true, sel, 1.0, 1, "uniform", SeededRandomSource(0)), repeat
    )

    def agg() -> None:
        best = best_sources(lattice, {m: Fraction(v) for m, v in variances.items()}, published)
        aggregate(noisy, best, published)

    out["aggregation"], _ = timed(agg, repeat)
    if consistency:
        weights = {m: 1.0 / v for m, v in variances.items()}
        out["consistency"], _ = timed(
            lambda: l2_consistent(lattice, noisy, weights, published), repeat
        )
    out["lpre"] = float(len(sel.sources))
    return out


def report(title: str, results: dict[str, dict[str, float]]) -> None:
    print(f"\n{title}")
    cols = ["selection", "counting", "noise", "aggregation", "consistency"]
    print(
        f"{'method':8} {'|L_pre|':>7} "
        + " ".join(f"{c:>11}" for c in cols)
        + f" {'total':>9} {'All/this':>9}"
    )
    totals = {}
    for name, r in results.items():
        base = sum(r.get(c, 0.0) for c in cols[:4])
        totals[name] = base
        if "consistency" in r:
            totals[name + "C"] = base + r["consistency"]
    for name, r in results.items():
        for variant in (name, name + "C"):
            if variant not in totals:
                continue
            baseline = totals["AllC" if variant.endswith("C") and "AllC" in totals else "All"]
            cells = " ".join(
                f"{r.get(c, float('nan')) if (c != 'consistency' or variant.endswith('C')) else float('nan'):11.3f}"
                for c in cols
            )
            print(
                f"{variant:8} {int(r['lpre']):7d} {cells} {totals[variant]:9.3f} {baseline / totals[variant]:9.2f}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--tables", default="adult,syn10")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--allc-up-to", type=int, default=8, help="run AllC only up to this many dims"
    )
    args = parser.parse_args()
    tables = args.tables.split(",")
    if "adult" in tables:
        schema = adult_schema(args.data_dir)
        geo = CubeGeometry(schema)
        csv = str(args.data_dir / "adult" / "adult.csv")

        def from_csv(masks: list[int]) -> dict[int, Any]:
            return counts_from_source(geo, csv, masks)[0]

        results = {
            name: phases(
                geo.lattice,
                method,
                from_csv,
                args.repeat,
                geo.lattice.d <= args.allc_up_to or method != "all",
            )
            for name, method in (("All", "all"), ("BMax", "bmax"), ("PMost", "pmost"))
        }
        report(
            f"Adult, {len(ADULT_DIMS)} dims (counting: DuckDB GROUPING SETS over the CSV)", results
        )
    if "syn10" in tables:
        lattice = Lattice((9, 16, 7, 15, 6, 5, 2, 2, 4, 4))

        def zeros(masks: list[int]) -> dict[int, Any]:
            return {m: np.zeros(shape(lattice, m), dtype=np.int64) for m in masks}

        results = {
            name: phases(
                lattice, method, zeros, args.repeat, lattice.d <= args.allc_up_to or method != "all"
            )
            for name, method in (("All", "all"), ("BMax", "bmax"), ("PMost", "pmost"))
        }
        report("Adult + 2 synthetic dims = 10 dims (zero table)", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
