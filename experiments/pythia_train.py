"""``python -m experiments.pythia_train``: fit the rule of ``auto --adaptive`` on DPBench and score it.

The training runs follow DPBench's protocol of scales (Hay et al., "Principled Evaluation of
Differentially Private Algorithms using DPBench", SIGMOD 2016): each data set's shape (its counts
normalised) is resampled to ``scale`` records (a multinomial draw, seeded), at each epsilon every
mechanism the rule may choose (the registered ones among :data:`ARMS`) is released ``--trials``
times, at the full epsilon (for the oracle) and at the release's part ``(1 - share) epsilon``
(for the adaptive choice), and its error measured as DPBench's scaled average per-query L2 error on
its random-range workload (:func:`experiments.leaderboard.scaled_l2_error`).

The rule (:func:`dpcube.planning.pythia.fit_tree`, one tree per dimension) is fitted on the
features of every row and written to ``src/dpcube/planning/pythia_rule.json`` (``--no-write-rule``
leaves it). The score is honest: each data set's rows are chosen by a tree fitted *without* that
data set (leave-one-data-set-out), on features with their selection noise drawn as a release
draws it (``share * epsilon``, sensitivity 3), and the chosen mechanism's error is its error at
``(1 - share) epsilon``: the selection budget is charged to auto. Against the hindsight oracle
(the least mean error of any mechanism at the full epsilon) it reports how often auto is within
1.25x, its geometric mean ratio, and its mean ratio against every fixed mechanism.

Full DPBench grid (days on two cores)::

    python -m experiments pythia_train --scales 1e3,1e4,1e5,1e6,1e7 --size-1d 4096 \\
        --size-2d 256 --trials 5

The reduced grid of the docs (experiments/docs/pythia)::

    python -m experiments pythia_train --scales 1e3,1e4,1e5 --size-1d 256 --size-2d 32 \\
        --trials 2 --out experiments/docs/pythia
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpcube.errors import DPCubeError, UsageError
from dpcube.files import write_atomic
from dpcube.histogram import Histogram
from dpcube.planning.pythia import (
    DEFAULT_SELECTION_SHARE,
    RULE_FILE,
    RULE_INPUTS,
    SelectionRule,
    exact_features,
    fit_tree,
    rule_inputs,
)
from dpcube.privacy.random import SeededRandomSource
from dpcube.privacy.samplers import discrete_laplace, laplace_scale_rational
from dpcube.registry import MECHANISMS, resolve
from experiments.leaderboard import (
    DPBENCH_1D,
    DPBENCH_2D,
    EPSILONS,
    box_answers,
    grid_schema,
    load_dpbench,
    make_task,
    scaled_l2_error,
)

#: Mechanisms the rule may choose, per number of axes (those registered are used).
ARMS: dict[int, tuple[str, ...]] = {
    1: ("identity", "dawa", "ahp", "mwem"),
    2: ("identity", "dawa", "ahp", "privtree", "ag"),
}
#: Noisy draws of each row's features in the training set.
DRAWS = 5
#: The tree's size: depth and the least training rows (draws included) of a leaf.
TREE: dict[str, int] = {"max_depth": 3, "min_rows": 30}
#: auto within this factor of the oracle counts as a hit.
GOAL_RATIO = 1.25
RULE_PATH = Path(__file__).resolve().parents[1] / "src" / "dpcube" / "planning" / RULE_FILE


def arms_for(dims: int) -> list[str]:
    return [a for a in ARMS[dims] if a in MECHANISMS]


def release_error(
    name: str, epsilon: float, hist: Histogram, task: Any, truth: Any, seed: int
) -> float:
    """DPBench's scaled L2 error of one seeded, unaccounted release (NaN where refused)."""
    cls = resolve(MECHANISMS, name, "mechanism")
    options = {"workload": task.workload} if "workload" in cls.accepted_params() else {}
    try:
        release = cls(epsilon, **options).release(hist, random_state=seed, account=False)
    except DPCubeError:
        return math.nan
    scale = float(hist.counts.sum())
    return scaled_l2_error(truth, box_answers(release, task.boxes), scale)


def run_grid(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (data set, scale, epsilon, mechanism): mean error at epsilon and at (1 - share)
    epsilon over the trials, with the data's exact features (never leave the experiment)."""
    rows: list[dict[str, Any]] = []
    plans = [((args.size_1d,), DPBENCH_1D, "1D"), ((args.size_2d, args.size_2d), DPBENCH_2D, "2D")]
    for dims, files, folder in plans:
        if folder in args.skip:
            continue
        datasets = load_dpbench(args.data_dir, files, folder, dims)[: args.max_datasets]
        task = make_task("random-range", dims, args.queries)
        schema = grid_schema(dims)
        for ds in datasets:
            shape = ds.counts.ravel() / ds.counts.sum()
            for scale in args.scales:
                for trial in range(args.trials):
                    rng = np.random.default_rng([trial, int(scale), len(dims)])
                    x = rng.multinomial(int(scale), shape).reshape(dims)
                    hist = Histogram(schema, x)
                    truth = box_answers(type("Exact", (), {"counts": x})(), task.boxes)
                    feats = exact_features(x)
                    for eps in args.epsilons:
                        for arm in arms_for(len(dims)):
                            seed = 1000 * trial + 7
                            rows.append(
                                {
                                    "dims": len(dims),
                                    "dataset": ds.name,
                                    "scale": int(scale),
                                    "epsilon": eps,
                                    "trial": trial,
                                    "mechanism": arm,
                                    "error": release_error(arm, eps, hist, task, truth, seed),
                                    "error_release": release_error(
                                        arm, (1 - args.share) * eps, hist, task, truth, seed + 1
                                    ),
                                    "cells": int(np.prod(dims)),
                                    "total": int(feats[0]),
                                    "nonzero": int(feats[1]),
                                    "top_mass": int(feats[2]),
                                }
                            )
                    print(f"{ds.name} scale {int(scale)} trial {trial}", flush=True)
    return rows


def table(rows: Sequence[dict[str, Any]], dims: int) -> tuple[list[tuple[Any, ...]], Any, Any, Any]:
    """Per (data set, scale, epsilon): keys, mean full-epsilon errors (rows x arms), mean
    release-budget errors, and mean exact features."""
    arms = arms_for(dims)
    keys = sorted(
        {(r["dataset"], r["scale"], r["epsilon"]) for r in rows if r["dims"] == dims},
    )
    full = np.full((len(keys), len(arms)), np.nan)
    part = np.full((len(keys), len(arms)), np.nan)
    feats = np.zeros((len(keys), 4))
    index = {k: i for i, k in enumerate(keys)}
    acc: dict[tuple[int, int], list[tuple[float, float]]] = {}
    fsum: dict[int, list[list[float]]] = {}
    for r in rows:
        if r["dims"] != dims or r["mechanism"] not in arms:
            continue
        i = index[(r["dataset"], r["scale"], r["epsilon"])]
        j = arms.index(r["mechanism"])
        acc.setdefault((i, j), []).append((float(r["error"]), float(r["error_release"])))
        fsum.setdefault(i, []).append(
            [float(r["cells"]), float(r["total"]), float(r["nonzero"]), float(r["top_mass"])]
        )
    for (i, j), values in acc.items():
        v = np.array(values)
        full[i, j], part[i, j] = v[:, 0].mean(), v[:, 1].mean()
    for i, f in fsum.items():
        feats[i] = np.mean(f, axis=0)
    return keys, full, part, feats


def inputs_of(feats: Any, keys: Sequence[tuple[Any, ...]], share: float, noise: Any) -> Any:
    """Rule inputs per row (``noise``: rows x 3 added to the features, zeros for the fit)."""
    out = np.zeros((len(keys), len(RULE_INPUTS)))
    for i, (_, _, eps) in enumerate(keys):
        f = {
            "total": feats[i, 1] + noise[i, 0],
            "nonzero": feats[i, 2] + noise[i, 1],
            "top_mass": feats[i, 3] + noise[i, 2],
        }
        r = rule_inputs(f, int(feats[i, 0]), (1 - share) * eps)
        out[i] = [r[k] for k in RULE_INPUTS]
    return out


def regret_of(full: Any, part: Any) -> Any:
    """log(error at the release's budget / the oracle's error at the full budget)."""
    oracle = np.nanmin(full, axis=1, keepdims=True)
    return np.log(part / oracle)


def selection_noise(keys: Sequence[tuple[Any, ...]], share: float, seed: int) -> Any:
    source = SeededRandomSource(seed)
    noise = np.zeros((len(keys), 3))
    for i, (_, _, eps) in enumerate(keys):
        t, s = laplace_scale_rational(3.0 / (share * eps))
        noise[i] = discrete_laplace(source, t, s, size=3)
    return noise


def score(rows: Sequence[dict[str, Any]], share: float, seed: int) -> tuple[list[str], list[str]]:
    """Leave-one-data-set-out score of the rule: summary lines and the per-row table."""
    summary: list[str] = []
    detail = [
        "| D | data set | scale | epsilon | chosen | auto / oracle | oracle |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for dims in (1, 2):
        keys, full, part, feats = table(rows, dims)
        if not keys:
            continue
        arms = arms_for(dims)
        regret = regret_of(full, part)
        fit_inputs, fit_regret = noisy_training_set(feats, keys, regret, share, seed + 1000)
        noisy_inputs = inputs_of(feats, keys, share, selection_noise(keys, share, seed))
        oracle = np.nanmin(full, axis=1)
        ratios = np.full(len(keys), np.nan)
        choice_full = np.full(len(keys), np.nan)
        names = np.array([k[0] for k in keys])
        for held in sorted(set(names)):
            train = names != held
            fit_rows = np.tile(train, DRAWS)
            tree = fit_tree(fit_inputs[fit_rows], fit_regret[fit_rows], arms, **TREE)
            rule = SelectionRule("cv", 0, {str(dims): tree})
            for i in np.flatnonzero(~train):
                ranking = rule.rank(dims, dict(zip(RULE_INPUTS, noisy_inputs[i], strict=True)))
                j = next(arms.index(m) for m in ranking if not math.isnan(part[i, arms.index(m)]))
                ratios[i] = part[i, j] / oracle[i]
                choice_full[i] = full[i, j]
                detail.append(
                    f"| {dims} | {keys[i][0]} | {keys[i][1]:,} | {keys[i][2]:g} | {arms[j]} | "
                    f"{ratios[i]:.2f} | {arms[int(np.nanargmin(full[i]))]} |"
                )
        hits = float(np.mean(ratios <= GOAL_RATIO))
        gm = float(np.exp(np.mean(np.log(ratios))))
        summary.append(
            f"- {dims}-D, {len(keys)} rows: within {GOAL_RATIO}x of the oracle on {hits:.0%}; "
            f"geometric mean ratio {gm:.3f}"
        )
        # the choice alone (the chosen mechanism's error at the full epsilon, in the oracle's own
        # runs) and the floor of the measurement: the oracle's mechanism itself, chosen every
        # time, measured as auto is (independent runs at (1 - share) epsilon)
        best = np.nanargmin(full, axis=1)
        floor = part[np.arange(len(keys)), best] / oracle
        alone = np.array(choice_full) / oracle
        summary.append(
            f"  - the choice alone (chosen mechanism at the full epsilon, oracle's runs): "
            f"within {GOAL_RATIO}x on {float(np.mean(alone <= GOAL_RATIO)):.0%}, geometric mean "
            f"{float(np.exp(np.mean(np.log(alone)))):.3f}"
        )
        summary.append(
            f"  - floor (the oracle's mechanism every time, measured as auto is): within "
            f"{GOAL_RATIO}x on {float(np.mean(floor <= GOAL_RATIO)):.0%}, geometric mean "
            f"{float(np.exp(np.mean(np.log(floor)))):.3f}"
        )
        for j, arm in enumerate(arms):
            fixed = full[:, j] / oracle
            ok = ~np.isnan(fixed)
            gm_fixed = float(np.exp(np.mean(np.log(fixed[ok]))))
            gm_auto = float(np.exp(np.mean(np.log(ratios[ok]))))
            summary.append(
                f"  - vs {arm} (at the full epsilon, {int(ok.sum())} rows): {arm} "
                f"{gm_fixed:.3f}x the oracle, auto {gm_auto:.3f}x; auto "
                f"{'ahead' if gm_auto < gm_fixed else 'behind'}; {arm} within {GOAL_RATIO}x on "
                f"{float(np.mean(fixed[ok] <= GOAL_RATIO)):.0%}"
            )
    return summary, detail


def noisy_training_set(
    feats: Any, keys: Sequence[tuple[Any, ...]], regret: Any, share: float, seed: int
) -> tuple[Any, Any]:
    """Each row :data:`DRAWS` times, its features with the selection noise a release would draw
    (so that the splits are made on what the rule will read, not on exact figures)."""
    inputs = [
        inputs_of(feats, keys, share, selection_noise(keys, share, seed + d)) for d in range(DRAWS)
    ]
    return np.vstack(inputs), np.vstack([regret] * DRAWS)


def fit_rule(
    rows: Sequence[dict[str, Any]], share: float, trained_on: str, seed: int
) -> SelectionRule:
    trees = {}
    for dims in (1, 2):
        keys, full, part, feats = table(rows, dims)
        if keys:
            inputs, regret = noisy_training_set(feats, keys, regret_of(full, part), share, seed)
            trees[str(dims)] = fit_tree(inputs, regret, arms_for(dims), **TREE)
    return SelectionRule("pythia-dpbench", 1, trees, trained_on)


def csv_text(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def read_rows(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        out = []
        for r in csv.DictReader(f):
            row: dict[str, Any] = dict(r)
            for k in ("dims", "scale", "trial", "cells", "total", "nonzero", "top_mass"):
                row[k] = int(row[k])
            for k in ("epsilon", "error", "error_release"):
                row[k] = float(row[k])
            out.append(row)
        return out


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"expected comma-separated numbers, got {text!r}") from None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments.pythia_train", description=__doc__)
    p.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    p.add_argument("--scales", type=_floats, default=(1e3, 1e4, 1e5))
    p.add_argument("--epsilons", type=_floats, default=EPSILONS)
    p.add_argument("--size-1d", type=int, default=256)
    p.add_argument("--size-2d", type=int, default=32)
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--queries", type=int, default=2000)
    p.add_argument("--max-datasets", type=int, default=None)
    p.add_argument("--skip", default="", help="1D or 2D to skip one dimension")
    p.add_argument("--share", type=float, default=DEFAULT_SELECTION_SHARE)
    p.add_argument("--seed", type=int, default=29)
    p.add_argument("--out", type=Path, default=Path("pythia-out"))
    p.add_argument("--from-runs", type=Path, default=None, help="refit from a runs.csv")
    p.add_argument("--no-write-rule", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = read_rows(args.from_runs) if args.from_runs else run_grid(args)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.from_runs:
        write_atomic(args.out / "runs.csv", csv_text(rows).encode())
    scales = sorted({r["scale"] for r in rows})
    trained_on = (
        f"DPBench random ranges, scales {', '.join(f'{s:,}' for s in scales)}, epsilons "
        f"{', '.join(f'{e:g}' for e in sorted({r['epsilon'] for r in rows}))}, share {args.share:g}"
    )
    rule = fit_rule(rows, args.share, trained_on, args.seed)
    if not args.no_write_rule:
        RULE_PATH.write_text(json.dumps(rule.to_dict(), indent=1) + "\n", encoding="utf-8")
    summary, detail = score(rows, args.share, args.seed)
    text = "\n".join(["# auto --adaptive against the hindsight oracle", "", *summary, "", *detail])
    write_atomic(args.out / "score.md", (text + "\n").encode())
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
