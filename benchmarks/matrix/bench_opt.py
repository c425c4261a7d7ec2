"""Benchmark of the optimised strategies (not a test).

1. OPT_0 objective + gradient on AllRange(n) with p = n/16: ours (one p x n x n product per
   evaluation, :func:`dpcube.mechanisms.matrix.optimize.pidentity_objective`) against the
   previous formulation (forms ``X⁻¹`` by Woodbury, then three p x n x n products), same inputs,
   CPU seconds per evaluation and the ratio.
2. The ``opt`` strategy on the issue's reference table: our ``‖A‖₁² tr(G (AᵀA)⁻¹)`` times
   ``2/ε²`` (ε = 1, the table's scale) against HDMM's published figure, the ratio, the geometric
   mean, and the CPU seconds of the whole ``opt`` construction (optimisation and the candidates'
   errors; ``time.process_time``).

3. ``--full-check``: on AllRange(64), a full non-negative strategy ``A = B diag(1ᵀB)⁻¹`` (every
   column of L1 norm 1, B of 80 or 128 rows, L-BFGS-B from random starts) against OPT_0's
   p-Identity optimum: evidence on whether the p-Identity template leaves error on the table.

4. The grid refinement's objective on AllRange(64)² at OPT_⊗'s product (p = 528): the sparse
   evaluation (:func:`~dpcube.mechanisms.matrix.optimize.sparse_pidentity_objective`, on Θ's
   support) against the dense-Θ one (:func:`~dpcube.mechanisms.matrix.optimize.kron_pidentity_objective`),
   CPU seconds per evaluation and the ratio.

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/matrix/bench_opt.py [--quick]
[--full-check] [--strategy opt-grid]`` (``--quick`` leaves out the 1,024-cell rows; the default
``opt`` includes the grid refinement on AllRange(64)², ``--strategy opt-grid`` runs it longer).
The load average is printed at the start and the end: the CPU figures are only comparable on a
quiet machine.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import scipy.optimize

from dpcube.mechanisms.matrix.mechanism import make_strategy
from dpcube.mechanisms.matrix.optimize import (
    SparseSupport,
    kron_pidentity_objective,
    kron_pidentity_theta,
    opt_kron,
    pidentity_objective,
    sparse_pidentity_objective,
)
from dpcube.workloads import allrange_gram_1d, parse_workload

#: The issue's reference table: HDMM's error (pure ε-DP, Laplace, ε = 1).
HDMM = {
    "allrange:64": 91_520,
    "allrange:256": 2_155_331,
    "allrange:1024": 64_919_983,
    "prefix:64": 1_844,
    "prefix:256": 13_858,
    "prefix:1024": 95_244,
    "allrange:64x64": 2.96e9,
    "marginals:2:8x8x8x8": 23_256,
}
LARGE = ("allrange:1024", "prefix:1024")


def baseline_objective(
    theta_flat: np.ndarray, gram: np.ndarray, p: int
) -> tuple[float, np.ndarray]:
    """The previous OPT_0 objective: ``Y = X⁻¹`` formed by Woodbury, three p x n x n products."""
    n = gram.shape[0]
    theta = theta_flat.reshape(p, n)
    c = 1.0 + theta.sum(axis=0)
    r = np.eye(p) + theta @ theta.T
    ty = np.linalg.solve(r, theta)
    y = np.eye(n) - theta.T @ ty
    gc = gram * np.outer(c, c)
    f = float(np.sum(gc * y))
    grad = -2.0 * (ty @ gc) @ y
    grad += (2.0 * ((gram * y) @ c))[None, :]
    return f, grad.ravel()


def cpu_per_call(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    start = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - start) / repeat


def objective_speed(n: int, repeat: int) -> None:
    p = n // 16
    gram = allrange_gram_1d(n)
    theta = np.random.default_rng(0).uniform(0.0, 1.0, size=p * n)
    f_ours, g_ours = pidentity_objective(theta, gram, p)
    f_base, g_base = baseline_objective(theta, gram, p)
    agree = abs(f_ours - f_base) / f_base + np.abs(g_ours - g_base).max() / np.abs(g_base).max()
    ours = cpu_per_call(lambda: pidentity_objective(theta, gram, p), repeat)
    base = cpu_per_call(lambda: baseline_objective(theta, gram, p), repeat)
    print(
        f"OPT_0 objective+gradient, AllRange({n}), p = {p}: ours {1e3 * ours:.1f} ms, "
        f"previous {1e3 * base:.1f} ms, speed-up {base / ours:.2f}x (relative difference {agree:.1e})"
    )


def grid_objective_speed(d: int, repeat: int) -> None:
    g = allrange_gram_1d(d)
    grams = [g / np.trace(g)] * 2
    theta = kron_pidentity_theta(opt_kron([[g, g]]).thetas or [])
    p = theta.shape[0]
    support = SparseSupport.of(theta)
    values = theta[support.rows, support.cols]
    diag = np.kron(np.diag(grams[0]), np.diag(grams[1]))
    f_sparse, _ = sparse_pidentity_objective(values, support, grams, diag)
    f_dense, _ = kron_pidentity_objective(theta.ravel(), grams, p)
    sparse = cpu_per_call(lambda: sparse_pidentity_objective(values, support, grams, diag), repeat)
    dense = cpu_per_call(lambda: kron_pidentity_objective(theta.ravel(), grams, p), repeat)
    print(
        f"grid refinement objective+gradient, AllRange({d})^2, p = {p}, {values.size:,} of "
        f"{theta.size:,} entries non-zero: sparse {sparse:.3f} CPU s, dense-Θ {dense:.3f} CPU s, "
        f"speed-up {dense / sparse:.2f}x (relative difference {abs(f_sparse - f_dense) / f_dense:.1e})"
    )


def table(specs: list[str], strategy: str = "opt") -> None:
    print(
        f"{'workload':22s} {'opt':>14s} {'HDMM':>14s} {'opt/HDMM':>9s} {'winner':>10s} {'CPU s':>7s}"
    )
    ratios = []
    for spec in specs:
        w = parse_workload(spec)
        start = time.process_time()
        s = make_strategy(strategy, w.dims, w)
        cpu = time.process_time() - start
        err = 2.0 * s.info["opt_l1_error_unit"]
        ratio = err / HDMM[spec]
        ratios.append(ratio)
        print(
            f"{spec:22s} {err:14,.0f} {HDMM[spec]:14,.0f} {ratio:9.3f} "
            f"{s.info['opt_winner']:>10s} {cpu:7.2f}",
            flush=True,
        )
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"geometric mean of {strategy}/HDMM over {len(ratios)} rows: {geo:.4f} (goal 0.90)")


def full_objective(b_flat: np.ndarray, gram: np.ndarray, m: int) -> tuple[float, np.ndarray]:
    """``tr(D G D (BᵀB)⁻¹)`` with ``D = diag(1ᵀB)`` and its gradient (as OPT_0, with Θ → B)."""
    n = gram.shape[0]
    b = b_flat.reshape(m, n)
    s = b.sum(axis=0)
    z = np.linalg.inv(b.T @ b)
    c = gram * np.outer(s, s)
    grad = -2.0 * (b @ (z @ c @ z)) + (2.0 * np.sum(gram * (s[:, None] * z), axis=0))[None, :]
    return float(np.sum(c * z)), grad.ravel()


def full_check(n: int = 64) -> None:
    gram = allrange_gram_1d(n)
    s = make_strategy("opt", (n,), parse_workload(f"allrange:{n}"))
    print(f"AllRange({n}): OPT_0 {2.0 * s.info['opt_l1_error_unit']:,.0f}")
    for m in (n + n // 4, 2 * n):
        for seed in range(2):
            x0 = np.random.default_rng(seed).uniform(0.0, 1.0, size=m * n)
            res = scipy.optimize.minimize(
                full_objective,
                x0,
                args=(gram, m),
                jac=True,
                method="L-BFGS-B",
                bounds=[(0.0, None)] * (m * n),
                options={"maxiter": 5000, "maxfun": 20000, "ftol": 1e-13, "gtol": 1e-10},
            )
            print(f"  full non-negative strategy, {m} rows, seed {seed}: {2.0 * res.fun:,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="leave out the 1,024-cell rows")
    parser.add_argument("--full-check", action="store_true", help="full parameterisation check")
    parser.add_argument(
        "--strategy",
        choices=["opt", "opt-grid"],
        default="opt",
        help="opt (the default strategy, with OPT_0 on the whole grid for 2-axis products) or "
        "opt-grid (that refinement run longer)",
    )
    args = parser.parse_args()
    if args.full_check:
        full_check()
        return
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    objective_speed(256 if args.quick else 1024, 5 if args.quick else 20)
    grid_objective_speed(64, 5)
    table([s for s in HDMM if not (args.quick and s in LARGE)], args.strategy)
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
