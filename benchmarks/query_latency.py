"""Latency of one ``dpcube query`` call against the bare Python start-up, in the same run.

Writes a seeded Identity release of a person-like schema (age 0-100 x sex x 10 income bins x
6 states = 12,120 cells) to a temporary directory, then times, best of ``--repeat``:

- ``python -c pass`` (the interpreter's own start-up: the floor of any command-line tool);
- ``python -c "import numpy"`` and ``python -c "import numpy, pyarrow"`` (the libraries a release
  is read with: the floor of any Python tool that reads it);
- ``python -m dpcube query REL --where ...`` in text and ``--json``, and with ``--group-by``.

Each child process is timed by wall clock and by its CPU seconds (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``); CPU seconds are the figure to compare on a loaded
machine. ``OPENBLAS_NUM_THREADS=1`` is set for every child. Bytecode is cached in a temporary
``PYTHONPYCACHEPREFIX`` (``PYTHONDONTWRITEBYTECODE`` is unset for the children, one untimed
warm-up run each), as it is for an installed package; without it every call also compiles
dpcube's modules from source.

    .venv/bin/python benchmarks/query_latency.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def make_release(directory: Path) -> Path:
    from dpcube import Histogram, Identity, Schema

    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "age", "kind": "ordinal", "range": [0, 100], "width": 1},
                {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
                {
                    "name": "income",
                    "kind": "ordinal",
                    "edges": [
                        0,
                        10_000,
                        20_000,
                        35_000,
                        50_000,
                        75_000,
                        100_000,
                        150_000,
                        250_000,
                        1_000_000,
                        10_000_000,
                    ],
                },
                {"name": "state", "kind": "nominal", "categories": list("ABCDEF")},
            ]
        }
    )
    counts = np.random.default_rng(0).integers(0, 50, schema.shape)
    out = directory / "release"
    Identity(1.0).release(Histogram(schema, counts), random_state=1).save(out)
    return out


def timed(argv: list[str], repeat: int, pycache: str) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds) of running ``argv`` ``repeat`` times, after one
    untimed run that fills the bytecode cache ``pycache``."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPYCACHEPREFIX": pycache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    walls, cpus = [], []
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-5:]
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {tail}")
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return min(walls), min(cpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        rel = str(make_release(Path(tmp)))
        where = "age=18..64, sex=F, income=50000..149999"
        cases = [
            ("python -c pass", [py, "-c", "pass"]),
            ("import numpy", [py, "-c", "import numpy"]),
            ("import numpy, pyarrow", [py, "-c", "import numpy, pyarrow"]),
            ("dpcube query", [py, "-m", "dpcube", "query", rel, "--where", where]),
            ("dpcube query --json", [py, "-m", "dpcube", "query", rel, "--where", where, "--json"]),
            (
                "dpcube query --group-by sex,state",
                [py, "-m", "dpcube", "query", rel, "--where", where, "--group-by", "sex,state"],
            ),
        ]
        results = [(name, *timed(cmd, args.repeat, str(Path(tmp) / "pyc"))) for name, cmd in cases]
    base_wall, base_cpu = results[0][1], results[0][2]
    print(f"best of {args.repeat}; CPU = user + system seconds of the child process")
    print(f"{'command':<36}{'wall s':>9}{'CPU s':>9}{'CPU / python -c pass':>22}")
    for name, wall, cpu in results:
        print(f"{name:<36}{wall:>9.3f}{cpu:>9.3f}{cpu / max(base_cpu, 1e-9):>22.1f}")
    del base_wall
    return 0


if __name__ == "__main__":
    sys.exit(main())
