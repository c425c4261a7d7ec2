"""``python -m experiments.census``: the paper's Figures 7-9 and Table 7 (Fioretto, Van Hentenryck and
Zhu, AI 2021, Sec. 11).

Data sets: (a) the synthetic census stand-in (``--scale``), (b) IPUMS CPS households
(nation -> 51 states, sizes 1..7+ from the person records), (c) a taxi-like set from the NIST
Chicago taxi trips: a group is a (company, shift) pair, its size the number of its trips, its
leaf the community area of most pickups, under city -> 9 sides -> community areas.

Outputs under ``--out``: ``census_runs.csv`` (one row per data set, method, epsilon, seed),
``census_table7.csv`` (means per level with ``<column>_se`` standard errors over the seeds),
``census_scaling.csv`` (runtime vs k, with the solver, its status and objective), PNG plots.

``--full`` runs 10 seeds (quick default: 3); the relaxed programs run on Clarabel
(``--qp-solver highs`` for the active-set cross-check); ``qip`` / ``qip_cumulative`` are the exact
programs M_H / M_C as HiGHS MIPs (Figure 7; add them to ``--methods`` at small k).
"""

from __future__ import annotations

import argparse
import gzip
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.mechanism import CensusHierarchy
from dpcube.mechanisms.census.release import CensusRelease
from dpcube.mechanisms.census.table import GroupSizeTable
from experiments.census_generator import census_table
from experiments.census_metrics import level_errors, violations
from experiments.repetitions import format_mean_se, mean_se_table, repetitions

#: Chicago community areas by "side" (approximate grouping; 0 = unknown area).
SIDES = {
    "Central": [8, 32, 33], "North": [5, 6, 7, 21, 22],
    "FarNorth": [1, 2, 3, 4, 9, 10, 11, 12, 13, 14, 76, 77], "Northwest": [15, 16, 17, 18, 19, 20],
    "West": list(range(23, 32)), "South": [*range(34, 44), 60, 69], "Southwest": [*range(56, 60), *range(61, 69)],
    "FarSoutheast": list(range(44, 56)), "FarSouthwest": list(range(70, 76)), "Unknown": [0],
}  # fmt: skip
METHODS = ("qp", "dp", "qp_cumulative", "cdp_approx", "cdp", "topdown")
#: Who makes G public for the paper's data sets: the benchmark, reproducing the paper's setting.
PAPER_SETTING = "the paper's setting (G public), reproduced by the benchmark"
#: Columns of the solver's own figures copied from a release's metadata into a run row.
SOLVER_FIELDS = ("solver", "solver_status", "solver_seconds", "relaxed_objective", "objective", "mip_bound", "mip_certified")  # fmt: skip


def ipums_table(folder: Path) -> GroupSizeTable:
    """Households of IPUMS CPS (fixed width; H: STATEFIP cols 38-39; P records follow their H),
    sizes 1..7+ (top-coded), under nation -> states. Households without persons are skipped."""
    sizes: dict[str, list[int]] = {}
    state, members = "", 0
    with gzip.open(folder / "cps_00421.dat.gz", "rt") as f:
        for line in f:
            if line[0] == "H":
                if members:
                    sizes.setdefault(state, [0] * 7)[min(members, 7) - 1] += 1
                state, members = line[37:39], 0
            elif line[0] == "P":
                members += 1
    if members:
        sizes.setdefault(state, [0] * 7)[min(members, 7) - 1] += 1
    h = RegionHierarchy.from_parents({f"ST{s}": "US" for s in sizes})
    leaf = np.array([sizes[n[2:]] for n in h.names[1:]], dtype=np.int64)
    return GroupSizeTable(h, h.aggregate(leaf), top_coded=True).declare_public_groups(
        how=PAPER_SETTING
    )


def taxi_table(folder: Path) -> GroupSizeTable:
    """Groups = (company_id, shift); size = trips; leaf = community area of most pickups."""
    import duckdb

    with zipfile.ZipFile(folder / "nist-taxi.zip") as z, z.open("nist-taxi.csv") as f:
        import pandas as pd

        df = pd.read_csv(f, usecols=["company_id", "shift", "pickup_community_area"])
    con = duckdb.connect()
    con.register("trips", df)
    frame = con.sql(
        "WITH g AS (SELECT company_id, shift, pickup_community_area AS area, count(*) AS n FROM trips GROUP BY ALL), "
        "u AS (SELECT company_id, shift, sum(n) AS size, arg_max(area, n) AS area FROM g GROUP BY ALL) "
        "SELECT 'A' || CAST(area AS VARCHAR) AS region, size, count(*) AS count FROM u GROUP BY ALL"
    ).df()
    con.close()
    parents: dict[str, str | None] = {"Chicago": None}
    for side, areas in SIDES.items():
        parents[side] = "Chicago"
        for a in areas:
            parents[f"A{a}"] = side
    return GroupSizeTable.from_frame(
        frame, RegionHierarchy.from_parents(parents), max_size=int(frame["size"].max())
    ).declare_public_groups(how=PAPER_SETTING)


def run_one(
    table: GroupSizeTable,
    method: str,
    epsilon: float,
    seed: int,
    noise_mode: str,
    qp_time_limit: float,
    qp_solver: str = "clarabel",
    qp_tolerance: float = 1e-8,
) -> dict[str, Any]:
    mech = CensusHierarchy(
        epsilon,
        method=method,
        noise_mode=noise_mode,
        qp_time_limit=qp_time_limit,
        qp_solver=qp_solver,
        qp_tolerance=qp_tolerance,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    r = mech.release(table, random_state=seed)
    assert isinstance(r, CensusRelease)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    row: dict[str, Any] = {
        "method": method, "noise_mode": noise_mode, "private": r.metadata.noise["private"], "epsilon": epsilon, "seed": seed,
        "seconds": wall, "cpu_seconds": cpu, "postprocess_seconds": r.metadata.noise["postprocess_seconds"],
    }  # fmt: skip
    row.update({f: r.metadata.noise.get(f, "") for f in SOLVER_FIELDS})
    row.update(
        {f"cv_{k}": v for k, v in violations(table.hierarchy, r.values, table.groups).items()}
    )
    for e in level_errors(table.hierarchy, r.values, table.counts):
        row.update(
            {
                f"L{e['level']}_l1": e["l1"],
                f"L{e['level']}_mean": e["mean_cell"],
                f"L{e['level']}_l1_over_k": e["l1_over_k"],
            }
        )
    return row


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    p = argparse.ArgumentParser(prog="python -m experiments.census", description=__doc__)
    p.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--scale", type=float, default=0.01, help="synthetic census scale (1 = 117.6M groups)"
    )
    p.add_argument("--max-size", type=int, default=1000, help="k of the synthetic census")
    p.add_argument("--epsilons", default="0.1,0.5,1.0")
    p.add_argument(
        "--seeds", type=int, default=None, help="seeds per setting (default 3; --full: 10)"
    )
    p.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds run are first-seed .. first-seed + seeds - 1 (to split a --full run)",
    )
    p.add_argument("--full", action="store_true", help="the full repetition count (10 seeds)")
    p.add_argument("--qp-solver", default="clarabel", choices=("clarabel", "highs"))
    p.add_argument(
        "--qp-tolerance", type=float, default=1e-8, help="Clarabel's gap/feasibility tolerance"
    )
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--datasets", default="synthetic,ipums,taxi")
    p.add_argument("--qp-time-limit", type=float, default=60.0)
    p.add_argument(
        "--scaling-ks",
        default="10,50,100,500,1000",
        help="k values of the runtime-vs-k figure ('' to skip)",
    )
    args = p.parse_args(argv)
    args.seeds, why = plan(args)
    print(f"seeds per setting: {args.seeds} ({why})", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    methods = [m for m in args.methods.split(",") if m]
    tables: dict[str, GroupSizeTable] = {}
    for name in args.datasets.split(","):
        if name == "synthetic":
            tables["synthetic stand-in"] = census_table(
                scale=args.scale, max_size=args.max_size, seed=0
            )
        elif name == "ipums" and (args.data_dir / "ipums_cps").is_dir():
            tables["IPUMS CPS"] = ipums_table(args.data_dir / "ipums_cps")
        elif name == "taxi" and (args.data_dir / "nist_taxi").is_dir():
            tables["NIST taxi"] = taxi_table(args.data_dir / "nist_taxi")
    rows = []
    for dname, table in tables.items():
        print(
            f"{dname}: regions {table.hierarchy.level_sizes}, k = {table.max_size}, G = {table.groups}",
            flush=True,
        )
        for eps in epsilons:
            for method in methods:
                modes = (
                    ["private_postprocessed", "as_published"]
                    if method == "cdp"
                    else ["private_postprocessed"]
                )
                for mode in modes:
                    for seed in range(args.first_seed, args.first_seed + args.seeds):
                        row = run_one(
                            table,
                            method,
                            eps,
                            seed,
                            mode,
                            args.qp_time_limit,
                            args.qp_solver,
                            args.qp_tolerance,
                        )
                        rows.append({"dataset": dname, **row})
                    last = rows[-1]
                    print(
                        f"  eps={eps} {method:14s} {mode:22s} {last['seconds']:8.2f}s  L1 {last['L1_l1_over_k']:.2f}  #CV {last['cv_consistency']}",
                        flush=True,
                    )
    summary = pd.DataFrame()
    written: list[Path] = []
    if rows:
        runs = pd.DataFrame(rows)
        runs.to_csv(args.out / "census_runs.csv", index=False)
        written.append(args.out / "census_runs.csv")
        cols = [
            c
            for c in runs.columns
            if c.startswith(("L", "cv_")) or c in ("seconds", "cpu_seconds", "postprocess_seconds")
        ]
        keys = ["dataset", "epsilon", "method", "noise_mode", "private"]
        summary = mean_se_table(runs, keys, cols)
        summary.to_csv(args.out / "census_table7.csv", index=False)
        written.append(args.out / "census_table7.csv")
        (args.out / "census_table7.md").write_text(table7_markdown(summary))
        written.append(args.out / "census_table7.md")
    scaling = []
    for k in [int(x) for x in args.scaling_ks.split(",") if x]:
        t = census_table(scale=args.scale, max_size=k, seed=0)
        for method in methods:
            row = run_one(
                t,
                method,
                1.0,
                0,
                "private_postprocessed",
                args.qp_time_limit,
                args.qp_solver,
                args.qp_tolerance,
            )
            scaling.append({"k": k, **row})
            print(
                f"  k={k:5d} {method:14s} {row['seconds']:8.2f}s ({row['cpu_seconds']:.2f} s CPU) "
                f"{row['solver_status']} "
                f"objective {row['relaxed_objective'] or row['objective']}",
                flush=True,
            )
    if scaling:
        pd.DataFrame(scaling).to_csv(args.out / "census_scaling.csv", index=False)
        written.append(args.out / "census_scaling.csv")
    written += _plots(summary, pd.DataFrame(scaling), args.out)
    print(written_line(written))
    return 0


LABELS = {
    "qp": "M̄_H (relaxed QP)", "dp": "M_DP", "qp_cumulative": "M̄_C (relaxed QP)",
    "cdp_approx": "M_CDP^≈", "cdp": "M_CDP", "topdown": "TopDown", "qip": "M_H (MIP)",
    "qip_cumulative": "M_C (MIP)",
}  # fmt: skip


def table7_markdown(summary: Any) -> str:
    """The Table 7 analogue as markdown: per level, mean ± standard error over the seeds of the
    (1/k)-normalised l1 error; #CV and seconds (wall and CPU) as means.

    >>> import pandas as pd
    >>> row = {"dataset": "d", "epsilon": 1.0, "method": "dp", "noise_mode": "private_postprocessed",
    ...        "L1_l1_over_k": 2.0, "L1_l1_over_k_se": 0.5, "cv_consistency": 0.0,
    ...        "seconds": 1.0, "cpu_seconds": 0.5, "runs": 4}
    >>> print(table7_markdown(pd.DataFrame([row])).splitlines()[-1])
    | d | 1.0 | M_DP | 2.00 ± 0.50 | 0 | 1.00 | 0.50 | 4 |
    """
    levels = sorted(
        int(c[1]) for c in summary.columns if c.endswith("_l1_over_k") and c[1].isdigit()
    )
    head = [
        "data",
        "ε",
        "mechanism",
        *[f"L{lv}" for lv in levels],
        "#CV",
        "seconds",
        "CPU s",
        "seeds",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summary.to_dict("records"):
        name = LABELS.get(r["method"], r["method"])
        if r["method"] == "cdp":
            name += " as_published (NOT ε-DP)" if r["noise_mode"] == "as_published" else " private"
        errs = [
            format_mean_se(r[f"L{lv}_l1_over_k"], r.get(f"L{lv}_l1_over_k_se", float("nan")))
            for lv in levels
        ]
        cells = [str(r["dataset"]), str(r["epsilon"]), name, *errs, f"{r['cv_consistency']:.0f}",
                 f"{r['seconds']:.2f}", f"{r['cpu_seconds']:.2f}", str(r["runs"])]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plan(args: argparse.Namespace) -> tuple[int, str]:
    """Seeds per setting: ``--seeds`` if given, else 10 with ``--full``, else 3.

    >>> plan(argparse.Namespace(seeds=None, full=True))[0]
    10
    """
    return repetitions("census", bool(args.full), args.seeds)


def written_line(paths: list[Path]) -> str:
    """What a run wrote, file by file, so that no file is claimed that was not written.

    >>> written_line([])
    'wrote nothing (no data set, method or k selected)'
    >>> written_line([Path("out/a.csv"), Path("out/b.png")])
    'wrote out/a.csv, out/b.png'
    """
    if not paths:
        return "wrote nothing (no data set, method or k selected)"
    return "wrote " + ", ".join(str(p) for p in paths)


def _plots(summary: Any, scaling: Any, out: Path) -> list[Path]:
    """The runtime and error figures; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    for dname, part in summary.groupby("dataset") if len(summary) else []:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for (method, mode), g in part.groupby(["method", "noise_mode"]):
            label = f"{method} (NOT DP)" if mode == "as_published" else method
            axes[0].plot(g["epsilon"], g["seconds"], marker="o", label=label)
            axes[1].plot(g["epsilon"], g["L2_l1_over_k"], marker="o", label=label)
        axes[0].set(xlabel="epsilon", ylabel="seconds", yscale="log", title=f"{dname}: runtime")
        axes[1].set(
            xlabel="epsilon", ylabel="level-2 L1 / k", yscale="log", title=f"{dname}: error"
        )
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / f"census_{dname.split()[0].lower()}.png", dpi=90)
        written.append(out / f"census_{dname.split()[0].lower()}.png")
        plt.close(fig)
    if len(scaling):
        fig, ax = plt.subplots(figsize=(5, 4))
        for method, g in scaling.groupby("method"):
            ax.plot(g["k"], g["seconds"], marker="o", label=method)
        ax.set(
            xlabel="number of group sizes k",
            ylabel="seconds",
            xscale="log",
            yscale="log",
            title="synthetic: runtime vs k (eps=1)",
        )
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "census_scaling.png", dpi=90)
        written.append(out / "census_scaling.png")
        plt.close(fig)
    return written


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
