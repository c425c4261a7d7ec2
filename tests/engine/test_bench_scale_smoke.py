"""The scale benchmark (benchmarks/engine/bench_scale.py) still runs: 100k rows, DuckDB only.

A smoke test so the code does not rot; it asserts the results (row and person counts, the four
workloads, a measured peak memory), never a time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "engine" / "bench_scale.py"


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300
    )


def test_bench_scale_duckdb_100k(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    done = run_bench(
        "--rows", "100000", "--engines", "duckdb", "--work-dir", str(tmp_path / "w"),
        "--duckdb-memory", "1GB", "--json", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {r["workload"]: r for r in json.loads(out.read_text())}
    assert sorted(rows) == ["census", "datacube", "histogram", "histogram-unit"]
    # every person is counted once in the histogram and once in the group-size table
    assert rows["histogram"]["check"]["rows"] == 100_000
    assert rows["census"]["check"]["persons"] == 100_000
    assert 0 < rows["census"]["check"]["groups"] < 100_000
    assert rows["datacube"]["check"]["cuboids"] == 16  # all 2^4 cuboids published
    # each of the 3,144 counties keeps at most 100 rows; the skewed large counties lose some
    assert 0 < rows["histogram-unit"]["check"]["rows"] < min(100_000, 3144 * 100)
    assert "duckdb: bounding+counting / counting alone: time" in done.stdout
    for r in rows.values():
        # a DuckDB process holds at least its own code: the measurement saw a live process
        assert r["peak_rss"] > 10_000_000 and r["child_maxrss"] > 10_000_000
    assert "| duckdb | census |" in done.stdout
    # the generated file is reused, never rewritten, on a second run
    data = tmp_path / "w" / "persons_100000.parquet"
    before = data.stat().st_mtime_ns
    again = run_bench(
        "--rows", "100000", "--engines", "duckdb", "--workloads", "histogram",
        "--work-dir", str(tmp_path / "w"),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert data.stat().st_mtime_ns == before


def test_bench_scale_refuses_a_work_dir_in_the_repository() -> None:
    done = run_bench("--rows", "1000", "--work-dir", str(BENCH.parent))
    assert done.returncode != 0
    assert "inside the repository" in done.stderr
