"""``python -m experiments.matrix``: the matrix-mechanism experiments (Li & Miklau 2011).

Analytic parts (P = 1, ratios to svdb): the Example 3.1 table (with the corrected bound: the paper divides by 5.32e6 for AllRange(1024), not 6.4007e6),
Fig 1 (LSA error vs number of levels, AllRange(512)), Fig 2 (svdb of sampled workloads), Fig 3(a)
(AllRange on five domains of size 1024), Fig 3(b) (random ranges by coverage), Fig 3(c)
(separation) and Fig 3(d) (generalization), with run times; the dependence of multi-dimensional
LSA on the tie window. Empirical part: releases on the DPBench
1-D and 2-D histograms, measured total squared workload error against the analytic value.

``--quick`` shrinks every domain for a smoke run; ``--full`` adds the long LSA runs
(AllRange(1024), 32x32, 16x8x8, the d = 16/32 and n = 1024 scaling runs), several minutes each.
Outputs: one CSV per part and PNG plots under ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpcube.histogram import Histogram
from dpcube.linalg.operators import Explicit, Identity, LinearOperator
from dpcube.linalg.solve import GramSolver
from dpcube.mechanisms.matrix.bound import gaussian_error, svdb
from dpcube.mechanisms.matrix.lsa import LSAResult, lsa
from dpcube.mechanisms.matrix.mechanism import MatrixMechanism, make_strategy
from dpcube.mechanisms.matrix.scaling import generalized_lsa, separated_lsa
from dpcube.mechanisms.matrix.strategies import Strategy, eigen, hierarchical, kron, wavelet
from dpcube.progress import step
from dpcube.release.cells import CellRelease
from dpcube.schema import Schema
from dpcube.workloads import (
    Workload,
    allrange,
    allrange_gram_1d,
    average_coverage,
    coverage_ranges,
    marginal_ranges,
    parse_workload,
    random_ranges,
)
from experiments.leaderboard import coarsen


def _write(out: Path, name: str, rows: list[dict[str, Any]]) -> Path:
    path = out / f"{name}.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()}
            )
    print(f"wrote {path}")
    return path


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _lsa(w: Workload) -> tuple[LSAResult, float]:
    result, seconds = _timed(lambda: lsa(w.gram.dense(), w.dims))
    return result, seconds


def _ratio(w: Workload, a: LinearOperator, bound: float) -> float:
    return gaussian_error(w.gram, a) / bound


def example_3_1(out: Path, full: bool) -> list[dict[str, Any]]:
    """Example 3.1 table: ratio of total error to svdb on AllRange(1024) and AllRange(32,32)."""
    paper = {
        ("1024", "workload"): 50.58, ("1024", "identity"): 33.75, ("1024", "hierarchical"): 2.14,
        ("1024", "wavelet"): 1.84, ("1024", "lsa"): 1.26,
        ("32x32", "workload"): 17.25, ("32x32", "identity"): 8.15, ("32x32", "hierarchical"): 2.92,
        ("32x32", "wavelet"): 2.23, ("32x32", "lsa"): 1.08,
    }  # fmt: skip
    rows: list[dict[str, Any]] = []
    for dims in ((1024,), (32, 32)):
        w = allrange(dims)
        label = "x".join(map(str, dims))
        bound = svdb(w.gram)
        max_diag = math.prod(float(np.diag(allrange_gram_1d(d)).max()) for d in dims)
        ratios = {
            "workload": w.n * max_diag / bound,
            "identity": _ratio(w, Identity(w.n), bound),
            "hierarchical": _ratio(w, kron([hierarchical(d) for d in dims]).operator, bound),
            "wavelet": _ratio(w, kron([wavelet(d) for d in dims]).operator, bound),
            "eigen": _ratio(w, eigen(w.gram).operator, bound),
        }
        seconds = {}
        if full:
            with step(f"LSA on AllRange({label})"):
                r, seconds["lsa"] = _lsa(w)
            ratios["lsa"] = r.error / bound
        for name, ratio in ratios.items():
            rows.append({
                "workload": f"AllRange({label})", "strategy": name, "svdb": bound, "ratio": ratio,
                "paper_ratio": paper.get((label, name), ""), "seconds": seconds.get(name, ""),
            })  # fmt: skip
    _write(out, "example_3_1", rows)
    return rows


def figure_1(out: Path, n: int) -> list[dict[str, Any]]:
    """Fig 1: error/svdb of LSA after each accepted level on AllRange(n) (n = 512 in the paper)."""
    w = allrange((n,))
    with step(f"LSA on AllRange({n})"):
        r, seconds = _lsa(w)
    bound = svdb(w.gram)
    sizes = [n, *(len(level) for level in r.levels)]
    rows = [
        {
            "levels": s + 1,
            "ratio": e / bound,
            "boxes_in_last_level": sizes[s],
            "seconds_total": seconds,
        }
        for s, e in enumerate(r.errors)
    ]
    _write(out, "figure_1", rows)
    _plot(out / "figure_1.png", f"LSA on AllRange({n}): error / svdb vs levels",
          "levels (identity included)", "error / svdb",
          {"LSA": ([row["levels"] for row in rows], [row["ratio"] for row in rows])}, logy=True)  # fmt: skip
    print(
        f"Fig 1: {r.levels_count} levels, {r.rows_count} rows, {r.distinct_count} distinct, {seconds:.1f} s"
    )
    return rows


def figure_2(
    out: Path, domains: Sequence[tuple[int, ...]], sizes: Sequence[int]
) -> list[dict[str, Any]]:
    """Fig 2: complexity (svdb(sample)/m) / (svdb(full)/N) of uniform and biased samples."""
    rows: list[dict[str, Any]] = []
    series: dict[str, tuple[list[float], list[float]]] = {}
    for dims in domains:
        full = allrange(dims)
        per_query = svdb(full.gram) / full.size
        label = "x".join(map(str, dims))
        for bias in (None, "extremes"):
            xs: list[float] = []
            ys: list[float] = []
            for m in sizes:
                if m > full.size:
                    continue
                sample = random_ranges(m, dims, seed=1, bias=bias)
                ratio = (svdb(sample.gram) / m) / per_query
                rows.append(
                    {"domain": label, "sampling": bias or "uniform", "m": m, "complexity": ratio}
                )
                xs.append(m)
                ys.append(ratio)
            series[f"{label} {bias or 'uniform'}"] = (xs, ys)
    _write(out, "figure_2", rows)
    _plot(out / "figure_2.png", "svdb of sampled AllRange workloads", "sample size m",
          "(svdb/m) / (svdb_full/N)", series, logx=True)  # fmt: skip
    return rows


def figure_3a(
    out: Path, domains: Sequence[tuple[int, ...]], lsa_cells: int
) -> list[dict[str, Any]]:
    """Fig 3(a): AllRange on domains of equal size: svdb and the ratios of LSA, wavelet, H."""
    rows: list[dict[str, Any]] = []
    for dims in domains:
        w = allrange(dims)
        bound = svdb(w.gram)
        row: dict[str, Any] = {"domain": "x".join(map(str, dims)), "queries": w.size, "svdb": bound}
        if all(d & (d - 1) == 0 for d in dims):
            row["wavelet"] = _ratio(w, kron([wavelet(d) for d in dims]).operator, bound)
        row["hierarchical"] = _ratio(w, kron([hierarchical(d) for d in dims]).operator, bound)
        row["lsa"], row["lsa_levels"], row["lsa_seconds"] = "", "", ""
        if w.n <= lsa_cells:
            with step(f"LSA on AllRange({row['domain']})"):
                r, seconds = _lsa(w)
            row["lsa"], row["lsa_levels"], row["lsa_seconds"] = (
                r.error / bound,
                r.levels_count,
                seconds,
            )
        rows.append(row)
    _write(out, "figure_3a", rows)
    _bars(out / "figure_3a.png", "AllRange on domains of equal size", rows, "domain",
          ("wavelet", "hierarchical", "lsa"))  # fmt: skip
    return rows


#: Tie windows of :func:`lsa_ties` (relative; 1e-12 is the default).
TIE_WINDOWS = (0.0, 1e-13, 1e-12, 1e-10, 1e-9, 1e-8, 1e-6)


def lsa_ties(out: Path, domains: Sequence[tuple[int, ...]]) -> list[dict[str, Any]]:
    """How the multi-dimensional LSA outcome depends on the tie window.

    Candidate splits within ``tie`` (relative) of a box's best go to the lowest (axis, cut); with
    ``tie = 0`` rounding decides between mirror-image splits. Levels, rows and error/svdb at
    natural termination for each window.
    """
    rows: list[dict[str, Any]] = []
    for dims in domains:
        w = allrange(dims)
        bound = svdb(w.gram)
        g = w.gram.dense()
        for tie in TIE_WINDOWS:
            with step(f"LSA on AllRange({'x'.join(map(str, dims))}), tie window {tie:g}"):
                start = time.perf_counter()
                r = lsa(g, dims, tie=tie)
                seconds = time.perf_counter() - start
            rows.append({
                "domain": "x".join(map(str, dims)), "tie": tie, "levels": r.levels_count,
                "rows": r.rows_count, "distinct": r.distinct_count, "ratio": r.error / bound,
                "seconds": seconds,
            })  # fmt: skip
    _write(out, "lsa_ties", rows)
    return rows


def figure_3b(out: Path, n: int, m: int, coverages: Sequence[float]) -> list[dict[str, Any]]:
    """Fig 3(b): ratios to svdb on random 1-D range workloads grouped by average coverage."""
    rows: list[dict[str, Any]] = []
    for c in coverages:
        w = coverage_ranges(m, c, n, seed=1)
        bound = svdb(w.gram)
        r, seconds = _lsa(w)
        rows.append({
            "target_coverage": c, "average_coverage": average_coverage(w), "queries": w.size,
            "lsa": r.error / bound, "wavelet": _ratio(w, wavelet(n).operator, bound),
            "hierarchical": _ratio(w, hierarchical(n).operator, bound),
            "identity": _ratio(w, Identity(n), bound), "lsa_seconds": seconds,
        })  # fmt: skip
    _write(out, "figure_3b", rows)
    xs = [r["average_coverage"] * 100 for r in rows]
    _plot(out / "figure_3b.png", f"random ranges on {n} cells by coverage", "average coverage (%)",
          "error / svdb", {k: (xs, [r[k] for r in rows]) for k in ("lsa", "wavelet", "hierarchical", "identity")},
          logx=True, logy=True)  # fmt: skip
    return rows


def figure_3c(out: Path, sides: Sequence[int], full_lsa_side: int) -> list[dict[str, Any]]:
    """Fig 3(c): separation on range queries over both one-way marginals of a d x d grid."""
    rows: list[dict[str, Any]] = []
    for d in sides:
        w = marginal_ranges((d, d))
        bound = svdb(w.gram)
        parts = [(0, allrange_gram_1d(d)), (1, allrange_gram_1d(d))]
        start = time.perf_counter()
        sep = separated_lsa(parts, (d, d))
        seconds = time.perf_counter() - start
        row: dict[str, Any] = {
            "d": d, "svdb": bound, "separated": _ratio(w, sep.strategy.operator, bound),
            "separated_seconds": seconds, "full_lsa": "", "full_lsa_seconds": "",
            "wavelet": _ratio(w, kron([wavelet(d), wavelet(d)]).operator, bound),
        }  # fmt: skip
        if d <= full_lsa_side:
            r, full_seconds = _lsa(w)
            row["full_lsa"], row["full_lsa_seconds"] = r.error / bound, full_seconds
        rows.append(row)
    _write(out, "figure_3c", rows)
    _plot(out / "figure_3c.png", "separation: ranges over both marginals of d x d", "d",
          "error / svdb", _series(rows, "d", ("separated", "full_lsa", "wavelet")), logx=True)  # fmt: skip
    return rows


def figure_3d(out: Path, sizes: Sequence[int], full_lsa_n: int) -> list[dict[str, Any]]:
    """Fig 3(d): generalization vs full LSA on skew-sampled 1-D workloads."""
    rows: list[dict[str, Any]] = []
    for n in sizes:
        m = min(2000, n * (n + 1) // 10)
        w = random_ranges(m, (n,), seed=1, bias="extremes")
        bound = svdb(w.gram)
        g = w.gram.dense()
        start = time.perf_counter()
        gen = generalized_lsa(g, n)
        seconds = time.perf_counter() - start
        row: dict[str, Any] = {
            "n": n, "queries": m, "blocks": gen.m, "generalized": _ratio(w, gen.strategy.operator, bound),
            "generalized_seconds": seconds, "full_lsa": "", "full_lsa_seconds": "",
            "wavelet": _ratio(w, wavelet(n).operator, bound),
        }  # fmt: skip
        if n <= full_lsa_n:
            r, full_seconds = _lsa(w)
            row["full_lsa"], row["full_lsa_seconds"] = r.error / bound, full_seconds
        rows.append(row)
    _write(out, "figure_3d", rows)
    _plot(out / "figure_3d.png", "generalization: skew-sampled 1-D ranges", "n", "error / svdb",
          _series(rows, "n", ("generalized", "full_lsa", "wavelet")), logx=True)  # fmt: skip
    return rows


def dpbench(
    out: Path, data_dir: Path, shape_1d: int, shape_2d: tuple[int, int], repeats: int, lsa_1d: bool
) -> list[dict[str, Any]]:
    """Measured vs analytic total squared error of releases on DPBench histograms."""
    rows: list[dict[str, Any]] = []
    files_1d = ["HEPTH.n4096.npy", "NETTRACE.n4096.npy", "SEARCHLOGS.n4096.npy"]
    files_2d = ["Adult_2D_256_256.npy", "BeijingTaxiE_256_256.npy"]
    cases: list[tuple[str, tuple[int, ...], list[str], list[str]]] = []
    for f in files_1d:
        cases.append((f"1D/{f}", (shape_1d,), [f"allrange:{shape_1d}", f"prefix:{shape_1d}",
                      f"random-range:2000:{shape_1d}"],
                      ["identity", "hierarchical", "wavelet", "eigen", *(["lsa"] if lsa_1d else [])]))  # fmt: skip
    for f in files_2d:
        dims2 = "x".join(map(str, shape_2d))
        cases.append((f"2D/{f}", shape_2d, [f"allrange:{dims2}", f"random-range:2000:{dims2}"],
                      ["identity", "hierarchical", "wavelet"]))  # fmt: skip
    built: dict[tuple[str, str], Strategy] = {}
    for case_index, (rel, dims, workloads, strategies) in enumerate(cases):
        path = data_dir / "dpbench" / rel
        if not path.is_file():
            print(f"skipping {path} (not found)")
            continue
        counts = coarsen(np.rint(np.load(path)).astype(np.int64), dims)
        axes = [
            {"name": f"x{i}", "kind": "ordinal", "range": [0, d - 1], "width": 1}
            for i, d in enumerate(dims)
        ]
        schema = Schema.from_dict({"attributes": axes})
        hist = Histogram(schema, counts)
        for spec in workloads:
            w = parse_workload(spec)
            for name in strategies:
                if (spec, name) not in built:
                    built[spec, name] = make_strategy(name, dims, w)
                for delta in (None, 1e-6):
                    mech = MatrixMechanism(1.0, delta=delta, strategy=built[spec, name], workload=w)
                    errors = []
                    analytic = math.nan
                    for seed in range(repeats):
                        # Distinct seeds per data set: the noise does not depend on the data.
                        r = mech.release(hist, random_state=1000 * case_index + seed)
                        assert isinstance(r, CellRelease)
                        e = (np.asarray(r.counts) - counts).ravel()
                        errors.append(float(e @ w.gram.matvec(e)))
                        analytic = r.metadata.noise["expected_total_squared_error"]
                    mean = float(np.mean(errors))
                    rows.append({
                        "dataset": rel, "cells": "x".join(map(str, dims)), "records": int(counts.sum()),
                        "workload": spec, "strategy": name, "noise": "gaussian" if delta else "laplace",
                        "analytic": analytic, "measured": mean, "measured_over_analytic": mean / analytic,
                        "stderr_rel": float(np.std(errors, ddof=1) / math.sqrt(repeats) / analytic),
                    })  # fmt: skip
    if rows:
        _write(out, "dpbench", rows)
    return rows


def _plot(path: Path, title: str, xlabel: str, ylabel: str, series: dict[str, tuple[list[Any], list[Any]]],
          logx: bool = False, logy: bool = False) -> None:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, (xs, ys) in series.items():
        ax.plot(xs, ys, marker="o", markersize=3, label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def _series(
    rows: list[dict[str, Any]], x: str, keys: Sequence[str]
) -> dict[str, tuple[list[Any], list[Any]]]:
    """Line-plot series from table rows, leaving out the cells that were not computed ("")."""
    return {
        key: (
            [r[x] for r in rows if r.get(key, "") != ""],
            [r[key] for r in rows if r.get(key, "") != ""],
        )
        for key in keys
    }


def _bars(
    path: Path, title: str, rows: list[dict[str, Any]], group: str, keys: Sequence[str]
) -> None:
    """Grouped bars of error/svdb per row (svdb itself is the line at 1), like the paper's Fig 3(a)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        xs = [j + i * width for j, r in enumerate(rows) if r.get(key, "") != ""]
        ys = [r[key] for r in rows if r.get(key, "") != ""]
        ax.bar(xs, ys, width=width, label=key)
    ax.axhline(1.0, color="grey", linewidth=1, label="svdb")
    ax.set_xticks(
        [j + 0.4 - width / 2 for j in range(len(rows))], [str(r[group]) for r in rows], fontsize=7
    )
    ax.set_ylabel("error / svdb")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def _check_solver() -> None:
    """Fail fast if the Kronecker solver and the dense one disagree (a corrupted install)."""
    w = allrange((4, 4))
    a = kron([hierarchical(4), wavelet(4)]).operator
    dense = GramSolver.for_strategy(Explicit(a.dense())).trace_with(w.gram)
    assert math.isclose(dense, GramSolver.for_strategy(a).trace_with(w.gram), rel_tol=1e-9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.matrix",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--out", required=True, help="directory for the CSV tables and PNG plots")
    parser.add_argument("--data-dir", default=None, help="shared data directory (holds dpbench/)")
    parser.add_argument("--quick", action="store_true", help="small domains (smoke run, seconds)")
    parser.add_argument(
        "--full", action="store_true", help="add the long LSA runs (several minutes each)"
    )
    parser.add_argument(
        "--parts",
        default="all",
        help="comma-separated: example31,fig1,fig2,fig3a,fig3b,fig3c,fig3d,ties,dpbench",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(",")) if args.parts != "all" else {
        "example31", "fig1", "fig2", "fig3a", "fig3b", "fig3c", "fig3d", "ties", "dpbench"}  # fmt: skip
    _check_solver()
    q = args.quick
    if "example31" in parts:
        example_3_1(out, full=args.full)
    if "fig1" in parts:
        figure_1(out, 64 if q else 512)
    if "fig2" in parts:
        domains = [(256,), (16, 16)] if q else [(1024,), (32, 32), (16, 8, 8)]
        figure_2(out, domains, [100, 1000] if q else [100, 300, 1000, 3000, 10000])
    if "fig3a" in parts:
        domains = (
            [(64,), (8, 8), (4, 4, 4), (2,) * 6]
            if q
            else [(1024,), (32, 32), (16, 8, 8), (4,) * 5, (2,) * 10]
        )
        figure_3a(out, domains, lsa_cells=64 if q else (1024 if args.full else 16))
    if "fig3b" in parts:
        coverages = [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75]
        figure_3b(out, 64 if q else 256, 300 if q else 2000, coverages)
    if "fig3c" in parts:
        figure_3c(
            out, [4, 8] if q else [4, 8, 16, 32], full_lsa_side=4 if q else (32 if args.full else 8)
        )
    if "fig3d" in parts:
        figure_3d(
            out,
            [64] if q else [64, 256, 1024],
            full_lsa_n=64 if q else (1024 if args.full else 256),
        )
    if "ties" in parts:
        small = [(2, 2, 2, 2), (4, 4, 4)] if q else [(4, 4, 4), (8, 8), (16, 16), (8, 8, 8)]
        lsa_ties(out, small + ([(32, 32), (16, 8, 8)] if args.full else []))
    if "dpbench" in parts:
        data_dir = Path(args.data_dir) if args.data_dir else _default_data_dir()
        if data_dir is None:
            print("no data directory: skipping the DPBench part (give --data-dir)")
        else:
            dpbench(
                out,
                data_dir,
                64 if q else 256,
                (16, 16) if q else (32, 32),
                3 if q else 30,
                lsa_1d=True,
            )
    return 0


def _default_data_dir() -> Path | None:
    import os

    env = os.environ.get("DPCUBE_DATA_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent.parent / "shared" / "data"
        if (parent / "pyproject.toml").is_file() and candidate.is_dir():
            return candidate
    return None


__all__ = [
    "dpbench",
    "example_3_1",
    "figure_1",
    "figure_2",
    "figure_3a",
    "figure_3b",
    "figure_3c",
    "figure_3d",
    "main",
]


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
