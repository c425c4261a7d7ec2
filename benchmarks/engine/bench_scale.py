"""Scale, measured: DuckDB vs Spark local on a synthetic person table on disk.

Builds ``persons_<rows>.parquet`` under ``--work-dir`` (DuckDB ``COPY ... FROM range(...)``,
see ``scale_data.py``; reused when present) and runs each workload (``histogram``, ``histogram-unit``
(the same histogram with each county, the privacy unit, bounded to 100 rows first), ``datacube``,
``census``; see ``scale_jobs.py``) on each engine in a fresh child process, measuring wall time,
CPU seconds and peak memory of the whole process tree (``proc_memory.py``: DuckDB is one process;
Spark local is the Python driver plus one JVM that is driver and executor at once). DuckDB runs
with ``memory_limit`` ``--duckdb-memory``, Spark with ``spark.driver.memory`` ``--driver-memory``.
Prints a table and the Spark/DuckDB ratios, and checks that both engines computed the same
result (digests of the counts).

``--census-full SCALE`` also runs the census group-size table on the synthetic census persons at
``SCALE`` (1.0: 298.3M persons, 117.6M groups, ``census_persons_1_1000.parquet``) on the engines
of ``--census-engines`` (default Spark only). Engine ``spark-onepass`` is Spark with the
benchmark's one-job group-size count (``scale_jobs.spark_group_sizes``) instead of
``dpcube.group_sizes``.

    .venv/bin/python benchmarks/engine/bench_scale.py --rows 1000000
    .venv/bin/python benchmarks/engine/bench_scale.py --rows 100000000 --work-dir /tmp/dpcube-scale
    .venv/bin/python benchmarks/engine/bench_scale.py --rows 0 --census-full 1.0 --driver-memory 6g
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import proc_memory
import scale_data

HERE = Path(__file__).resolve().parent
WORKLOADS = ("histogram", "histogram-unit", "datacube", "census")
ENGINES = ("duckdb", "spark", "spark-onepass")


def gb(n: float) -> str:
    """Bytes as GB (10^9) with 2 decimals.

    >>> gb(1.5e9)
    '1.50'
    """
    return f"{n / 1e9:.2f}"


def job(args: argparse.Namespace, engine: str, workload: str, data: Path) -> dict[str, Any]:
    """Run one workload in a child process and measure it."""
    cmd = [
        sys.executable,
        str(HERE / "scale_jobs.py"),
        "--engine",
        engine.split("-")[0],
        "--census-path",
        "onepass" if engine == "spark-onepass" else "library",
        "--workload",
        workload,
        "--data",
        str(data),
        "--work-dir",
        str(args.work_dir),
        "--cores",
        str(args.cores),
        "--memory-limit",
        args.duckdb_memory,
        "--driver-memory",
        args.driver_memory,
        "--max-size",
        str(1000 if workload == "census-full" else args.max_size),
    ]
    for conf in args.spark_conf:
        cmd += ["--spark-conf", conf]
    m = proc_memory.run_measured(cmd)
    if m.returncode != 0:
        tail = "\n".join(m.stderr.strip().splitlines()[-15:])
        raise SystemExit(f"{engine} {workload} failed (exit {m.returncode}):\n{tail}")
    result = json.loads(m.stdout.strip().splitlines()[-1])
    return {
        "engine": engine,
        "workload": workload,
        "seconds": result["seconds"],
        "workload_cpu_s": result["cpu_s"],
        "startup_s": result["startup_s"],
        "process_wall_s": m.wall_s,
        "cpu_s": m.tree_cpu_s,
        "peak_rss": m.tree_peak_rss,
        "child_maxrss": m.child_maxrss,
        "check": result["check"],
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        "| engine | workload | workload s | workload CPU s | startup s | process wall s | "
        "process tree CPU s | "
        "peak tree RSS GB (polled) | max single-process RSS GB (wait4) | result |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        check = ", ".join(f"{k} {v}" for k, v in r["check"].items())
        print(
            f"| {r['engine']} | {r['workload']} | {r['seconds']:.1f} | {r['workload_cpu_s']:.1f} | "
            f"{r['startup_s']:.1f} | "
            f"{r['process_wall_s']:.1f} | {r['cpu_s']:.1f} | {gb(r['peak_rss'])} | "
            f"{gb(r['child_maxrss'])} | {check} |"
        )


def ratios(rows: list[dict[str, Any]]) -> list[str]:
    """Spark / DuckDB ratios of the workload time per workload, and whether results agree."""
    lines = []
    by = {(r["engine"], r["workload"]): r for r in rows}
    for w in sorted({r["workload"] for r in rows}):
        d, s = by.get(("duckdb", w)), by.get(("spark", w))
        if d and s:
            same = d["check"] == s["check"]
            lines.append(
                f"{w}: Spark/DuckDB time {s['seconds'] / d['seconds']:.2f}x, "
                f"CPU {s['workload_cpu_s'] / d['workload_cpu_s']:.2f}x "
                f"(process wall {s['process_wall_s'] / d['process_wall_s']:.2f}x), "
                f"peak RSS {s['peak_rss'] / d['peak_rss']:.2f}x; same result: {same}"
            )
    for engine in sorted({r["engine"] for r in rows}):
        plain, bounded = by.get((engine, "histogram")), by.get((engine, "histogram-unit"))
        if plain and bounded:
            lines.append(
                f"{engine}: bounding+counting / counting alone: time "
                f"{bounded['seconds'] / plain['seconds']:.2f}x, CPU "
                f"{bounded['workload_cpu_s'] / plain['workload_cpu_s']:.2f}x, peak RSS "
                f"{bounded['peak_rss'] / plain['peak_rss']:.2f}x"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="person rows (0: skip)")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/dpcube-scale"))
    p.add_argument("--engines", default="duckdb,spark")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--cores", type=int, default=2, help="DuckDB threads / Spark local[N]")
    p.add_argument("--duckdb-memory", default="8GB", help="DuckDB memory_limit")
    p.add_argument("--driver-memory", default="6g", help="spark.driver.memory (heap cap)")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--max-size", type=int, default=10, help="census top-code k (person table)")
    p.add_argument("--census-full", type=float, default=None, metavar="SCALE")
    p.add_argument("--census-engines", default="spark")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = p.parse_args(argv)
    repo = HERE.parent.parent
    work = args.work_dir.resolve()
    if work == repo or repo in work.parents:
        raise SystemExit(f"--work-dir {args.work_dir} is inside the repository; use e.g. /tmp")
    engines = [e for e in args.engines.split(",") if e]
    workloads = [w for w in args.workloads.split(",") if w]
    census_engines = [e for e in args.census_engines.split(",") if e]
    for name, got, known in (
        ("engine", engines + census_engines, ENGINES),
        ("workload", workloads, WORKLOADS),
    ):
        for g in got:
            if g not in known:
                raise SystemExit(f"unknown {name} {g!r}; known: {', '.join(known)}")
    if args.rows < 0:
        raise SystemExit(f"--rows must be >= 0, got {args.rows}")
    args.work_dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(args.work_dir).free
    print(f"work dir {args.work_dir}: {gb(free)} GB free")
    rows: list[dict[str, Any]] = []
    if args.rows:
        t = time.perf_counter()
        data = scale_data.write_persons(args.work_dir, args.rows, memory_limit=args.duckdb_memory)
        print(f"{data} ({gb(data.stat().st_size)} GB) ready in {time.perf_counter() - t:.1f} s")
        for workload in workloads:
            for engine in engines:
                rows.append(job(args, engine, workload, data))
                print(json.dumps(rows[-1]), flush=True)
    if args.census_full is not None:
        t = time.perf_counter()
        data = scale_data.write_census_persons(
            args.work_dir, args.census_full, memory_limit=args.duckdb_memory
        )
        print(f"{data} ({gb(data.stat().st_size)} GB) ready in {time.perf_counter() - t:.1f} s")
        for engine in census_engines:
            rows.append(job(args, engine, "census-full", data))
            print(json.dumps(rows[-1]), flush=True)
    print()
    print_table(rows)
    for line in ratios(rows):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
