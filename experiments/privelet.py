"""``python -m experiments.privelet``: the experiments of Xiao, Wang, Gehrke (ICDE 2010), Sec. VII.

- Figs. 6/7: average square error vs query coverage, Basic vs Privelet+, epsilon in
  {0.5, 0.75, 1, 1.25}; on the real census extracts (ACS persons, Brazil 2000) by releasing, and on
  the paper's own Table III domains (m ~ 1e8) by the exact closed form (the error of these
  mechanisms does not depend on the data (Xiao, Wang and Gehrke, ICDE 2010,
  Thm. 3), so the expected square error of a query is
  its variance).
- Figs. 8/9: average relative error vs query selectivity on the real data (data-dependent).
- Figs. 10/11: computation time vs n (rows, from a Parquet file) and vs m (cells), synthetic data
  as in Sec. VII-C (2 ordinal + 2 nominal attributes of size m^(1/4), uniform tuples).

Queries follow the paper's Sec. VII: 1 to 4 predicates on distinct random attributes; an ordinal predicate is
the interval between two uniform end points; a nominal one is a uniform non-root node of the
hierarchy. Queries are bucketed into five equal-count groups by rank of coverage or selectivity
(Sec. VII). Outputs (CSV, PNG, ``summary.md``) go to ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube import progress
from dpcube.errors import DataError
from dpcube.histogram import Histogram, histogram
from dpcube.mechanisms.base import Mechanism
from dpcube.mechanisms.identity import Identity
from dpcube.mechanisms.privelet.mechanism import Privelet, PriveletPlus, PriveletVariance
from dpcube.release.cells import CellRelease, box_sums, prefix_sums
from dpcube.schema import Hierarchy, Nominal, Ordinal, Schema
from experiments.repetitions import repetitions, standard_error

EPSILONS = (0.5, 0.75, 1.0, 1.25)
METHODS: dict[str, Callable[[float], Mechanism]] = {
    "Basic": lambda eps: Identity(eps, neighbour="replace"),
    "Privelet+": lambda eps: PriveletPlus(eps, neighbour="replace"),
    "Privelet": lambda eps: Privelet(eps, neighbour="replace"),
}


# ------------------------------------------------------------------------------------------------
# Schemas and data
# ------------------------------------------------------------------------------------------------


def grouped_hierarchy(leaves: Sequence[str], groups: int) -> Hierarchy:
    """Three levels: a root over ``groups`` near-equal groups of consecutive leaves (as the paper's
    Sec. VII groups its nominal attributes)."""
    n = len(leaves)
    sizes = [n // groups + (1 if i < n % groups else 0) for i in range(groups)]
    tree: dict[str, list[str]] = {}
    start = 0
    for g, size in enumerate(sizes):
        tree[f"group{g}"] = list(leaves[start : start + size])
        start += size
    return Hierarchy.from_mapping(tree)


def table3_schema(country: str) -> Schema:
    """The paper's Table III domains (Age, Gender, Occupation with 3 levels, Income)."""
    age, occupations, income = {"brazil": (101, 512, 1001), "us": (96, 511, 1020)}[country]
    occ = [str(i) for i in range(occupations)]
    return Schema(
        (
            Ordinal.from_range("age", 0, age - 1, 1),
            Nominal.build("gender", ["F", "M"]),
            Nominal.build("occupation", occ, grouped_hierarchy(occ, round(math.sqrt(occupations)))),
            Ordinal.from_range("income", 0, income - 1, 1),
        )
    )


def load_acs(data_dir: Path) -> tuple[Schema, Histogram]:
    """ACS persons (acs_temporal): AGE, SEX, PUMA, INCTOT.

    The extract has no occupation; PUMA (181 areas) stands in for the large nominal attribute,
    with a 3-level hierarchy of 13 groups of consecutive area codes (about the square root of the number of areas).
    """
    import pandas as pd

    folder = data_dir / "acs_temporal"
    try:
        domain = json.loads((folder / "temporal-match2-domain.json").read_text())
        with zipfile.ZipFile(folder / "temporal-match2.zip") as z:
            frame = pd.read_csv(
                io.BytesIO(z.read(z.namelist()[0])), usecols=["AGE", "SEX", "PUMA", "INCTOT"]
            )
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise DataError(f"cannot read the ACS extract under {str(folder)!r}: {exc}") from None
    puma = [str(i) for i in range(domain["PUMA"])]
    schema = Schema(
        (
            Ordinal.from_range("age", 0, domain["AGE"] - 1, 1, column="AGE"),
            Nominal.build("sex", [str(i) for i in range(domain["SEX"])], column="SEX"),
            Nominal.build(
                "puma", puma, grouped_hierarchy(puma, round(math.sqrt(len(puma)))), column="PUMA"
            ),
            Ordinal.from_range("income", 0, domain["INCTOT"] - 1, 1, column="INCTOT"),
        )
    )
    return schema, histogram(frame, schema)


def _br_tree(node: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {str(v): None for v in node["value_list"]}
    for child in node["node_list"]:
        tree[f"n{child['name']}"] = _br_tree(child)
    return tree


def load_br2000(data_dir: Path) -> tuple[Schema, Histogram]:
    """Brazil 2000 census extract (br2000). Its 14 columns are unnamed codes; by their domains and
    hierarchies we use column 2 (values 0..21, ordered) for Age, 0 for Gender, 3 (10 values with a
    4-level hierarchy, from br2000_hierarchy.json) for Occupation and 4 (values 0..15) for Income.
    """
    import pandas as pd

    folder = data_dir / "br2000"
    try:
        frame = pd.read_csv(folder / "br2000.csv", usecols=["0", "2", "3", "4"])
        hierarchy = json.loads((folder / "br2000_hierarchy.json").read_text())
    except OSError as exc:
        raise DataError(
            f"cannot read the Brazil 2000 extract under {str(folder)!r}: {exc}"
        ) from None
    occupation = Hierarchy.from_mapping(_br_tree(hierarchy[3]))
    schema = Schema(
        (
            Ordinal.from_range("age", 0, 21, 1, column="2"),
            Nominal.build("gender", ["0", "1"], column="0"),
            Nominal.build("occupation", None, occupation, column="3"),
            Ordinal.from_range("income", 0, 15, 1, column="4"),
        )
    )
    return schema, histogram(frame, schema)


# ------------------------------------------------------------------------------------------------
# Queries and metrics
# ------------------------------------------------------------------------------------------------


def _choices(attribute: Any) -> NDArray[np.int64]:
    """Admissible intervals of a nominal attribute: every non-root node (or every leaf)."""
    if attribute.hierarchy is None:
        n = len(attribute.categories)
        return np.stack([np.arange(n), np.arange(n)], axis=1)
    h = attribute.hierarchy
    return np.array([h.interval(node) for node in h.nodes if node != h.root], dtype=np.int64)


def random_boxes(schema: Schema, count: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Random range-count queries of the paper's Sec. VII, as boxes (count, d, 2); single-axis attributes."""
    d = len(schema.attributes)
    shape = schema.shape
    boxes = np.zeros((count, d, 2), dtype=np.int64)
    boxes[:, :, 1] = np.array(shape) - 1
    predicates = rng.integers(1, min(4, d) + 1, size=count)
    order = np.argsort(rng.random((count, d)), axis=1)
    chosen = np.arange(d)[None, :] < predicates[:, None]
    for k, attribute in enumerate(schema.attributes):
        rows = np.flatnonzero(chosen[np.arange(count), np.argsort(order, axis=1)[:, k]])
        if isinstance(attribute, Nominal):
            options = _choices(attribute)
            boxes[rows, k] = options[rng.integers(0, len(options), size=rows.size)]
        else:
            ends = np.sort(rng.integers(0, shape[k], size=(rows.size, 2)), axis=1)
            boxes[rows, k] = ends
    return boxes


def coverage(schema: Schema, boxes: NDArray[np.int64]) -> NDArray[np.float64]:
    """Fraction of the cells a query covers: ``prod |S_i| / |A_i|`` (Sec. VII)."""
    sizes = boxes[:, :, 1] - boxes[:, :, 0] + 1
    return np.asarray(np.prod(sizes / np.array(schema.shape)[None, :], axis=1), dtype=np.float64)


def quintiles(key: NDArray[np.float64], groups: int = 5) -> list[NDArray[np.int64]]:
    """Equal-count groups by rank of ``key`` (stable sort; the coverage quintiles of Sec. VII)."""
    return [np.asarray(g) for g in np.array_split(np.argsort(key, kind="stable"), groups)]


@dataclass
class Evaluation:
    """Per-query errors of one method at one epsilon: one row per run (``*_runs``), their mean
    over the runs (``square``, ``relative``) and the closed-form expectation."""

    square: NDArray[np.float64]
    relative: NDArray[np.float64]
    expected: NDArray[np.float64]
    square_runs: NDArray[np.float64]
    relative_runs: NDArray[np.float64]

    def square_se(self, group: NDArray[np.int64]) -> float:
        """Standard error (over the runs) of the mean square error of the queries in ``group``."""
        return standard_error(self.square_runs[:, group].mean(axis=1).tolist())

    def relative_se(self, group: NDArray[np.int64]) -> float:
        """Standard error (over the runs) of the mean relative error of ``group``."""
        return standard_error(self.relative_runs[:, group].mean(axis=1).tolist())


def evaluate(
    hist: Histogram,
    mechanism: Mechanism,
    boxes: NDArray[np.int64],
    runs: int,
    seed: int,
    sanity: float,
) -> Evaluation:
    """Release ``runs`` times (seeded: for experiments only) and measure every query."""
    truth = box_sums(prefix_sums(hist.counts), boxes).astype(np.float64)
    square = np.zeros((runs, len(boxes)))
    relative = np.zeros((runs, len(boxes)))
    expected = np.full(len(boxes), np.nan)
    for run in range(runs):
        release = mechanism.release(hist, random_state=seed + run)
        assert isinstance(release, CellRelease)
        answers = box_sums(prefix_sums(np.asarray(release.counts, dtype=np.float64)), boxes)
        square[run] = (answers - truth) ** 2
        relative[run] = np.abs(answers - truth) / np.maximum(truth, sanity)
        if release.variance_model is not None:
            expected = release.variance_model.variance_many(boxes)
    return Evaluation(square.mean(axis=0), relative.mean(axis=0), expected, square, relative)


def expected_square_error(
    schema: Schema, mechanism: PriveletPlus, boxes: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Closed-form expected square error (= variance, Thm. 3) without data or release.

    Uses the Laplace variance ``2 lambda**2`` (continuous; the released noise differs by < 1e-5).
    """
    plan = mechanism.plan(schema)
    lam = plan.noise_scale(mechanism.epsilon)
    return PriveletVariance(2 * lam**2, plan.axes).variance_many(boxes)


# ------------------------------------------------------------------------------------------------
# Experiments
# ------------------------------------------------------------------------------------------------


def accuracy_on_data(
    name: str, schema: Schema, hist: Histogram, queries: int, runs: int, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Figs. 6-9 on one data set: rows for square_error.csv and relative_error.csv."""
    rng = np.random.default_rng(seed)
    boxes = random_boxes(schema, queries, rng)
    truth = box_sums(prefix_sums(hist.counts), boxes).astype(np.float64)
    n = hist.total
    cov = coverage(schema, boxes)
    sel = truth / n
    sanity = 0.001 * n
    square_rows: list[dict[str, Any]] = []
    relative_rows: list[dict[str, Any]] = []
    for eps in progress.track(EPSILONS, f"{name}: epsilons"):
        for method, make in METHODS.items():
            mech = make(eps)
            result = evaluate(hist, mech, boxes, runs, seed + 1000, sanity)
            plain = ",".join(mech.plan(schema).plain) if isinstance(mech, PriveletPlus) else "all"
            for q, group in enumerate(quintiles(cov)):
                square_rows.append(
                    {
                        "dataset": name,
                        "epsilon": eps,
                        "method": method,
                        "plain_attributes": plain,
                        "quintile": q + 1,
                        "avg_coverage": float(cov[group].mean()),
                        "mean_square_error": float(result.square[group].mean()),
                        "mean_square_error_se": result.square_se(group),
                        "expected_square_error": float(result.expected[group].mean()),
                    }
                )
            for q, group in enumerate(quintiles(sel)):
                relative_rows.append(
                    {
                        "dataset": name,
                        "epsilon": eps,
                        "method": method,
                        "quintile": q + 1,
                        "avg_selectivity": float(sel[group].mean()),
                        "mean_relative_error": float(result.relative[group].mean()),
                        "mean_relative_error_se": result.relative_se(group),
                    }
                )
    return square_rows, relative_rows


def accuracy_table3(country: str, queries: int, seed: int) -> list[dict[str, Any]]:
    """Figs. 6/7 on the paper's Table III domain, exactly (closed form, no release)."""
    schema = table3_schema(country)
    boxes = random_boxes(schema, queries, np.random.default_rng(seed))
    cov = coverage(schema, boxes)
    rows: list[dict[str, Any]] = []
    methods: dict[str, Callable[[float], PriveletPlus]] = {
        "Basic": lambda eps: PriveletPlus(eps, plain_attributes=list(schema.names)),
        "Privelet+": lambda eps: PriveletPlus(eps),
        "Privelet": lambda eps: Privelet(eps),
    }
    for eps in EPSILONS:
        for method, make in methods.items():
            mech = make(eps)
            expected = expected_square_error(schema, mech, boxes)
            for q, group in enumerate(quintiles(cov)):
                rows.append(
                    {
                        "dataset": f"table3-{country}",
                        "epsilon": eps,
                        "method": method,
                        "plain_attributes": ",".join(mech.plan(schema).plain) or "none",
                        "quintile": q + 1,
                        "avg_coverage": float(cov[group].mean()),
                        "mean_square_error": float("nan"),
                        "expected_square_error": float(expected[group].mean()),
                    }
                )
    return rows


def timing_schema(m: int) -> Schema:
    """Sec. VII-C: 2 ordinal + 2 nominal attributes of size round(m^(1/4))."""
    k = round(m**0.25)
    leaves = [str(i) for i in range(k)]
    tree = grouped_hierarchy(leaves, max(1, round(math.sqrt(k))))
    return Schema(
        (
            Ordinal.from_range("a", 0, k - 1, 1),
            Ordinal.from_range("b", 0, k - 1, 1),
            Nominal.build("c", leaves, tree),
            Nominal.build("d", leaves, tree),
        )
    )


def _uniform_parquet(path: Path, schema: Schema, n: int, seed: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    k = schema.shape[0]
    table = pa.table({name: rng.integers(0, k, size=n, dtype=np.int32) for name in schema.names})
    pq.write_table(table, path)


def time_release(mechanism: Mechanism, hist: Histogram) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one release with OS-entropy noise."""
    wall, cpu = time.perf_counter(), time.process_time()
    mechanism.release(hist, account=False)  # timing only, never published
    return time.perf_counter() - wall, time.process_time() - cpu


def timing(
    m_values: Sequence[int], n_values: Sequence[int], m_fixed: int, n_fixed: int, seed: int
) -> list[dict[str, Any]]:
    """Figs. 10/11: seconds from Parquet file to released cells (OS-entropy noise)."""
    rows: list[dict[str, Any]] = []
    # Each point carries its sweep: the m-sweep's point at m_fixed (and the n-sweep's at n_fixed)
    # coincide with a point of the other sweep and must not be mistaken for it.
    plan = [("n", m_fixed, n) for n in n_values] + [("m", m, n_fixed) for m in m_values]
    with tempfile.TemporaryDirectory() as tmp:
        for sweep, m, n in progress.track(plan, "timing"):
            schema = timing_schema(m)
            path = Path(tmp) / "data.parquet"
            _uniform_parquet(path, schema, n, seed)
            start, start_cpu = time.perf_counter(), time.process_time()
            hist = histogram(str(path), schema)
            count_time = time.perf_counter() - start
            count_cpu = time.process_time() - start_cpu
            for method, mech in (
                ("Basic", Identity(1.0, neighbour="replace")),
                ("Privelet", Privelet(1.0)),
            ):
                release_time, release_cpu = time_release(mech, hist)
                rows.append(
                    {
                        "sweep": sweep,
                        "m": schema.size,
                        "coefficients": Privelet(1.0).plan(schema).coefficients
                        if method == "Privelet"
                        else schema.size,
                        "n": n,
                        "method": method,
                        "count_seconds": count_time,
                        "release_seconds": release_time,
                        "count_cpu_seconds": count_cpu,
                        "release_cpu_seconds": release_cpu,
                    }
                )
    return rows


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def plot_errors(path: Path, rows: Sequence[dict[str, Any]], x: str, y: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    fig, axes = plt.subplots(1, len(EPSILONS), figsize=(4 * len(EPSILONS), 3.4), sharey=True)
    for ax, eps in zip(axes, EPSILONS, strict=True):
        for method in sorted({r["method"] for r in rows}):
            sel = [r for r in rows if r["epsilon"] == eps and r["method"] == method]
            if not sel:
                continue
            values = [r[y] for r in sel]
            if all(math.isnan(v) for v in values) and "expected_square_error" in sel[0]:
                values = [r["expected_square_error"] for r in sel]
            ax.plot([r[x] for r in sel], values, marker="o", label=method)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_title(f"epsilon = {eps}")
        ax.set_xlabel(x.replace("_", " "))
    axes[0].set_ylabel(y.replace("_", " "))
    axes[0].legend()
    fig.suptitle(title)
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.16, top=0.84, wspace=0.08)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_timing(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, sweep, x in ((axes[0], "n", "n"), (axes[1], "m", "m")):
        for method in ("Basic", "Privelet"):
            sel = [r for r in rows if r["sweep"] == sweep and r["method"] == method]
            for key, style in (("seconds", "-"), ("cpu_seconds", "--")):
                ax.plot(
                    [r[x] for r in sel],
                    [r[f"count_{key}"] + r[f"release_{key}"] for r in sel],
                    style,
                    marker="o",
                    label=f"{method} ({'wall' if key == 'seconds' else 'CPU'})",
                )
        ax.set_xlabel(x)
        ax.set_ylabel("seconds (Parquet -> release)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def linear_fit(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Slope and R^2 of the least-squares line through (x, y) (the linear growth of Figs. 10/11).

    >>> linear_fit([1, 2, 3], [2, 4, 6])
    (2.0, 1.0)
    """
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    slope, intercept = np.polyfit(xs, ys, 1)
    residual = ys - (slope * xs + intercept)
    total = float(np.sum((ys - ys.mean()) ** 2))
    r2 = 1.0 - float(np.sum(residual**2)) / total if total > 0 else 1.0
    return round(float(slope), 12), round(r2, 12)


def summarise_timing(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Linear fits of CPU time vs n and vs m for each method (Figs. 10/11)."""
    lines = ["## timing (count from Parquet + release)", ""]
    fits = (
        ("n", "n", ("count",)),
        ("n", "n", ("count", "release")),
        ("m", "m", ("release",)),
        ("m", "coefficients", ("release",)),
    )
    for sweep, x, parts in fits:
        for method in ("Basic", "Privelet"):
            sel = [r for r in rows if r["sweep"] == sweep and r["method"] == method]
            if len(sel) < 3 or (x == "coefficients" and method == "Basic"):
                continue
            if parts == ("count",) and method != "Basic":
                continue  # counting is the same for both methods
            cpu = [sum(r[f"{p}_cpu_seconds"] for p in parts) for r in sel]
            slope, r2 = linear_fit([r[x] for r in sel], cpu)
            lines.append(
                f"- CPU seconds of {' + '.join(parts)} vs {x}, {method}: "
                f"{slope * 1e6:.3g} us per unit, R^2 = {r2:.3f}"
            )
    lines.append("")
    lines += [
        f"- {r['method']}: m={r['m']:,} n={r['n']:,}: count {r['count_seconds']:.2f} s "
        f"(CPU {r['count_cpu_seconds']:.2f}), release {r['release_seconds']:.2f} s "
        f"(CPU {r['release_cpu_seconds']:.2f})"
        for r in rows
    ]
    return lines


def summarise(square: Sequence[dict[str, Any]], relative: Sequence[dict[str, Any]]) -> list[str]:
    """Compare with the paper's claims (Sec. VII)."""
    lines = ["# Privelet experiments: summary", ""]
    for dataset in dict.fromkeys(r["dataset"] for r in square):
        lines.append(f"## {dataset}")
        for eps in EPSILONS:
            basic = [
                r
                for r in square
                if r["dataset"] == dataset and r["epsilon"] == eps and r["method"] == "Basic"
            ]
            plus = [
                r
                for r in square
                if r["dataset"] == dataset and r["epsilon"] == eps and r["method"] == "Privelet+"
            ]
            if not basic or not plus:
                continue
            key = (
                "mean_square_error"
                if not math.isnan(basic[0]["mean_square_error"])
                else "expected_square_error"
            )
            b = [r[key] for r in basic]
            p = [r[key] for r in plus]
            wins = [
                f"{r['avg_coverage']:.2g}" for r, x, y in zip(basic, b, p, strict=True) if y < x
            ]
            lines.append(
                f"- eps={eps}: S_A={plus[0]['plain_attributes']}; Basic {min(b):.3g}..{max(b):.3g} "
                f"(span x{max(b) / min(b):.3g}), Privelet+ {min(p):.3g}..{max(p):.3g} (span "
                f"x{max(p) / min(p):.3g}); max(Basic)/max(Privelet+) = {max(b) / max(p):.3g}; "
                f"Privelet+ better at coverage {', '.join(wins) or 'none'} ({key})"
            )
        rel = [r for r in relative if r["dataset"] == dataset]
        if rel:
            worst = {
                m: max(r["mean_relative_error"] for r in rel if r["method"] == m) for m in METHODS
            }
            lines.append(
                f"- largest quintile relative error: {', '.join(f'{m} {v:.3g}' for m, v in worst.items())}"
            )
        lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.privelet", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=40_000)
    parser.add_argument(
        "--runs", type=int, default=None, help="releases averaged per epsilon (default 5)"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="the full count (>= 5 releases per epsilon; the default already meets it)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datasets", default="acs,br2000,table3-brazil,table3-us")
    parser.add_argument(
        "--timing-m",
        default="22,23,24,25,26",
        help="log2 m of the time-vs-m sweep (default 2^22..2^26)",
    )
    parser.add_argument(
        "--timing-n", default="1,2,3,4,5", help="millions of rows of the time-vs-n sweep"
    )
    parser.add_argument(
        "--timing-m-fixed", type=int, default=24, help="log2 m of the time-vs-n sweep"
    )
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args(argv)
    args.runs, why = repetitions("privelet", args.full, args.runs)
    print(f"releases per epsilon: {args.runs} ({why})", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    square: list[dict[str, Any]] = []
    relative: list[dict[str, Any]] = []
    loaders = {"acs": load_acs, "br2000": load_br2000}
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        with progress.step(f"accuracy on {name}"):
            if name in loaders:
                schema, hist = loaders[name](args.data_dir)
                s_rows, r_rows = accuracy_on_data(
                    name, schema, hist, args.queries, args.runs, args.seed
                )
                square += s_rows
                relative += r_rows
            elif name.startswith("table3-"):
                square += accuracy_table3(name.removeprefix("table3-"), args.queries, args.seed)
            else:
                raise DataError(
                    f"unknown data set {name!r}; use acs, br2000, table3-brazil, table3-us"
                )
    write_csv(args.out / "square_error.csv", square)
    write_csv(args.out / "relative_error.csv", relative)
    for dataset in dict.fromkeys(r["dataset"] for r in square):
        rows = [r for r in square if r["dataset"] == dataset]
        plot_errors(
            args.out / f"square_error_{dataset}.png",
            rows,
            "avg_coverage",
            "mean_square_error",
            f"{dataset}: square error vs coverage",
        )
        rel = [r for r in relative if r["dataset"] == dataset]
        if rel:
            plot_errors(
                args.out / f"relative_error_{dataset}.png",
                rel,
                "avg_selectivity",
                "mean_relative_error",
                f"{dataset}: relative error vs selectivity",
            )
    lines = summarise(square, relative)
    if not args.no_timing:
        rows = timing(
            [2 ** int(x) for x in args.timing_m.split(",") if x],
            [int(float(x) * 1_000_000) for x in args.timing_n.split(",") if x],
            2**args.timing_m_fixed,
            int(float(args.timing_n.split(",")[-1]) * 1_000_000),
            args.seed,
        )
        write_csv(args.out / "timing.csv", rows)
        plot_timing(args.out / "timing.png", rows)
        lines += summarise_timing(rows)
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


__all__ = ["coverage", "main", "quintiles", "random_boxes"]


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
