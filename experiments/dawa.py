"""``python -m experiments.dawa``: DAWA's error against Identity and against ektelo's protocol.

DAWA (Li, Hay, Miklau, Wang, PVLDB 2014) as released by dpcube (``dawa``: the dyadic L1 partition
with its deviations' noise calibrated to the whole vector of them, then the optimised bucket
strategy) is compared, on the same inputs and at equal epsilon, with:

- ``identity``: dpcube's Identity (discrete Laplace on every cell);
- ``ektelo-protocol``: an independent re-implementation of ektelo's `Dawa` plan configured
  as ``Dawa(ratio=0.25, approx=True)`` (the paper's rho; every interval of length ``2^k``, not only the aligned ones,
  each deviation with its own Laplace noise of scale ``(2 - 1/m - 1/n) / epsilon_1``, the noisy
  cost clipped at ``1/epsilon_2``), with the same bucket strategy as dpcube and continuous
  Laplace noise from numpy (ektelo's GreedyH is not re-implemented: the strategy on the buckets
  is the same for both, so the comparison isolates the partition step);
- ``aligned-reference``: the same re-implementation restricted to the aligned dyadic intervals
  with dpcube's calibration (``Delta_1 / epsilon_1``): it should match ``dawa`` (a check of the
  product's code by an independent one).

Protocol (DPBench, Hay et al. SIGMOD 2016): each 1-D data set is resampled to ``scale`` records
(multinomial on its shape), released ``trials`` times, and the error is the mean squared error
per query of the workload (``prefix``: every prefix ``[0, i]``, DPBench's 1-D workload) averaged
over trials (± its standard error over the trials: the mechanism's noise and the resampling).
Generated shapes (``step``, ``spike``, ``uniform``) run beside the DPBench files
found in ``--data-dir``. Writes ``results.csv`` and ``summary.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import UsageError
from dpcube.histogram import Histogram
from dpcube.linalg.solve import GramSolver, least_squares
from dpcube.mechanisms.identity import Identity
from dpcube.mechanisms.matrix.dawa import (
    DAWA,
    bucket_strategy,
    deviation_sensitivity,
    reduced_gram,
)
from dpcube.release.base import Release
from dpcube.release.cells import CellRelease
from dpcube.schema import Schema
from dpcube.workloads import prefix_gram_1d

#: DPBench 1-D files run by default (a spread of shapes: sparse, skewed, smooth).
DEFAULT_FILES = (
    "ADULTFRANK.n4096",
    "HEPTH.n4096",
    "INCOME.n4096",
    "MEDCOST.n4096",
    "NETTRACE.n4096",
    "PATENT.n4096",
    "SEARCHLOGS.n4096",
)


def generated(name: str, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """A generated 1-D shape: ``step`` (8 flat pieces), ``spike`` (3 % of cells hold the mass),
    ``uniform``."""
    if name == "step":
        levels = rng.uniform(0, 1, size=8)
        return np.repeat(levels, -(-n // 8))[:n]
    if name == "spike":
        out = np.zeros(n)
        out[rng.choice(n, size=max(1, n // 32), replace=False)] = rng.uniform(0.5, 1, n // 32)
        return out
    if name == "uniform":
        return np.ones(n)
    raise UsageError(f"unknown generated shape {name!r}; use step, spike or uniform")


def resample(shape: NDArray[np.float64], scale: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """``scale`` records drawn from the distribution ``shape / sum(shape)`` (DPBench's scaling)."""
    p = np.clip(shape, 0, None).astype(np.float64)
    return rng.multinomial(scale, p / p.sum()).astype(np.int64)


# -- the ektelo protocol, re-implemented (experiment only: not a dpcube mechanism) --------------
def reference_partition(
    x: NDArray[np.int64],
    epsilon_1: float,
    epsilon_2: float,
    rng: np.random.Generator,
    *,
    aligned: bool,
) -> NDArray[np.int64]:
    """Bucket starts of the noisy L1 partition over intervals of length ``2^k``: all of them with
    ektelo's per-interval scale (``aligned=False``), or the aligned ones with dpcube's scale."""
    n = len(x)
    scores: dict[int, NDArray[np.float64]] = {}  # length -> score of the interval ending at j
    m = 2
    whole = deviation_sensitivity(n)
    while m <= n:
        windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), m)
        dev = np.abs(windows - windows.mean(axis=1, keepdims=True)).sum(axis=1)
        scale = whole / epsilon_1 if aligned else (2.0 - 1.0 / m - 1.0 / n) / epsilon_1
        noisy = dev + rng.laplace(0.0, scale, size=dev.shape)
        scores[m] = np.maximum(noisy, 0.0) + 1.0 / epsilon_2
        m *= 2
    best = np.zeros(n + 1)
    start = np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        best[j] = best[j - 1] + 1.0 / epsilon_2
        start[j] = j - 1
        m = 2
        while m <= j:
            if not aligned or j % m == 0:
                candidate = best[j - m] + scores[m][j - m]
                if candidate <= best[j]:
                    best[j], start[j] = candidate, j - m
            m *= 2
    starts = []
    j = n
    while j > 0:
        j = int(start[j])
        starts.append(j)
    return np.array(starts[::-1], dtype=np.int64)


def reference_release(
    x: NDArray[np.int64],
    gram: NDArray[np.float64],
    epsilon: float,
    rng: np.random.Generator,
    *,
    aligned: bool,
    share: float = 0.25,
) -> NDArray[np.float64]:
    """The re-implemented protocol's cell estimates (partition, then the bucket strategy)."""
    e1, e2 = share * epsilon, (1 - share) * epsilon
    starts = reference_partition(x, e1, e2, rng, aligned=aligned)
    sizes = np.diff(np.append(starts, len(x)))
    strategy = bucket_strategy("opt", len(starts), lambda: reduced_gram(gram, starts))
    op = strategy.operator
    counts = np.add.reduceat(x.astype(np.float64), starts)
    noisy = op.matvec(counts) + rng.laplace(0.0, op.l1_sensitivity() / e2, size=op.rows)
    buckets = least_squares(op, noisy, GramSolver.for_strategy(op))
    return np.asarray(np.repeat(buckets / sizes, sizes), dtype=np.float64)


def prefix_mse(estimate: NDArray[np.float64], truth: NDArray[np.int64]) -> float:
    """Mean squared error per query of the prefix workload."""
    return float(np.mean((np.cumsum(estimate) - np.cumsum(truth)) ** 2))


def methods_for(
    schema: Schema, gram: NDArray[np.float64], epsilon: float, buckets: list[int]
) -> dict[str, Callable[[NDArray[np.int64], int], NDArray[np.float64]]]:
    """The compared methods at ``epsilon``, each ``(data, seed) -> cell estimates``; DAWA's
    bucket counts are appended to ``buckets``."""
    dawa = DAWA(epsilon, workload=f"prefix:{schema.shape[0]}")
    ident = Identity(epsilon)

    def cells(release: Release) -> NDArray[np.float64]:
        assert isinstance(release, CellRelease)
        return np.asarray(release.counts, dtype=np.float64)

    def release_dawa(x: NDArray[np.int64], s: int) -> NDArray[np.float64]:
        r = dawa.release(Histogram(schema, x), random_state=s, account=False)
        buckets.append(int(r.metadata.noise["buckets"]))
        return cells(r)

    def release_identity(x: NDArray[np.int64], s: int) -> NDArray[np.float64]:
        return cells(ident.release(Histogram(schema, x), random_state=s, account=False))

    def ektelo(x: NDArray[np.int64], s: int) -> NDArray[np.float64]:
        return reference_release(x, gram, epsilon, np.random.default_rng(s), aligned=False)

    def aligned(x: NDArray[np.int64], s: int) -> NDArray[np.float64]:
        return reference_release(x, gram, epsilon, np.random.default_rng(s), aligned=True)

    return {
        "identity": release_identity,
        "dawa": release_dawa,
        "ektelo-protocol": ektelo,
        "aligned-reference": aligned,
    }


def run(
    inputs: dict[str, NDArray[np.float64]],
    scales: list[int],
    epsilons: list[float],
    trials: int,
    seed: int,
    out: Path,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng(seed)
    for name, shape in inputs.items():
        n = len(shape)
        schema = Schema.from_dict(
            {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, n - 1], "width": 1}]}
        )
        gram = prefix_gram_1d(n)
        for scale in scales:
            for epsilon in epsilons:
                errors: dict[str, list[float]] = {}
                buckets: list[int] = []
                started = time.perf_counter()
                methods = methods_for(schema, gram, epsilon, buckets)
                for _ in range(trials):
                    x = resample(shape, scale, rng)
                    s = int(rng.integers(2**32))
                    for method, release in methods.items():
                        errors.setdefault(method, []).append(prefix_mse(release(x, s), x))
                row: dict[str, Any] = {"data": name, "scale": scale, "epsilon": epsilon}
                for method, errs in errors.items():
                    row[method] = float(np.mean(errs))
                    row[f"{method}_se"] = float(np.std(errs, ddof=1) / math.sqrt(len(errs)))
                    if len(errs) < 2:
                        row[f"{method}_se"] = float("nan")
                row["dawa_buckets"] = float(np.mean(buckets))
                row["seconds"] = round(time.perf_counter() - started, 1)
                rows.append(row)
                write(rows, out)  # after every row: a long run interrupted keeps what it has
                print(
                    f"{name} scale={scale} eps={epsilon}: "
                    + ", ".join(f"{m}={row[m]:.4g}" for m in methods)
                    + f" buckets={row['dawa_buckets']:.0f} ({row['seconds']} s)",
                    flush=True,
                )
    write(rows, out)
    return rows


def write(rows: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if not rows:
        return
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "| data | scale | epsilon | identity | dawa | ektelo protocol | dawa / ektelo | "
        "aligned reference / dawa | dawa / identity | buckets |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d, e, i, a = (
            float(r[k]) for k in ("dawa", "ektelo-protocol", "identity", "aligned-reference")
        )
        di, de = float(r["dawa_se"]), float(r["ektelo-protocol_se"])
        lines.append(
            f"| {r['data']} | {r['scale']:,} | {r['epsilon']} | {i:.4g} | {d:.4g} ± {di:.2g} | "
            f"{e:.4g} ± {de:.2g} | "
            f"{d / e:.2f} | {a / d:.2f} | {d / i:.3f} | {float(r['dawa_buckets']):.0f} |"
        )
    ratios = np.array([float(r["dawa"]) / float(r["ektelo-protocol"]) for r in rows])
    vs_identity = np.array([float(r["dawa"]) / float(r["identity"]) for r in rows])
    check = np.array([float(r["aligned-reference"]) / float(r["dawa"]) for r in rows])
    lines += [
        "",
        f"geometric means over the {len(rows)} rows: dawa / ektelo protocol "
        f"{math.exp(np.mean(np.log(ratios))):.2f} (within 10 % on {int(np.sum(ratios <= 1.1))} "
        f"rows, better on {int(np.sum(ratios < 1))}); dawa / identity "
        f"{math.exp(np.mean(np.log(vs_identity))):.3f} (better on {int(np.sum(vs_identity < 1))}); "
        f"aligned reference / dawa {math.exp(np.mean(np.log(check))):.2f}",
    ]
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def box_answers(cells: NDArray[Any], boxes: NDArray[np.int64]) -> NDArray[np.float64]:
    """Answers of 2-D boxes ``(q, 2, 2)`` (inclusive bounds) from a grid of cells."""
    p = np.pad(np.asarray(cells, dtype=np.float64).cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    (r0, r1), (c0, c1) = boxes[:, 0].T, boxes[:, 1].T
    return np.asarray(
        p[r1 + 1, c1 + 1] - p[r0, c1 + 1] - p[r1 + 1, c0] + p[r0, c0], dtype=np.float64
    )


def run_2d(
    inputs: dict[str, NDArray[np.float64]],
    scales: list[int],
    epsilons: list[float],
    trials: int,
    seed: int,
    out: Path,
) -> list[dict[str, Any]]:
    """DAWA (along the Hilbert curve, no workload: the grid is above the dense Gram's limit, so
    the buckets are measured by the binary hierarchy) against Identity on 2-D grids, 2,000 random
    boxes (DPBench's 2-D workload); no ektelo reference (its sliding intervals over 65,536 cells
    are out of reach of a Python re-implementation)."""
    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng(seed)
    for name, shape in inputs.items():
        rows_, cols = shape.shape
        schema = Schema.from_dict(
            {
                "attributes": [
                    {"name": "a", "kind": "ordinal", "range": [0, rows_ - 1], "width": 1},
                    {"name": "b", "kind": "ordinal", "range": [0, cols - 1], "width": 1},
                ]
            }
        )
        ends = rng.integers(0, [rows_, cols], size=(2000, 2, 2))
        boxes = np.sort(np.stack([ends[:, 0], ends[:, 1]], axis=2), axis=2)
        for scale in scales:
            for epsilon in epsilons:
                errors: dict[str, list[float]] = {"identity": [], "dawa": []}
                for _ in range(trials):
                    x = resample(shape.ravel(), scale, rng).reshape(shape.shape)
                    s = int(rng.integers(2**32))
                    truth = box_answers(x, boxes)
                    for method, mech in (("identity", Identity(epsilon)), ("dawa", DAWA(epsilon))):
                        rel = mech.release(Histogram(schema, x), random_state=s, account=False)
                        assert isinstance(rel, CellRelease)
                        errors[method].append(
                            float(np.mean((box_answers(rel.counts, boxes) - truth) ** 2))
                        )
                row: dict[str, Any] = {"data": name, "scale": scale, "epsilon": epsilon}
                row.update({m: float(np.mean(e)) for m, e in errors.items()})
                rows.append(row)
                print(
                    f"2-D {name} scale={scale} eps={epsilon}: identity={row['identity']:.4g}, "
                    f"dawa={row['dawa']:.4g}",
                    flush=True,
                )
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        "| data | scale | epsilon | identity | dawa | dawa / identity |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['data']} | {r['scale']:,} | {r['epsilon']} | {r['identity']:.4g} | "
            f"{r['dawa']:.4g} | {r['dawa'] / r['identity']:.3f} |"
        )
    (out / "summary-2d.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.dawa", description=__doc__)
    p.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    p.add_argument("--files", default=",".join(DEFAULT_FILES), help="DPBench 1-D files (no .npy)")
    p.add_argument("--generated", default="step,spike,uniform")
    p.add_argument("--scales", default="1000,100000,10000000")
    p.add_argument("--epsilons", default="0.1,1")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument(
        "--files-2d",
        default="",
        help="DPBench 2-D files (no .npy) to run against Identity, e.g. checkin_256_256",
    )
    p.add_argument("--scales-2d", default="100000,10000000")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("experiments/docs/dawa"))
    args = p.parse_args(argv)
    if args.trials < 1:
        raise UsageError(f"--trials must be at least 1, got {args.trials}")
    rng = np.random.default_rng(args.seed)
    inputs: dict[str, NDArray[np.float64]] = {}
    folder = args.data_dir / "dpbench" / "1D"
    for name in [f for f in args.files.split(",") if f]:
        path = folder / f"{name}.npy"
        if path.is_file():
            inputs[name] = np.load(path).astype(np.float64).ravel()
        else:
            print(f"skipped {name}: {path} not found")
    for name in [g for g in args.generated.split(",") if g]:
        inputs[name] = generated(name, 4096, rng)
    inputs_2d: dict[str, NDArray[np.float64]] = {}
    for name in [f for f in args.files_2d.split(",") if f]:
        path = args.data_dir / "dpbench" / "2D" / f"{name}.npy"
        if path.is_file():
            inputs_2d[name] = np.load(path).astype(np.float64)
        else:
            print(f"skipped {name}: {path} not found")
    if inputs_2d:
        run_2d(
            inputs_2d,
            [int(s) for s in args.scales_2d.split(",")],
            [float(e) for e in args.epsilons.split(",")],
            args.trials,
            args.seed,
            args.out,
        )
        if not inputs:
            return 0
    run(
        inputs,
        [int(s) for s in args.scales.split(",")],
        [float(e) for e in args.epsilons.split(",")],
        args.trials,
        args.seed,
        args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
