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

The noise of every (data set, scale, epsilon, trial) has its own seed, so that the rows are
independent (one seed for all rows would add the same noise to every data set through a
data-independent mechanism). The score also reports the cross-fitted oracle
(:func:`cross_fitted_oracle`), the floor of the measurement (the oracle's own mechanism measured
as auto is) and auto's error against each fixed mechanism's.

The run of the docs (experiments/docs/pythia.md; trials added in batches with ``--first-trial``,
one process per part, then one refit from the concatenated runs)::

    python -m experiments pythia_train --scales 1e3,1e4,1e5,1e6,1e7 --size-1d 256 --size-2d 32 \
        --trials 30 --skip 2D --no-write-rule --out OUT/1d
    python -m experiments pythia_train --scales 1e3,1e4,1e5,1e6,1e7 --size-1d 256 --size-2d 32 \
        --trials 36 --skip 1D --no-write-rule --out OUT/2d
    python -m experiments pythia_train --from-runs experiments/docs/pythia/runs.csv.gz \
        --out experiments/docs/pythia

DPBench's native domains (4,096 bins, 256 x 256) are ``--size-1d 4096 --size-2d 256``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import math
import zlib
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
TREE: dict[str, int] = {"max_depth": 3, "min_rows": 60}
#: auto within this factor of the oracle counts as a hit.
GOAL_RATIO = 1.25
#: The version the fitted rule carries (recorded in every release it chooses for).
RULE_VERSION = 2
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
        if args.datasets:
            datasets = [ds for ds in datasets if ds.name in args.datasets]
        task = make_task("random-range", dims, args.queries)
        schema = grid_schema(dims)
        for ds in datasets:
            shape = ds.counts.ravel() / ds.counts.sum()
            for scale in args.scales:
                for trial in range(args.first_trial, args.first_trial + args.trials):
                    rng = np.random.default_rng([trial, int(scale), len(dims)])
                    x = rng.multinomial(int(scale), shape).reshape(dims)
                    hist = Histogram(schema, x)
                    truth = box_answers(type("Exact", (), {"counts": x})(), task.boxes)
                    feats = exact_features(x)
                    for eps in args.epsilons:
                        # a noise seed of its own for every row and trial: with one seed for
                        # all rows, a data-independent mechanism would add the same noise to
                        # every data set and scale, and the rows would not be independent
                        seed = 2 * zlib.crc32(f"{ds.name}|{int(scale)}|{eps!r}|{trial}".encode())
                        for arm in arms_for(len(dims)):
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


def table(
    rows: Sequence[dict[str, Any]], dims: int, parity: int | None = None
) -> tuple[list[tuple[Any, ...]], Any, Any, Any]:
    """Per (data set, scale, epsilon): keys, mean full-epsilon errors (rows x arms), mean
    release-budget errors, and mean exact features (``parity`` 0 or 1: the even or odd trials
    only, for the cross-fitted oracle; the keys are those of every trial)."""
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
        if parity is not None and r["trial"] % 2 != parity:
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


def cross_fitted_oracle(rows: Sequence[dict[str, Any]], dims: int) -> Any:
    """The hindsight oracle estimated without the winner's curse: the mechanism of least mean
    error on the even trials, scored on the odd ones, and the other way round, averaged.

    The least of several noisy means (:func:`regret_of`'s oracle) is biased low: with DPBench's
    random ranges one run's error varies by a factor of 2 to 3, so the minimum over five
    mechanisms' means sits below every mechanism's expected error. This estimate is biased the
    other way (a choice made on half the runs is at best the best), so the two bracket it.
    """
    _, full_even, _, _ = table(rows, dims, parity=0)
    _, full_odd, _, _ = table(rows, dims, parity=1)
    idx = np.arange(full_even.shape[0])
    if np.all(np.isnan(full_odd)):
        return np.nanmin(full_even, axis=1)
    pick_even = np.nanargmin(np.where(np.isnan(full_even), np.inf, full_even), axis=1)
    pick_odd = np.nanargmin(np.where(np.isnan(full_odd), np.inf, full_odd), axis=1)
    return 0.5 * (full_odd[idx, pick_even] + full_even[idx, pick_odd])


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
        crossed = cross_fitted_oracle(rows, dims)
        auto_err = ratios * oracle
        crossed_ratio = auto_err / crossed
        summary.append(
            f"  - against the cross-fitted oracle (chosen on half the trials, scored on the "
            f"other half; biased high where the least mean is biased low): within {GOAL_RATIO}x "
            f"on {float(np.mean(crossed_ratio <= GOAL_RATIO)):.0%}, geometric mean "
            f"{float(np.exp(np.mean(np.log(crossed_ratio)))):.3f}; the least mean is "
            f"{float(np.exp(np.mean(np.log(oracle / crossed)))):.3f}x the cross-fitted oracle "
            "(geometric mean)"
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
            # auto's own runs against the fixed mechanism's: neither is the oracle's minimum,
            # so the winner's curse favours neither (auto's runs carry the selection charge)
            head = float(np.exp(np.mean(np.log(auto_err[ok] / full[ok, j]))))
            summary.append(
                f"  - vs {arm} (at the full epsilon, {int(ok.sum())} rows): {arm} "
                f"{gm_fixed:.3f}x the oracle, auto {gm_auto:.3f}x; auto / {arm} {head:.3f} "
                f"(geometric mean); auto {'ahead' if head < 1 else 'behind'}; {arm} within "
                f"{GOAL_RATIO}x on {float(np.mean(fixed[ok] <= GOAL_RATIO)):.0%}, within "
                f"{GOAL_RATIO}x of the cross-fitted oracle on "
                f"{float(np.mean(full[ok, j] / crossed[ok] <= GOAL_RATIO)):.0%}"
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
    return SelectionRule("pythia-dpbench", RULE_VERSION, trees, trained_on)


def csv_text(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``runs.csv`` (or ``runs.csv.gz``)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
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
    p.add_argument(
        "--first-trial", type=int, default=0, help="number of the first trial (to add trials)"
    )
    p.add_argument("--queries", type=int, default=2000)
    p.add_argument("--max-datasets", type=int, default=None)
    p.add_argument(
        "--datasets",
        type=lambda text: tuple(text.split(",")),
        default=(),
        help="comma-separated DPBench names to run (default: all; to split a run over processes)",
    )
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
