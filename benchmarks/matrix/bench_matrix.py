"""Benchmarks of the matrix mechanism (not tests): our code against a baseline in the same run.

1. LSA candidate evaluation: our exact rank-2 Woodbury + box-sum evaluation (Li & Miklau 2011, App.
   D.2, corrected) of every candidate split of a pass, against the naive evaluation (one matrix
   inversion per candidate).
2. LSA run times: AllRange(512) (Example 4.1); AllRange(1024), (32,32) and (16,8,8) with ``--full``;
   workload separation vs full LSA on the Fig 3(c) workload, generalization vs full LSA on a
   skew-sampled 1-D workload.
3. Least-squares inference on a 256 x 256 grid with the Kronecker strategy H⊗H: our per-axis solve
   against scipy's LSQR on the explicit sparse strategy matrix.

Run: ``.venv/bin/python benchmarks/matrix/bench_matrix.py [--full]`` (pin BLAS to one thread with
``OPENBLAS_NUM_THREADS=1`` on a shared machine).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse.linalg as spla

from dpcube.linalg import least_squares
from dpcube.mechanisms.matrix import lsa as lsa_module
from dpcube.mechanisms.matrix.bound import svdb
from dpcube.mechanisms.matrix.scaling import generalized_lsa, separated_lsa
from dpcube.mechanisms.matrix.strategies import hierarchical, kron
from dpcube.workloads import (
    allrange,
    allrange_gram_1d,
    marginal_ranges,
    random_ranges,
)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def candidate_evaluation(n: int, naive_sample: int) -> None:
    g = allrange_gram_1d(n)
    x = np.eye(n) + 1.0
    whole = np.array([[[0, n - 1]]])
    state = lsa_module._state(g, lsa_module.spd_inverse(x), whole)
    pending, level = lsa_module._split(state, {0: (0, n // 2)}, (n,))
    state = pending.apply(state, level)
    (ids, axes, cuts, ours), t_ours = timed(lambda: lsa_module._evaluate(state, (n,)))
    pick = np.linspace(0, len(ids) - 1, naive_sample).astype(int)

    def naive() -> list[float]:
        out = []
        for i in pick:
            split = lsa_module._apply(level, {int(ids[i]): (int(axes[i]), int(cuts[i]))})
            xi = np.linalg.inv(np.eye(n) + lsa_module.level_gram(split, (n,)))
            out.append(float(np.sum(g * xi)))
        return out

    values, t_naive = timed(naive)
    np.testing.assert_allclose(values, ours[pick], rtol=1e-8)
    per_naive = t_naive / len(pick)
    per_ours = t_ours / len(ids)
    print(
        f"candidate evaluation AllRange({n}), {len(ids)} candidates: ours {t_ours:.3f} s "
        f"({per_ours * 1e6:.1f} us each), naive inversion {per_naive * 1e3:.1f} ms each "
        f"(sampled {len(pick)}); ratio naive/ours per candidate = {per_naive / per_ours:.0f}x"
    )


def lsa_runs(full: bool) -> None:
    sizes: list[tuple[int, ...]] = [(256,), (512,)] + (
        [(1024,), (32, 32), (16, 8, 8)] if full else []
    )
    for dims in sizes:
        w = allrange(dims)
        r, seconds = timed(lambda w=w: lsa_module.lsa(w.gram.dense(), w.dims))
        print(
            f"LSA AllRange({','.join(map(str, dims))}): {seconds:.1f} s, {r.levels_count} levels, "
            f"{r.rows_count} rows, {r.distinct_count} distinct, error/svdb {r.error / svdb(w.gram):.4f}"
        )


def separation(sides: list[int], d_full: int) -> None:
    for d in sides:
        w = marginal_ranges((d, d))
        parts = [(0, allrange_gram_1d(d)), (1, allrange_gram_1d(d))]
        _, t_sep = timed(lambda parts=parts, d=d: separated_lsa(parts, (d, d)))
        line = f"separation {d}x{d}: separated {t_sep:.2f} s"
        if d <= d_full:
            full, t_full = timed(lambda w=w: lsa_module.lsa(w.gram.dense(), w.dims))
            line += f", full LSA {t_full:.2f} s ({full.levels_count} levels); ratio {t_full / t_sep:.0f}x"
        print(line)


def generalization(n_values: list[int], n_full: int) -> None:
    for n in n_values:
        w = random_ranges(min(2000, n * (n + 1) // 10), (n,), seed=1, bias="extremes")
        g = w.gram.dense()
        _, t_gen = timed(lambda g=g, n=n: generalized_lsa(g, n))
        line = f"generalization n={n}: generalized {t_gen:.2f} s"
        if n <= n_full:
            _, t_full = timed(lambda g=g, n=n: lsa_module.lsa(g, (n,)))
            line += f", full LSA {t_full:.2f} s; ratio {t_full / t_gen:.1f}x"
        print(line)


def inference_256() -> None:
    strategy = kron([hierarchical(256), hierarchical(256)]).operator
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, size=256 * 256).astype(float)
    y = strategy.matvec(x) + rng.normal(scale=3.0, size=strategy.rows)
    ours, t_ours = timed(lambda: least_squares(strategy, y))
    explicit, t_build = timed(strategy.sparse)
    base, t_base = timed(lambda: spla.lsqr(explicit, y, atol=1e-12, btol=1e-12, iter_lim=20_000)[0])
    diff = float(np.max(np.abs(ours - base)))
    print(
        f"least squares 256x256 with H(256)⊗H(256) ({strategy.rows} rows): Kronecker solve {t_ours:.3f} s, "
        f"scipy LSQR on the explicit matrix {t_base:.2f} s (+{t_build:.2f} s to build it); "
        f"ratio {t_base / t_ours:.0f}x; max |difference| {diff:.2e}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--full",
        action="store_true",
        help="add AllRange(1024), (32,32), (16,8,8), larger scaling runs",
    )
    args = parser.parse_args()
    candidate_evaluation(256, 20)
    inference_256()
    lsa_runs(args.full)
    separation([16, 32] if args.full else [8, 32], d_full=32 if args.full else 8)
    generalization([256, 1024], n_full=1024 if args.full else 256)


if __name__ == "__main__":
    main()
