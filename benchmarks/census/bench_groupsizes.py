"""Person-level group-size table through DuckDB: the synthetic census persons are generated and
grouped inside DuckDB (never in Python); checks the result equals the generator's table.

    .venv/bin/python benchmarks/census/bench_groupsizes.py --scale 0.1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # experiments/ beside src/
from experiments.census_generator import census_table, regroup_through_duckdb


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--scale", type=float, default=0.1)
    p.add_argument("--max-size", type=int, default=1000)
    args = p.parse_args()
    table = census_table(scale=args.scale, max_size=args.max_size, seed=0)
    persons = int((table.counts[0] * np.arange(1, table.max_size + 1)).sum())
    t = time.perf_counter()
    again = regroup_through_duckdb(table)
    seconds = time.perf_counter() - t
    same = bool(np.array_equal(again.counts, table.counts))
    print(
        f"scale {args.scale}: {table.groups} groups, {persons} persons, DuckDB group-size table {seconds:.1f} s, equal: {same}"
    )


if __name__ == "__main__":
    main()
