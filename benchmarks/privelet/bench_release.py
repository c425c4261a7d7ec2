"""Privelet release time versus the floor (drawing m Laplace variates) and the Identity mechanism.

For m = 2^20 ... 2^26 cells (4 attributes as in Sec. VII-C: 2 ordinal + 2 nominal of size
round(m^(1/4)), nominal with 3 levels), one run times, with OS-entropy noise as in production:

- ``floor``: ``snapped_laplace`` on m zeros (the cost of noising every cell, real-valued);
- ``identity``: ``Identity(eps, neighbour="replace").release`` (integer discrete Laplace per cell);
- ``privelet``: ``Privelet(eps).release`` (S_A empty, the slowest setting), and its parts:
  forward HN transform, noise on the m' >= m coefficients, inverse transform.

Then the whole pipeline from a Parquet file (``dpcube.histogram`` + release) versus n.

Usage: .venv/bin/python benchmarks/privelet/bench_release.py [--log2m 20,22,24] [--n 1,3,5] [--repeat 3]

Times are CPU seconds of this process (``time.process_time``; all the work here is one thread),
best of ``--repeat`` runs: the development machine is shared, and CPU time is what the release
would take on an idle core. The wall time of one more Privelet release is printed beside it.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

from dpcube.histogram import Histogram
from dpcube.mechanisms.identity import Identity
from dpcube.mechanisms.privelet.mechanism import Privelet
from dpcube.mechanisms.privelet.transforms import hn_forward_exact, hn_inverse
from dpcube.privacy.random import SystemRandomSource
from dpcube.privacy.samplers import snapped_laplace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # experiments/ beside src/
from experiments.privelet import timing, timing_schema


def measure(log2m: int, eps: float, repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` seconds of each step for one domain size (fresh OS-entropy noise)."""
    runs = [measure_once(log2m, eps) for _ in range(repeat)]
    return {key: min(r[key] for r in runs) for key in runs[0]}


def measure_once(log2m: int, eps: float) -> dict[str, float]:
    """Seconds of each step for one domain size, once."""
    schema = timing_schema(2**log2m)
    hist = Histogram(schema, np.random.default_rng(log2m).poisson(0.3, size=schema.shape))
    mech = Privelet(eps)
    plan = mech.plan(schema)
    lam = plan.noise_scale(eps)
    out: dict[str, float] = {"m": schema.size, "coefficients": plan.coefficients}
    clock = time.process_time
    start = clock()
    snapped_laplace(
        np.zeros(schema.size), 2 / eps, epsilon=eps, support=2, source=SystemRandomSource()
    )
    out["floor"] = clock() - start
    start = clock()
    Identity(eps, neighbour="replace").release(hist, account=False)  # timing only
    out["identity"] = clock() - start
    start = clock()
    mech.release(hist, account=False)
    out["privelet"] = clock() - start
    start = clock()
    coeff, common = hn_forward_exact(hist.counts, plan.axes)  # the release's exact J = D W c
    out["forward"] = clock() - start
    start = clock()
    source = SystemRandomSource()
    scale = lam * common
    noisy, _ = snapped_laplace(coeff, scale, epsilon=eps, support=2 * plan.support, source=source)
    out["noise"] = clock() - start
    del coeff
    start = clock()
    noisy /= common
    hn_inverse(noisy, plan.axes, weighted=True)
    out["inverse"] = clock() - start
    start_wall = time.perf_counter()
    mech.release(hist, account=False)
    out["privelet_wall"] = time.perf_counter() - start_wall
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log2m", default="20,22,24")
    parser.add_argument("--n", default="1,3,5", help="millions of rows for the Parquet pipeline")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3, help="report the best of this many runs")
    args = parser.parse_args()
    eps = args.epsilon
    print(f"# {platform.processor() or platform.machine()}, numpy {np.__version__}")
    header = (
        f"{'m':>11} {'coeffs':>11} {'floor s':>8} {'identity s':>10} {'privelet s':>10} "
        f"{'fwd s':>6} {'noise s':>7} {'inv s':>6} {'/floor':>7} {'/identity':>9} {'us/cell':>7} "
        f"{'wall s':>7}"
    )
    print(header)
    for log2m in [int(x) for x in args.log2m.split(",") if x]:
        r = measure(log2m, eps, args.repeat)
        m = int(r["m"])
        t_floor, t_identity, t_privelet = r["floor"], r["identity"], r["privelet"]
        t_fwd, t_noise, t_inv = r["forward"], r["noise"], r["inverse"]
        print(
            f"{m:>11,} {int(r['coefficients']):>11,} {t_floor:>8.2f} {t_identity:>10.2f} {t_privelet:>10.2f} "
            f"{t_fwd:>6.2f} {t_noise:>7.2f} {t_inv:>6.2f} {t_privelet / t_floor:>7.2f} "
            f"{t_privelet / t_identity:>9.2f} {1e6 * t_privelet / m:>7.3f} {r['privelet_wall']:>7.2f}"
        )
    ns = [float(x) for x in args.n.split(",") if x]
    if ns:
        print("\n# whole pipeline from Parquet (m = 2^24): dpcube.histogram + release")
        print(
            f"{'n':>11} {'method':>9} {'count s':>8} {'release s':>9} {'total s':>8} {'cpu s':>7}"
        )
        rows = timing([], [int(x * 1e6) for x in ns], 2**24, int(ns[-1] * 1e6), seed=0)
        for r in rows:
            total = r["count_seconds"] + r["release_seconds"]
            cpu = r["count_cpu_seconds"] + r["release_cpu_seconds"]
            print(
                f"{r['n']:>11,} {r['method']:>9} {r['count_seconds']:>8.2f} {r['release_seconds']:>9.2f} {total:>8.2f} {cpu:>7.2f}"
            )


if __name__ == "__main__":
    main()
