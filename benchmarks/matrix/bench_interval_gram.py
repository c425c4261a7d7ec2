"""Benchmark of OPT_0's objective on a 1-D interval workload at DPBench's 4,096 cells (not a
test).

Per evaluation of the objective and gradient (p = n/16 = 256, the schedule's p): the previous
formulation (``R⁻¹Θ`` by a p x n solve, then the dense ``(M D) G``) against ours
(:func:`dpcube.mechanisms.matrix.optimize.pidentity_objective`: ``R⁻¹`` and one GEMM, and ``T``
on the intervals, :class:`dpcube.linalg.boxes.IntervalGram`), on DPBench's Prefix1D and its 2,000
random ranges (seed 9001). Same inputs; CPU seconds (``time.process_time``) per evaluation, the
ratio, and the relative difference of the objectives (rounding only).

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/matrix/bench_interval_gram.py [--n N]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from dpcube.linalg.boxes import IntervalGram, interval_gram
from dpcube.mechanisms.matrix.optimize import pidentity_objective

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # experiments/ beside src/
from experiments.leaderboard import dpbench_random_boxes, prefix_boxes


def previous_objective(theta_flat: np.ndarray, gram: np.ndarray, p: int) -> float:
    """The objective as computed before (a p x n solve and the dense product), gradient included."""
    n = gram.shape[0]
    theta = theta_flat.reshape(p, n)
    c = 1.0 + theta.sum(axis=0)
    m = np.linalg.solve(np.eye(p) + theta @ theta.T, theta)
    t = (m * c) @ gram
    diag = np.diag(gram)
    tc = t * c
    f = float(np.dot(diag, c * c) - np.sum(tc * theta))
    mcy = tc - (tc @ theta.T) @ m
    _ = -2.0 * mcy + (2.0 * (diag * c - np.sum(theta * t, axis=0)))[None, :]
    return f


def cpu_per_call(fn: object, repeats: int) -> float:
    start = time.process_time()
    for _ in range(repeats):
        fn()  # type: ignore[operator]
    return (time.process_time() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n, p = args.n, max(1, args.n // 16)
    theta = np.random.default_rng(0).uniform(size=p * n)
    print(f"n = {n}, p = {p}, CPU seconds per objective + gradient evaluation")
    print(
        "| workload | intervals | previous (solve, dense G) | ours (inverse, IntervalGram) | ratio | objective difference |"
    )
    print("|---|---|---|---|---|---|")
    for name, boxes in (
        ("prefix", prefix_boxes(n)),
        ("random-range", dpbench_random_boxes((n,), 2000)),
    ):
        intervals = boxes[:, 0, :]
        dense, implicit = interval_gram(intervals, n), IntervalGram(intervals, n)
        before = cpu_per_call(lambda d=dense: previous_objective(theta, d, p), args.repeats)
        ours = cpu_per_call(lambda g=implicit: pidentity_objective(theta, g, p), args.repeats)
        f_before = previous_objective(theta, dense, p)
        f_ours = pidentity_objective(theta, implicit, p)[0]
        print(
            f"| {name} | {len(intervals)} | {before:.3f} | {ours:.3f} | {before / ours:.2f}x "
            f"| {abs(f_ours - f_before) / f_before:.1e} |"
        )


if __name__ == "__main__":
    main()
