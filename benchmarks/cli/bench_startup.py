"""Start-up of ``dpcube query`` and ``dpcube --version`` against ``import numpy, pyarrow``.

Writes a seeded Identity release of a tiny schema (age 0-99 in 10 bins x sex) to a temporary
directory, then runs, in fresh processes and alternating (one round = one run of each, so that a
change in the machine's load touches the three alike), ``--runs`` rounds of:

- ``python -c "import numpy, pyarrow"`` (the libraries a release is read with: the floor of any
  Python tool that reads one);
- ``python -m dpcube query REL --where "age=20..49"``;
- ``python -m dpcube --version``.

Each child is timed by wall clock and by its CPU seconds (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``); CPU seconds are the figure to compare on a loaded
machine. ``OPENBLAS_NUM_THREADS=1`` is set for every child. Bytecode is cached in a temporary
``PYTHONPYCACHEPREFIX`` (``PYTHONDONTWRITEBYTECODE`` is unset for the children), as it is for an
installed package, and one untimed warm-up run of each fills that cache first; without it every
call also compiles dpcube's modules from source. Prints the medians and their ratios to the
baseline.

    PYTHONPATH=src .venv/bin/python benchmarks/cli/bench_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_release(directory: Path) -> Path:
    import numpy as np

    from dpcube import Histogram, Identity, Schema

    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "age", "kind": "ordinal", "range": [0, 99], "width": 10},
                {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
            ]
        }
    )
    out = directory / "rel"
    counts = np.arange(20).reshape(schema.shape)
    Identity(1.0).release(Histogram(schema, counts), random_state=1).save(out)
    return out


def timed(argv: list[str], env: dict[str, str], tries: int = 3) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one successful run of ``argv``; a failed run is reported
    on stderr and run again (at most ``tries`` times)."""
    for _ in range(tries):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode == 0:
            return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(
            f"note: {' '.join(argv[1:])} exited {done.returncode} "
            f"({done.stderr.strip().splitlines()[-1:]}); run again",
            file=sys.stderr,
        )
    raise SystemExit(f"{' '.join(argv)} failed {tries} times")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds (one run of each per round)")
    args = parser.parse_args(argv)
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPYCACHEPREFIX": f"{tmp}/pycache"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        rel = make_release(Path(tmp))
        commands = {
            "import numpy, pyarrow": [python, "-c", "import numpy, pyarrow"],
            "dpcube query": [python, "-m", "dpcube", "query", str(rel), "--where", "age=20..49"],
            "dpcube --version": [python, "-m", "dpcube", "--version"],
        }
        for command in commands.values():
            timed(command, env)  # warm-up: bytecode cache, file system cache
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                wall, cpu = timed(command, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
    base_wall = statistics.median(walls["import numpy, pyarrow"])
    base_cpu = statistics.median(cpus["import numpy, pyarrow"])
    print(f"{args.runs} alternating runs each, medians (python {sys.version.split()[0]})")
    print(f"{'command':24s} {'wall s':>8s} {'CPU s':>8s} {'wall ratio':>11s} {'CPU ratio':>10s}")
    for name in commands:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:24s} {wall:8.3f} {cpu:8.3f} {wall / base_wall:10.2f}x {cpu / base_cpu:9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
