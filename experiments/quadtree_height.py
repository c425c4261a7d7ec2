"""``python -m experiments.quadtree_height``: the quadtree's default height against every fixed height.

HTF's height rule mapped to the quadtree (k = floor(h/2), h = floor(log2(N~ eps / 10)),
Shaham et al., SIGSPATIAL 2021, Eq. 10) gives errors far above the full-height tree ektelo and Cormode et al. use on the DPBench
grids. For each DPBench 2-D grid (256 x 256) and epsilon, this runs :class:`QuadTree` at every
fixed height 2..8 and reports the mean absolute error over random rectangles (the same rectangles
for every method, ``--reps`` seeds each), the best height in hindsight (the oracle), and each rule's
ratio to it: ``tuned`` (ceil(h/2) + 1, the default), ``spec`` (floor(h/2)) and ``full`` (8). h is
computed from the exact total here, as the rule would from the noisy one (eps_height = 1e-4 moves it
by about 1e4 points, which changes h only at a power-of-two boundary).

    python -m experiments.quadtree_height --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from dpcube.histogram import Histogram
from dpcube.mechanisms.spatial._common import spatial_case_schema, tree_height
from dpcube.mechanisms.spatial.release import LeafRelease
from dpcube.mechanisms.spatial.trees import QuadTree, quadtree_height
from dpcube.release.cells import box_sums, prefix_sums
from experiments.repetitions import format_mean_se, repetitions, standard_error

EPSILONS = (0.01, 0.1, 1.0)
RULES = ("tuned", "spec", "full")


def random_boxes(side: int, count: int, seed: int) -> np.ndarray:
    """``count`` random rectangles (uniform corners) as (q, 2, 2) inclusive index intervals."""
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.integers(0, side, size=(count, 2)), axis=1)
    cols = np.sort(rng.integers(0, side, size=(count, 2)), axis=1)
    return np.stack([rows, cols], axis=1)


def sweep(
    name: str, F: np.ndarray, epsilons: tuple[float, ...], reps: int, boxes: np.ndarray
) -> list[dict[str, Any]]:
    """One row per epsilon: MAE per fixed height, the oracle, and each rule's height and ratio."""
    side = F.shape[0]
    full = math.ceil(math.log2(side))
    hist = Histogram(spatial_case_schema(side, side), F)
    truth = box_sums(prefix_sums(F), boxes)
    rows = []
    for eps in epsilons:
        mae, mae_se = {}, {}
        for k in range(2, full + 1):
            errors = []
            for seed in range(reps):
                # an experiment: seeded (not for publication) and unaccounted
                release = QuadTree(eps, height=k).release(hist, random_state=seed, account=False)
                assert isinstance(release, LeafRelease)
                errors.append(np.abs(release.answer_boxes(boxes) - truth).mean())
            mae[k] = float(np.mean(errors))
            mae_se[k] = standard_error([float(e) for e in errors])
        best = min(mae, key=lambda k: mae[k])
        h = tree_height(float(F.sum()), eps)
        row: dict[str, Any] = {"dataset": name, "epsilon": eps, "N": int(F.sum()), "h": h}
        row.update({f"mae_{k}": v for k, v in mae.items()})
        row.update({f"mae_se_{k}": v for k, v in mae_se.items()})
        row["oracle_height"] = best
        for rule in RULES:
            k = full if rule == "full" else quadtree_height(h, side, side, rule)
            k = min(max(k, 2), full)
            row[f"{rule}_height"] = k
            row[f"{rule}_ratio"] = mae[k] / mae[best]
        rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Geometric mean and worst ratio to the oracle of each rule."""
    out = {}
    for rule in RULES:
        ratios = [r[f"{rule}_ratio"] for r in rows]
        out[rule] = {
            "geomean": math.exp(sum(map(math.log, ratios)) / len(ratios)),
            "worst": max(ratios),
        }
    return out


def _datasets(data_dir: Path | None, quick: bool) -> dict[str, np.ndarray]:
    if quick or data_dir is None:
        rng = np.random.default_rng(16)
        intensity = rng.gamma(0.3, 50.0, size=(32, 32))
        return {"synthetic-32": rng.poisson(intensity).astype(np.int64)}
    folder = data_dir / "dpbench" / "2D"
    files = sorted(folder.glob("*.npy"))
    if not files:
        raise SystemExit(f"error: no DPBench 2-D grids in {folder}; pass --data-dir or --quick")
    return {f.stem: np.rint(np.load(f)).astype(np.int64) for f in files}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.quadtree_height", description=__doc__
    )
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--quick", action="store_true", help="one small synthetic grid")
    parser.add_argument("--reps", type=int, default=None, help="seeds per height (default 3)")
    parser.add_argument("--full", action="store_true", help="the full count: 5 seeds")
    parser.add_argument("--queries", type=int, default=1000)
    args = parser.parse_args(argv)
    args.reps, why = repetitions("quadtree-height", args.full, args.reps)
    print(f"seeds per height: {args.reps} ({why})")
    datasets = _datasets(args.data_dir, args.quick)
    rows: list[dict[str, Any]] = []
    for name, F in datasets.items():
        boxes = random_boxes(F.shape[0], args.queries, 0)
        rows += sweep(name, F, EPSILONS, args.reps, boxes)
    print(
        "| data set | eps | h | oracle k | oracle MAE ± SE "
        "| tuned k (ratio) | spec k (ratio) | full k (ratio) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = " | ".join(f"{r[f'{x}_height']} ({r[f'{x}_ratio']:.2f})" for x in RULES)
        k = r["oracle_height"]
        best = format_mean_se(r[f"mae_{k}"], r[f"mae_se_{k}"], 1)
        print(f"| {r['dataset']} | {r['epsilon']} | {r['h']} | {k} | {best} | {cells} |")
    for rule, s in summary(rows).items():
        print(
            f"{rule}: geometric mean ratio to the oracle {s['geomean']:.3f}, worst {s['worst']:.2f}"
        )
    return 0


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
