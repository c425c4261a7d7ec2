"""``python -m experiments.coverage``: do the stated 95 % intervals cover the true answers?

For every mechanism whose answers carry a bootstrap uncertainty
(:func:`dpcube.release.uncertainty.answer_uncertainty`), on real data:

- the GeoLife points binned on a grid (``geolife/geolife_sample.txt.gz``) and the Gowalla
  check-in grid (``dpbench/2D/checkin_256_256.npy``): HTF, quadtree, kd-tree, UG, AG, PrivTree,
  random rectangles of the spatial benchmark (2, 6 or 10 % of the area, aspect ratio 1/4..4);
- the CPS household sizes per state (``ipums_cps/``, nation -> states, sizes 1..7+): census
  M_DP (``dp``) and M_CDP (``cdp``), every (region, size) cell;

at a few epsilons, over several releases (each seeded, unaccounted: an experiment, never for
publication), the fraction of true answers inside the stated interval. Target: 90 % to 99 % for
a 95 % interval. Also reported: the median interval width, and the ratio of the stated error sd
to the root mean square of the actual errors (1 = honest; below 1 = over-confident).

Outputs under ``--out``: ``coverage_runs.csv`` (one row per release) and ``coverage.md`` (the
table). ``--quick`` runs a small synthetic case (no data needed; for the test suite) or, with
``--data-dir``, few releases, replicates and queries.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube import registry
from dpcube.files import write_atomic
from dpcube.histogram import Histogram
from dpcube.release.cells import box_sums, prefix_sums
from dpcube.release.uncertainty import answer_uncertainty

SPATIAL = ("htf", "quadtree", "kdtree", "ug", "ag", "privtree")
CENSUS = ("dp", "cdp")
LEVEL = 0.95


def coverage_row(
    truth: NDArray[np.float64],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    answers: NDArray[np.float64],
    stddev: NDArray[np.float64],
    assumed: NDArray[np.float64] | None = None,
    untrusted: NDArray[np.bool_] | None = None,
) -> dict[str, Any]:
    """Coverage, median width and honesty of one release's intervals.

    >>> t = np.array([1.0, 5.0, 9.0]); a = np.array([2.0, 5.0, 7.0])
    >>> row = coverage_row(t, a - 1, a + 1, a, np.ones(3))
    >>> row["coverage"], row["median_width"], round(row["sd_over_rmse"], 3)
    (0.666..., 2.0, 0.775)
    """
    inside = (truth >= lower) & (truth <= upper)
    rmse = float(np.sqrt(np.mean((answers - truth) ** 2)))
    out: dict[str, Any] = {}
    if assumed is not None:
        # answers whose uniformity part is at most / more than 10 % of the answer
        heavy = assumed > 0.1 * np.maximum(np.abs(answers), 1.0)
        out["assumed_share_heavy"] = float(np.mean(heavy))
        out["coverage_light"] = float(np.mean(inside[~heavy])) if (~heavy).any() else np.nan
        out["coverage_heavy"] = float(np.mean(inside[heavy])) if heavy.any() else np.nan
    if untrusted is not None:  # Uncertainty.untrusted: the answers flagged NOT TRUSTWORTHY
        out["untrusted_share"] = float(np.mean(untrusted))
        out["coverage_untrusted"] = float(np.mean(inside[untrusted])) if untrusted.any() else np.nan
        out["coverage_trusted"] = (
            float(np.mean(inside[~untrusted])) if (~untrusted).any() else np.nan
        )
    # True answers of 0 (empty rectangles, empty cells) are covered whenever the interval, clipped
    # at 0, reaches down to 0: on sparse data they dominate the count of covered answers.
    zero = truth == 0
    out["zero_truth_share"] = float(np.mean(zero))
    out["coverage_nonzero"] = float(np.mean(inside[~zero])) if (~zero).any() else np.nan
    out |= empty_answer_stats(zero, inside, answers, stddev)
    return out | {
        "coverage": float(np.mean(inside)),
        "median_width": float(np.median(upper - lower)),
        "sd_over_rmse": float(np.sqrt(np.mean(stddev**2)) / rmse) if rmse > 0 else float("nan"),
    }


def empty_answer_stats(
    zero: NDArray[np.bool_],
    inside: NDArray[np.bool_],
    answers: NDArray[np.float64],
    stddev: NDArray[np.float64],
) -> dict[str, float]:
    """Why true answers of 0 are covered: ``coverage_zero`` (their coverage);
    ``zero_nonpositive_share``, the share whose answer is <= 0, covered *by construction* (the
    lower end is clipped at 0 and the upper end is never below it, so only a too-high answer can
    miss a true 0: a calibrated 95 % interval covers it at least 97.5 % of the time); and
    ``zero_positive_over_sd_p95``, the 95th percentile of answer / stated sd over the others (a
    calibrated interval misses near 1.96).

    >>> s = empty_answer_stats(np.array([True, True, False]), np.array([True, True, False]),
    ...                        np.array([-1.0, 2.0, 5.0]), np.array([1.0, 4.0, 1.0]))
    >>> s["coverage_zero"], s["zero_nonpositive_share"], s["zero_positive_over_sd_p95"]
    (1.0, 0.5, 0.5)
    """
    if not zero.any():
        return dict.fromkeys(
            ("coverage_zero", "zero_nonpositive_share", "zero_positive_over_sd_p95"), np.nan
        )
    positive = zero & (answers > 0)
    ratio = answers[positive] / np.maximum(stddev[positive], 1e-300)
    return {
        "coverage_zero": float(np.mean(inside[zero])),
        "zero_nonpositive_share": float(np.mean(answers[zero] <= 0)),
        "zero_positive_over_sd_p95": float(np.quantile(ratio, 0.95)) if len(ratio) else np.nan,
    }


def _grid_truth(F: NDArray[np.int64], boxes: NDArray[np.int64]) -> NDArray[np.float64]:
    return box_sums(prefix_sums(F), boxes).astype(np.float64)


def geolife_rectangles(
    data_dir: Path, window: str
) -> tuple[Histogram, NDArray[np.int64], list[dict[str, Any]], NDArray[np.float64]] | None:
    """GeoLife binned 256 x 256 (``window`` "bbox" or "core", as in
    :func:`~experiments.spatial.geolife_dataset`) with the 300 random rectangles of
    ``python -m experiments.coverage`` (seed 7): the histogram, the boxes, the boxes as queries and their
    true answers; None where the data is absent. For the coverage diagnostics
    (:mod:`experiments.coverage_shift`, :mod:`experiments.coverage_empty`)."""
    from dpcube.mechanisms.spatial._common import spatial_case_schema
    from experiments.spatial import geolife_dataset, query_boxes

    loaded = geolife_dataset(data_dir, 256, window)
    if loaded is None:
        return None
    grid = np.asarray(loaded[0].counts).reshape(256, 256)
    boxes = query_boxes(grid.shape, "random", 300, seed=7)
    queries: list[dict[str, Any]] = [{"p": {"bins": b.tolist()}} for b in boxes]
    return (
        Histogram(spatial_case_schema(*grid.shape), grid),
        boxes,
        queries,
        _grid_truth(grid, boxes),
    )


def diagnostic_case(
    prog: str,
    window: str,
    argv: list[str] | None,
    *,
    mechanism: str,
    epsilon: float,
    releases: int,
    flags: Callable[[argparse.ArgumentParser], None] = lambda p: None,
) -> tuple[
    argparse.Namespace,
    Any,
    tuple[Histogram, NDArray[np.int64], list[dict[str, Any]], NDArray[np.float64]],
]:
    """The command line of a coverage diagnostic (:mod:`~experiments.coverage_shift`,
    :mod:`~experiments.coverage_empty`): ``--data-dir``, ``--mechanism``, ``--epsilon``,
    ``--releases``, ``--runs`` (defaults given here) and the diagnostic's own ``flags``, each bad
    value refused in one line; returns the arguments, the mechanism's class and
    :func:`geolife_rectangles` of ``window``.

    >>> diagnostic_case("x", "bbox", ["--data-dir", ".", "--runs", "5"], mechanism="htf",
    ...     epsilon=1.0, releases=1)
    Traceback (most recent call last):
    SystemExit: 2
    """
    from dpcube.release.uncertainty import MIN_RUNS

    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--data-dir", type=Path, required=True, help="../shared/data")
    p.add_argument("--mechanism", default=mechanism)
    p.add_argument("--epsilon", type=float, default=epsilon)
    p.add_argument("--releases", type=int, default=releases)
    p.add_argument("--runs", type=int, default=40)
    flags(p)
    args = p.parse_args(argv)
    if args.runs < MIN_RUNS:
        p.error(f"--runs {args.runs}: a bootstrap needs at least {MIN_RUNS} runs")
    if args.releases < 1:
        p.error(f"--releases {args.releases}: give at least 1")
    try:
        cls = registry.resolve(registry.MECHANISMS, args.mechanism, "mechanism")
    except KeyError as exc:
        p.error(f"--mechanism {args.mechanism}: {exc.args[0]}")
    case = geolife_rectangles(args.data_dir, window)
    if case is None:
        p.error(f"--data-dir {str(args.data_dir)!r} holds no geolife/geolife_sample.txt.gz")
    return args, cls, case


def true_dispersion(
    release: Any, F: NDArray[np.int64], qs: list[dict[str, Any]], truth: NDArray[np.float64]
) -> float:
    """What ``LeafRelease.uniformity_dispersion`` estimates, measured against the truth (an
    experiment only: it reads the data): the release's leaves with their *exact* counts answer
    the queries; their squared errors (the uniformity error alone), summed, over the summed
    Bhatia-Davis bound ``uniformity_variance_many(qs, 0)``. 1 = the bound; above 1 the bound is
    exceeded (errors of the leaves a query cuts add up rather than cancel)."""
    from dpcube.mechanisms.spatial.release import LeafRelease

    r0, r1, c0, c1 = (release.rects[:, i] for i in range(4))
    boxes = np.stack([np.stack([r0, r1 - 1], 1), np.stack([c0, c1 - 1], 1)], 1)
    exact = LeafRelease(release.schema, release.metadata, release.rects, _grid_truth(F, boxes))
    bound = float(np.sum(exact.uniformity_variance_many(qs, 0.0)))
    error = float(np.sum((exact.answer_many(qs) - truth) ** 2))
    return error / bound if bound > 0 else float("nan")


def run(
    grids: dict[str, NDArray[np.int64]],
    census: dict[str, Any],
    *,
    spatial_eps: Sequence[float],
    census_eps: Sequence[float],
    mechanisms: Sequence[str],
    methods: Sequence[str],
    releases: int,
    runs: int,
    queries: int,
    log: Callable[[str], None] = lambda line: print(line, flush=True),
) -> list[dict[str, Any]]:
    """Every coverage row (one per data set, mechanism, epsilon and release)."""
    from dpcube.mechanisms.census.mechanism import CensusHierarchy
    from dpcube.mechanisms.spatial._common import spatial_case_schema
    from experiments.spatial import query_boxes

    rows: list[dict[str, Any]] = []
    start = time.process_time()

    def record(dataset: str, mech: str, eps: float, seed: int, stats: dict[str, Any]) -> None:
        rows.append(
            {"dataset": dataset, "mechanism": mech, "epsilon": eps, "release": seed, **stats}
        )

    for dname, F in grids.items():
        hist = Histogram(spatial_case_schema(*F.shape), F)
        boxes = query_boxes(F.shape, "random", queries, seed=7)
        qs: list[dict[str, Any]] = [{"p": {"bins": b.tolist()}} for b in boxes]
        truth = _grid_truth(F, boxes)
        for mech in mechanisms:
            cls = registry.resolve(registry.MECHANISMS, mech, "mechanism")
            for eps in spatial_eps:
                t0 = time.process_time()
                for seed in range(releases):
                    r = cls(eps).release(hist, random_state=1000 + seed, account=False)
                    u = answer_uncertainty(r, qs, level=LEVEL, runs=runs, seed=seed)
                    stats = coverage_row(
                        truth, u.lower, u.upper, u.answers, u.stddev, u.assumed, u.untrusted
                    )
                    stats["kind"] = u.kind
                    if hasattr(r, "uniformity_dispersion"):
                        stats["dispersion_release"] = r.uniformity_dispersion()
                        stats["dispersion_truth"] = true_dispersion(r, F, qs, truth)
                    record(dname, mech, eps, seed, stats)
                cpu = (time.process_time() - t0) / releases
                cov = np.mean([r["coverage"] for r in rows[-releases:]])
                log(f"  {dname} {mech} eps={eps}: coverage {cov:.3f} ({cpu:.1f} CPU s a release)")
    for dname, table in census.items():
        h = table.hierarchy
        qs = [{"region": n, "size": s} for n in h.names for s in range(1, table.max_size + 1)]
        truth = table.counts.ravel().astype(np.float64)
        for method in methods:
            for eps in census_eps:
                t0 = time.process_time()
                for seed in range(releases):
                    mechanism = CensusHierarchy(eps, method=method)
                    r = mechanism.release(table, random_state=1000 + seed, account=False)
                    u = answer_uncertainty(r, qs, level=LEVEL, runs=runs, seed=seed)
                    stats = coverage_row(truth, u.lower, u.upper, u.answers, u.stddev)
                    stats["kind"] = u.kind
                    record(dname, f"census {method}", eps, seed, stats)
                cpu = (time.process_time() - t0) / releases
                cov = np.mean([r["coverage"] for r in rows[-releases:]])
                log(f"  {dname} census {method} eps={eps}: coverage {cov:.3f} ({cpu:.1f} CPU s)")
    log(f"[{time.process_time() - start:.0f} CPU s]")
    return rows


def summary_table(rows: list[dict[str, Any]]) -> str:
    """The markdown table: mean coverage (min..max over releases), width, sd/RMSE, verdict."""
    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["mechanism"], r["epsilon"]), []).append(r)
    lines = [
        "| data set | mechanism | epsilon | coverage of 95 % intervals (min..max) | median width | "
        "stated sd / actual RMSE | in 90-99 %? | answers > 10 % assumed | coverage there "
        "/ elsewhere | flagged not trustworthy | coverage flagged / trusted | dispersion r: "
        "release / truth | true answers 0 | coverage of the others |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (d, m, e), rs in groups.items():
        cov = np.array([r["coverage"] for r in rs])
        width = float(np.mean([r["median_width"] for r in rs]))
        ratio = float(np.mean([r["sd_over_rmse"] for r in rs]))
        ok = (
            "yes"
            if 0.90 <= cov.mean() <= 0.99
            else ("no (too wide)" if cov.mean() > 0.99 else "**no**")
        )
        split = "| - | - |"
        if "assumed_share_heavy" in rs[0]:
            share = np.mean([r["assumed_share_heavy"] for r in rs])
            heavy = np.nanmean([r["coverage_heavy"] for r in rs]) if share > 0 else np.nan
            light = np.nanmean([r["coverage_light"] for r in rs]) if share < 1 else np.nan
            there, rest = (f"{100 * x:.0f} %" if np.isfinite(x) else "-" for x in (heavy, light))
            split = f"| {100 * share:.0f} % | {there} / {rest} |"
        if "untrusted_share" in rs[0]:
            flagged = float(np.mean([r["untrusted_share"] for r in rs]))
            bad = np.nanmean([r["coverage_untrusted"] for r in rs]) if flagged > 0 else np.nan
            good = np.nanmean([r["coverage_trusted"] for r in rs]) if flagged < 1 else np.nan
            there, rest = (f"{100 * x:.0f} %" if np.isfinite(x) else "-" for x in (bad, good))
            split += f" {100 * flagged:.0f} % | {there} / {rest} |"
        else:
            split += " - | - |"
        if "dispersion_release" in rs[0]:
            est = np.mean([r["dispersion_release"] for r in rs])
            true = np.mean([r["dispersion_truth"] for r in rs])
            split += f" {est:.2f} / {true:.2f} |"
        else:
            split += " - |"
        zeros = float(np.mean([r.get("zero_truth_share", np.nan) for r in rs]))
        others = (
            float(np.nanmean([r["coverage_nonzero"] for r in rs])) if zeros < 1 else np.nan
        )  # NaN zeros: rows from a run before these columns (reads as "-")
        split += (f" {100 * zeros:.0f} % | " if np.isfinite(zeros) else " - | ") + (
            f"{100 * others:.1f} % |" if np.isfinite(others) else "- |"
        )
        lines.append(
            f"| {d} | {m} | {e:g} | {100 * cov.mean():.1f} % ({100 * cov.min():.0f}..{100 * cov.max():.0f}) "
            f"| {width:.4g} | {ratio:.2f} | {ok} " + split
        )
    return "\n".join(lines)


def _synthetic_grid(side: int) -> NDArray[np.int64]:
    from experiments.spatial import gaussian_dataset

    return gaussian_dataset(sigma=side / 10, n=200 * side, seed=3, side=side)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.coverage", description=__doc__)
    p.add_argument("--data-dir", type=Path, default=None, help="../shared/data (real data sets)")
    p.add_argument("--out", type=Path, default=Path("coverage-out"))
    p.add_argument(
        "--quick", action="store_true", help="a small run (synthetic without --data-dir)"
    )
    p.add_argument(
        "--releases", type=int, default=None, help="releases per case (default 3; quick 2)"
    )
    p.add_argument(
        "--runs", type=int, default=None, help="bootstrap replicates (default 200; quick 40)"
    )
    p.add_argument(
        "--queries", type=int, default=None, help="rectangles per grid (default 300; quick 50)"
    )
    p.add_argument("--spatial-epsilons", default="0.1,1.0")
    p.add_argument("--census-epsilons", default="0.1,0.5,1.0")
    p.add_argument("--mechanisms", default=",".join(SPATIAL))
    p.add_argument("--methods", default=",".join(CENSUS))
    p.add_argument(
        "--datasets", default="geolife,gowalla,cps", help="with --data-dir: which real data sets"
    )
    p.add_argument("--side", type=int, default=256, help="GeoLife grid side (default 256)")
    p.add_argument(
        "--denoised-world",
        action="store_true",
        help="experiment: spread noise-discounted leaf counts in the clustered bootstrap world "
        "(off by default; experiments/docs/coverage.md, 'Empty rectangles')",
    )
    args = p.parse_args(argv)
    if args.denoised_world:
        from dpcube.mechanisms.spatial import release as leaf_release

        leaf_release.DENOISE_CLUSTERED_WORLD = True
    releases = args.releases or (2 if args.quick else 3)
    runs = args.runs or (40 if args.quick else 200)
    queries = args.queries or (50 if args.quick else 300)
    for flag, value in (("--releases", releases), ("--runs", runs), ("--queries", queries)):
        if value < 1:
            p.error(f"{flag} must be positive, got {value}")
    grids: dict[str, NDArray[np.int64]] = {}
    census: dict[str, Any] = {}
    if args.data_dir is not None:
        from experiments.census import ipums_table
        from experiments.spatial import LOCATION_GRIDS, geolife_dataset

        if not args.data_dir.is_dir():
            p.error(f"--data-dir {str(args.data_dir)!r} is not a directory")
        wanted = {d.strip().lower() for d in args.datasets.split(",") if d.strip()}
        unknown = wanted - {"geolife", "geolife-core", "gowalla", "cps"}
        if unknown:
            p.error(
                f"--datasets: unknown {sorted(unknown)[0]!r} "
                "(known: geolife, geolife-core, gowalla, cps)"
            )
        side = 64 if args.quick else args.side
        loaded = geolife_dataset(args.data_dir, side) if "geolife" in wanted else None
        if loaded is not None:
            grids["GeoLife"] = loaded[0].counts
        core = geolife_dataset(args.data_dir, side, "core") if "geolife-core" in wanted else None
        if core is not None:
            grids["GeoLife core"] = core[0].counts
        gowalla = args.data_dir / "dpbench" / "2D" / LOCATION_GRIDS["Gowalla"]
        if "gowalla" in wanted and gowalla.exists():
            grids["Gowalla"] = np.rint(np.load(gowalla)).astype(np.int64)
        if "cps" in wanted and (args.data_dir / "ipums_cps").is_dir():
            census["CPS households"] = ipums_table(args.data_dir / "ipums_cps")
        if not grids and not census:
            p.error(
                f"--data-dir {str(args.data_dir)!r} holds none of geolife/, dpbench/2D/, ipums_cps/"
            )
    else:
        from experiments.census_generator import census_table

        grids["synthetic Gaussian"] = _synthetic_grid(32 if args.quick else 256)
        census["synthetic census"] = census_table(scale=0.0005, max_size=6, seed=0)
    mechanisms = [m for m in args.mechanisms.split(",") if m]
    methods = [m for m in args.methods.split(",") if m]
    spatial_eps = [float(e) for e in args.spatial_epsilons.split(",") if e]
    census_eps = [float(e) for e in args.census_epsilons.split(",") if e]
    if args.quick and args.data_dir is None:
        mechanisms, methods, spatial_eps, census_eps = ["htf", "privtree"], ["cdp"], [1.0], [1.0]
    for name in mechanisms:
        if name not in registry.MECHANISMS:
            p.error(f"--mechanisms: unknown mechanism {name!r}")
    for name in methods:
        if name not in CENSUS:
            p.error(f"--methods: {name!r} is not one of {', '.join(CENSUS)}")
    rows = run(
        grids,
        census,
        spatial_eps=spatial_eps,
        census_eps=census_eps,
        mechanisms=mechanisms,
        methods=methods,
        releases=releases,
        runs=runs,
        queries=queries,
    )
    import pandas as pd

    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out / "coverage_runs.csv", pd.DataFrame(rows).to_csv(index=False).encode())
    table = summary_table(rows)
    header = (
        f"releases per case: {releases}, bootstrap replicates: {runs}, rectangles per grid: "
        f"{queries}, level: {LEVEL:g}\n\n"
    )
    write_atomic(args.out / "coverage.md", (header + table + "\n").encode())
    print(table)
    print(f"wrote {args.out}/coverage_runs.csv and coverage.md")
    return 0


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
