"""Time dpcube's exact samplers against numpy's float samplers on the same sizes.

numpy's ``Generator.laplace`` / ``Generator.normal`` are the baseline only: they are not safe for
release (Mironov 2012) and dpcube never calls them. Each row prints the best of ``--repeat`` runs
(CPU time of this process, so that other load on the machine disturbs it less) and the ratio.

    .venv/bin/python benchmarks/foundation/bench_samplers.py
    .venv/bin/python benchmarks/foundation/bench_samplers.py --before HEAD   # also time a git revision

``--before REV`` loads ``src/dpcube/privacy/{random,samplers}.py`` as they are at git revision REV
(``git show``, read-only) and times them too, for before/after figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from dpcube.privacy import random as random_now
from dpcube.privacy import samplers as samplers_now

REPO = Path(__file__).resolve().parents[2]


def best(f: Callable[[], object], repeat: int) -> float:
    """Smallest CPU time of ``repeat`` calls of ``f``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        f()
        times.append(time.process_time() - start)
    return min(times)


def load_revision(rev: str) -> tuple[ModuleType, ModuleType]:
    """``random`` and ``samplers`` modules as they are at git revision ``rev``."""
    tmp = Path(tempfile.mkdtemp(prefix="dpcube-before-"))
    modules = []
    for name in ("random", "samplers"):
        text = subprocess.run(
            ["git", "show", f"{rev}:src/dpcube/privacy/{name}.py"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        text = text.replace("from dpcube.privacy.random import", "from dpcube_before_random import")
        path = tmp / f"dpcube_before_{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"dpcube_before_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules.append(module)
    return modules[0], modules[1]


def cases(
    samplers: ModuleType, random: ModuleType, n: int
) -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    """(label, our sampler, numpy baseline) with the same number of draws."""
    source = random.SystemRandomSource()
    rng = np.random.default_rng()
    values = np.zeros(n)
    varied = np.linspace(1.0, 64.0, n)
    return [
        (
            "discrete_laplace scale 1",
            lambda: samplers.discrete_laplace(source, 1, 1, size=n),
            lambda: rng.laplace(0.0, 1.0, n),
        ),
        (
            "discrete_laplace scale 10/3",
            lambda: samplers.discrete_laplace(source, 3495254, 2**20, size=n),
            lambda: rng.laplace(0.0, 10 / 3, n),
        ),
        (
            "discrete_laplace scale 2^24",
            lambda: samplers.discrete_laplace(source, 2**24, 1, size=n),
            lambda: rng.laplace(0.0, 2.0**24, n),
        ),
        (
            "snapped_laplace, one scale",
            lambda: samplers.snapped_laplace(values, 3.7, epsilon=1.0, support=1, source=source),
            lambda: values + rng.laplace(0.0, 3.7, n),
        ),
        (
            "snapped_laplace, a scale per value",
            lambda: samplers.snapped_laplace(values, varied, epsilon=1.0, support=1, source=source),
            lambda: values + rng.laplace(0.0, varied),
        ),
        (
            "snapped_gaussian sigma 5.4, support 20",
            lambda: samplers.snapped_gaussian(
                values, 5.4, l2_sensitivity=1.0, support=20, source=source
            ),
            lambda: values + rng.normal(0.0, 5.4, n),
        ),
        (
            "discrete_gaussian sigma 10",
            lambda: samplers.discrete_gaussian(source, 100, 1, size=n),
            lambda: rng.normal(0.0, 10.0, n),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2**22, help="draws per call (default 2^22)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--before", metavar="REV", help="also time the samplers of git revision REV"
    )
    args = parser.parse_args(argv)
    n = args.size
    before = None
    if args.before:
        random_before, samplers_before = load_revision(args.before)
        before = cases(samplers_before, random_before, n)
    print(f"{n:,} draws per call; best of {args.repeat}; ns per draw")
    header = f"{'sampler':36s} {'dpcube':>8s} {'numpy':>8s} {'ratio':>6s}"
    if before:
        header += f" {'before':>8s} {'speed-up':>8s}"
    print(header)
    for i, (label, ours, baseline) in enumerate(cases(samplers_now, random_now, n)):
        t_ours = best(ours, args.repeat) / n * 1e9
        t_base = best(baseline, args.repeat) / n * 1e9
        line = f"{label:36s} {t_ours:8.1f} {t_base:8.1f} {t_ours / t_base:6.1f}"
        if before:
            t_before = best(before[i][1], args.repeat) / n * 1e9
            line += f" {t_before:8.1f} {t_before / t_ours:8.1f}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
