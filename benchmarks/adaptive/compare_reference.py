"""Mean squared error of dpcube's AHP and MWEM against reference runs of the published plans.

ektelo itself (ektelo/ektelo) cannot run here: it is not installable from the project's package
index and its AHP clustering is a compiled extension. The reference below is therefore a plain
numpy re-implementation of the plans as ektelo and DPBench's dpcomp_core run them (read, not
copied): float Laplace noise from numpy, the exponential mechanism by float weights
``exp(eps (score - max) / 2)``, AHP with ``ratio=0.85, eta=0.35`` and its greedy clustering by
the paper's error rule, MWEM with the total given as public (ektelo's ``data_scale``),
``ratio=0.5`` between selection and measurement, measured queries excluded from selection and
50 multiplicative-weights passes over all measurements after each round. dpcube runs with the
same parameters, its exact samplers and its own code.

Error: the mean over trials of the mean squared error of the workload's answers (the workload
MWEM selects from; AHP ignores it), both on the same data, the same epsilon and the same
workload; the ratio dpcube / reference with the standard error of each mean.

Usage (from the repository root)::

    PYTHONPATH=src python benchmarks/adaptive/compare_reference.py [--data-dir ../shared/data]
        [--trials 10] [--epsilons 0.1,1] [--queries 1000]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from dpcube import Histogram, Schema
from dpcube.mechanisms.adaptive import AHP, MWEM
from dpcube.mechanisms.adaptive.queries import workload_boxes
from dpcube.workloads import Workload, random_ranges

FloatArray = NDArray[np.float64]

DATASETS = ("HEPTH.n4096", "INCOME.n4096", "NETTRACE.n4096", "SEARCHLOGS.n4096")


# -- reference AHP (Zhang et al. SDM 2014 as DPBench runs it) ---------------------------------
def _err(p: FloatArray, pp: FloatArray, i: int, j: int, eps: float) -> float:
    length = j - i + 1
    s = p[j + 1] - p[i]
    return (pp[j + 1] - pp[i]) - s * s / length + 2.0 / (length * eps**2)


def _err_star(x: FloatArray, p: FloatArray, j: int, eps: float) -> float:
    n = len(x)
    ls = np.arange(j, n)
    length = ls - j + 1.0
    e1 = (x[j] - (p[ls + 1] - p[j]) / length) ** 2
    e2 = 2.0 / (length**2 * eps**2)
    bound = 2.0 / ((n - j + 1) ** 2 * eps**2)
    stop = np.flatnonzero((e1[1:] - e1[:-1]) >= (e2[:-1] - bound))
    end = 1 + int(stop[0]) if stop.size else len(ls)
    return float(np.min(e1[:end] + e2[:end]))


def reference_ahp(
    x: FloatArray, eps: float, rng: np.random.Generator, ratio: float = 0.85, eta: float = 0.35
) -> FloatArray:
    eps1, eps2 = eps * ratio, eps * (1 - ratio)
    n = len(x)
    noisy = x + rng.laplace(0, 1 / eps1, n)
    noisy = np.where(noisy <= eta * math.log(n) / eps1, 0.0, noisy)
    order = np.argsort(noisy, kind="stable")
    v = noisy[order]
    p = np.concatenate(([0.0], np.cumsum(v)))
    pp = np.concatenate(([0.0], np.cumsum(v * v)))
    out = np.empty(n)
    i = 0
    cuts = []
    for j in range(1, n):
        if _err(p, pp, i, j, eps2) >= _err(p, pp, i, j - 1, eps2) + _err_star(v, p, j, eps2):
            cuts.append((i, j))
            i = j
    cuts.append((i, n))
    for a, b in cuts:
        cells = order[a:b]
        out[cells] = (x[cells].sum() + rng.laplace(0, 1 / eps2)) / (b - a)
    return out


# -- reference MWEM (Hardt et al. NIPS 2012 as ektelo runs it) --------------------------------
def reference_mwem(
    x: FloatArray,
    w: FloatArray,
    eps: float,
    rng: np.random.Generator,
    rounds: int = 10,
    ratio: float = 0.5,
    updates: int = 50,
) -> FloatArray:
    n = len(x)
    total = float(x.sum())
    est = np.full(n, total / n)
    truth = w @ x
    measured: list[int] = []
    answers: list[float] = []
    eps_round = eps / rounds
    for _ in range(rounds):
        scores = np.abs(truth - w @ est)
        scores[measured] = 0.0
        prob = np.exp(eps_round * ratio * (scores - scores.max()) / 2.0)
        pick = int(rng.choice(len(prob), p=prob / prob.sum()))
        measured.append(pick)
        answers.append(truth[pick] + rng.laplace(0, 1 / (eps_round * (1 - ratio))))
        for _ in range(updates):
            for q, a in zip(measured, answers, strict=True):
                row = w[q]
                est = est * np.exp(row * (a - row @ est) / (2.0 * total))
                est *= total / est.sum()
    return est


def mse(estimate: FloatArray, w: FloatArray, truth: FloatArray) -> float:
    return float(np.mean((w @ estimate - truth) ** 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default="../shared/data")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--epsilons", default="0.1,1")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--mechanisms", default="ahp,mwem")
    args = ap.parse_args()
    n = 4096
    schema = Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, n - 1], "width": 1}]}
    )
    workload: Workload = random_ranges(args.queries, (n,), seed=1)
    boxes = workload_boxes(workload)
    w = np.zeros((len(boxes), n))
    for r, (lo, hi) in enumerate(boxes[:, 0]):
        w[r, lo : hi + 1] = 1.0
    data: dict[str, FloatArray] = {}
    folder = Path(args.data_dir) / "dpbench" / "1D"
    for name in DATASETS:
        path = folder / f"{name}.npy"
        if path.is_file():
            data[name] = np.load(path).astype(np.float64)
    gen = np.random.default_rng(7)
    spikes = np.zeros(n)
    spikes[gen.choice(n, 40, replace=False)] = gen.integers(100, 2000, 40)
    data["generated-spikes"] = spikes
    smooth = np.bincount(
        np.clip(gen.normal(1500, 300, 50_000).astype(int), 0, n - 1), minlength=n
    ) + np.bincount(np.clip(gen.normal(3000, 80, 20_000).astype(int), 0, n - 1), minlength=n)
    data["generated-mixture"] = smooth.astype(np.float64)
    print("| data | N | epsilon | mechanism | dpcube MSE | reference MSE | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name, x in data.items():
        truth = w @ x
        hist = Histogram(schema, x.astype(np.int64))
        for eps in (float(e) for e in args.epsilons.split(",")):
            for mech in args.mechanisms.split(","):
                ours, ref = [], []
                t0 = time.time()
                for trial in range(args.trials):
                    rng = np.random.default_rng(1000 + trial)
                    if mech == "ahp":
                        m = AHP(eps)
                        theirs = reference_ahp(x, eps, rng)
                    else:
                        m = MWEM(eps, workload=workload, total=int(x.sum()))
                        theirs = reference_mwem(x, w, eps, rng)
                    release = m.release(hist, random_state=2000 + trial, account=False)
                    ours.append(mse(np.asarray(release.counts, dtype=np.float64).ravel(), w, truth))
                    ref.append(mse(theirs, w, truth))
                a, b = np.mean(ours), np.mean(ref)
                sa = np.std(ours, ddof=1) / math.sqrt(len(ours))
                sb = np.std(ref, ddof=1) / math.sqrt(len(ref))
                print(
                    f"| {name} | {int(x.sum()):,} | {eps:g} | {mech} | {a:.4g} ± {sa:.2g} | "
                    f"{b:.4g} ± {sb:.2g} | {a / b:.3f} |",
                    flush=True,
                )
                _ = t0


if __name__ == "__main__":
    main()
