"""Post-processing time of M_DP and M_CDP versus the relaxed QP (HiGHS) and TopDown, on the same
noisy input, on the synthetic census hierarchy (1 + 52 + 3,144 regions) at several k.

    .venv/bin/python benchmarks/census/bench_postprocess.py --ks 10,100,1000 --epsilon 1.0 --qp-time-limit 60

Prints seconds per method and the ratio baseline / DP. The relaxed QP is stopped at the time
limit and reported as such.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

from dpcube.mechanisms.census import privacy as P
from dpcube.mechanisms.census.baselines import relaxed_hierarchical, topdown
from dpcube.mechanisms.census.chain import chain_isotonic, counts_from_levels
from dpcube.mechanisms.census.dp import solve_tree, tail_half_width
from dpcube.privacy.random import SeededRandomSource

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # experiments/ beside src/
from experiments.census_generator import census_table


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ks", default="10,100,1000")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--qp-time-limit", type=float, default=60.0)
    p.add_argument(
        "--qp-max-nodes", type=int, default=40_000, help="skip the relaxed QP above this"
    )
    args = p.parse_args()
    print(
        f"{'k':>5} {'nodes':>9} {'M_DP':>8} {'M_CDP':>8} {'TopDown':>8} {'relaxed QP':>16} {'QP/M_DP':>8} {'TD/M_CDP':>8}"
    )
    for k in [int(x) for x in args.ks.split(",")]:
        table = census_table(scale=args.scale, max_size=k, seed=0)
        h, G = table.hierarchy, table.groups
        src = SeededRandomSource(args.seed)
        noisy, _ = P.noisy_counts(table, args.epsilon, src, "add_remove")
        chain, _ = P.noisy_chain(table, args.epsilon, src, "add_remove", "private_postprocessed")
        alpha = math.exp(-args.epsilon / (2 * h.levels))
        t = time.perf_counter()
        solve_tree(h, noisy, G, tail_half_width(alpha, h.size * k))
        t_dp = time.perf_counter() - t
        t = time.perf_counter()
        counts_from_levels(h, chain_isotonic(h, chain, G))
        t_cdp = time.perf_counter() - t
        t = time.perf_counter()
        topdown(h, noisy.astype(np.float64), G)
        t_td = time.perf_counter() - t
        if h.size * k <= args.qp_max_nodes:
            _, qp = relaxed_hierarchical(h, noisy, G, args.qp_time_limit)
            status = f"{qp.seconds:.1f}" + ("" if qp.status == "Optimal" else " (limit)")
            ratio = f"{qp.seconds / t_dp:8.1f}"
        else:
            status, ratio = "skipped", "     n/a"
        print(
            f"{k:5d} {h.size * k + 1:9d} {t_dp:8.2f} {t_cdp:8.2f} {t_td:8.2f} {status:>16} {ratio} "
            f"{t_td / t_cdp:8.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
