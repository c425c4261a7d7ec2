"""``python -m experiments.datacube``: the experiments of "Differentially Private Data Cubes".

Ding, Winslett, Han, Li, SIGMOD 2011, section 6:
``python -m experiments.datacube --data-dir DIR --out OUT``.

Every experiment publishes all 2^d cuboids (as the paper's Sec. 6) and reports, per method, the *max* and
*average cuboid error* (the cuboid error is the mean absolute error over all cells of the cuboid's
full domain). Methods: All, AllC, Base, BMax, BMaxC, PMost, PMostC (Sec. 6); a method and its "C"
version post-process the same noisy cells. The code path is the mechanism's own
(:func:`dpcube.mechanisms.datacube.mechanism.measure` / ``estimate``), so the noise is the exact
discrete Laplace of the release.

- ``I``: Adult (8 dims), epsilon in 0.25 .. 2;
- ``II``: PMost / PMostC with theta0 = 0.1 .. 1.0 theta' (and the precise-cuboid counts);
- ``III``: max cuboid error by cuboid dimensionality m = 0 .. 8 (Adult, epsilon = 1);
- ``IV``: Adult's first 6 .. 10 dims (two synthetic dims of cardinality 4 appended);
- ``V``: synthetic tables with 7 dims of equal cardinality 2 .. 10 (10^8 rows, drawn as a
  multinomial of the base cells);
- ``VI``: publishing time per phase (selection, counting with DuckDB, noise, aggregation,
  consistency) for 5 .. 10 dims;
- ``acs``: the metrics of ``I`` (epsilon = 1) on 9 columns of the ACS person table;
- ``budgets``: uniform vs non-uniform budgets (paper section 7.2) for BMax(C) / PMost(C) on Adult.

Errors do not depend on the data (Theorem 10 (b), tested in tests/datacube/test_mechanism.py), so ``IV`` and ``V`` measure them
on an all-zero table of the same shape (a reference implementation does the same); ``I``-``III`` and
``acs`` use the real tables. Outputs: ``<exp>.csv`` (one row per run and method, or per cuboid
dimensionality) and ``<exp>.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.histogram import Histogram, histogram
from dpcube.mechanisms.datacube.consistency import l2_consistent
from dpcube.mechanisms.datacube.counting import counts_from_source
from dpcube.mechanisms.datacube.geometry import CubeGeometry
from dpcube.mechanisms.datacube.lattice import Lattice, best_sources, popcount, rollup, shape
from dpcube.mechanisms.datacube.mechanism import aggregate, measure, select
from dpcube.mechanisms.datacube.selection import Selection
from dpcube.privacy.random import SeededRandomSource
from dpcube.progress import track
from dpcube.schema import Schema
from experiments.repetitions import standard_error

ADULT_DIMS = (
    "workclass", "education-num", "marital-status", "occupation", "relationship", "race", "sex",
    "income>50K",
)  # fmt: skip
ACS_DIMS = ("SEX", "MARST", "RACE", "HISPAN", "CITIZEN", "HCOVANY", "EDUC", "EMPSTAT", "LABFORCE")
METHODS = ("All", "AllC", "Base", "BMax", "BMaxC", "PMost", "PMostC")
EXPERIMENTS = ("I", "II", "III", "IV", "V", "VI", "9b", "acs", "budgets")
PHASES = ("selection", "counting", "noise", "aggregation", "consistency")


def nominal_schema(cards: dict[str, int]) -> Schema:
    """A schema of integer-coded nominal columns ``0 .. card-1``.

    >>> nominal_schema({"a": 2, "b": 3}).shape
    (2, 3)
    """
    return Schema.from_dict(
        {
            "attributes": [
                {"name": name, "kind": "nominal", "categories": [str(i) for i in range(card)]}
                for name, card in cards.items()
            ]
        }
    )


def adult_schema(data_dir: Path, dims: Iterable[str] = ADULT_DIMS) -> Schema:
    domain = json.loads((data_dir / "adult" / "adult-domain.json").read_text())
    return nominal_schema({d: int(domain[d]) for d in dims})


def acs_csv(data_dir: Path, work: Path) -> Path:
    """Extract the ACS person table from its zip into ``work`` (never into the repository)."""
    target = work / "temporal-match2.csv"
    if not target.exists():
        work.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(data_dir / "acs_temporal" / "temporal-match2.zip") as archive:
            archive.extract("temporal-match2.csv", work)
    return target


def acs_schema(data_dir: Path, dims: Iterable[str] = ACS_DIMS) -> Schema:
    domain = json.loads((data_dir / "acs_temporal" / "temporal-match2-domain.json").read_text())
    return nominal_schema({d: int(domain[d]) for d in dims})


@dataclass
class Cube:
    """A fact table's base cuboid (or None for the all-zero table) and its selections."""

    lattice: Lattice
    base: NDArray[np.int64] | None
    selections: dict[tuple[str, float, str], tuple[Selection, float]] = field(default_factory=dict)
    #: True counts of measured cuboids counted elsewhere (Exp-VI counts them with DuckDB).
    given: dict[int, NDArray[np.int64]] | None = None
    _truth: dict[int, NDArray[np.int64]] = field(default_factory=dict)

    @property
    def published(self) -> list[int]:
        return list(range(1 << self.lattice.d))

    def selection(
        self, method: str, theta0: float = 0.5, budget: str = "uniform"
    ) -> tuple[Selection, float]:
        """The method's L_pre (cached) and the seconds the selection took."""
        key = (method, theta0, budget)
        if key not in self.selections:
            start = time.perf_counter()
            sel = select(self.lattice, self.published, method, theta0, budget)
            self.selections[key] = (sel, time.perf_counter() - start)
        return self.selections[key]

    def truth(self, mask: int) -> NDArray[np.int64] | None:
        """Cuboid ``mask``'s true counts (cached), summed from a cuboid with one more dimension.

        Integer sums are exact, so rolling up through supersets gives the base roll-up's array.
        """
        if self.base is None:
            return None
        lat = self.lattice
        if mask == lat.base:
            return self.base
        if mask not in self._truth:
            # the parent with one more dimension, the one of least cardinality (fewest cells)
            extra = min((i for i in range(lat.d) if not mask >> i & 1), key=lambda i: lat.cards[i])
            parent = mask | 1 << extra
            parent_counts = self.truth(parent)
            assert parent_counts is not None
            self._truth[mask] = np.asarray(rollup(parent_counts, parent, mask))
        return self._truth[mask]

    def counts(self, masks: Iterable[int]) -> dict[int, NDArray[np.int64]]:
        lat = self.lattice
        if self.given is not None:
            return {m: self.given[m] for m in masks}
        if self.base is None:
            return {m: np.zeros(shape(lat, m), dtype=np.int64) for m in masks}
        return {m: np.asarray(self.truth(m), dtype=np.int64) for m in masks}


def cuboid_errors(cube: Cube, estimates: dict[int, NDArray[np.float64]]) -> NDArray[np.float64]:
    """Cuboid error (mean absolute cell error, full domain) of every cuboid, indexed by bitmask."""
    out = np.empty(len(estimates))
    for mask, est in estimates.items():
        truth = cube.truth(mask)
        out[mask] = float(np.abs(est if truth is None else est - truth).mean())
    return out


def run_method(
    cube: Cube,
    base_method: str,
    epsilon: float,
    seed: int,
    consistent: bool,
    theta0: float = 0.5,
    budget: str = "uniform",
) -> tuple[dict[str, NDArray[np.float64]], dict[str, float]]:
    """One noise draw of ``base_method`` ("all", "base", "bmax", "pmost"): per-cuboid errors of the
    inconsistent estimate and (``consistent``) of its L2-consistent version (weighted by
    ``1 / Var`` for ``budget="optimal"``), and phase timings."""
    lat = cube.lattice
    published = cube.published
    sel, t_select = cube.selection(base_method, theta0, budget)
    name = {"all": "All", "base": "Base", "bmax": "BMax", "pmost": "PMost"}[base_method]
    timings = {"selection": t_select}
    start = time.perf_counter()
    true = cube.counts(sel.sources)
    timings["counting"] = time.perf_counter() - start
    start = time.perf_counter()
    noisy, variances, _ = measure(true, sel, epsilon, 1, budget, SeededRandomSource(seed))
    timings["noise"] = time.perf_counter() - start
    start = time.perf_counter()
    best = best_sources(lat, {m: Fraction(v) for m, v in variances.items()}, published)
    estimates = aggregate(noisy, best, published)
    timings["aggregation"] = time.perf_counter() - start
    errors = {name: cuboid_errors(cube, estimates)}
    del estimates
    if consistent:
        start = time.perf_counter()
        weights = {m: 1.0 / v for m, v in variances.items()}
        consistent_est = l2_consistent(lat, noisy, weights, published)
        timings["consistency"] = time.perf_counter() - start
        errors[name + "C"] = cuboid_errors(cube, consistent_est)
    return errors, timings


def run_all_methods(
    cube: Cube, epsilon: float, seed: int, methods: Iterable[str] = METHODS
) -> tuple[dict[str, NDArray[np.float64]], dict[str, dict[str, float]]]:
    wanted = set(methods)
    errors: dict[str, NDArray[np.float64]] = {}
    timings: dict[str, dict[str, float]] = {}
    for base_method, name in (
        ("all", "All"),
        ("base", "Base"),
        ("bmax", "BMax"),
        ("pmost", "PMost"),
    ):
        if name not in wanted and name + "C" not in wanted:
            continue
        consistent = name + "C" in wanted and base_method != "base"
        got, times = run_method(cube, base_method, epsilon, seed, consistent)
        errors.update({k: v for k, v in got.items() if k in wanted})
        timings[name] = times
    return errors, timings


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def summarise(
    rows: list[dict[str, Any]], by: tuple[str, ...], values: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Mean, standard deviation and standard error of the mean (``_se``, nan for one run) of
    ``values`` over the rows sharing the ``by`` keys.

    >>> summarise([{"m": "A", "e": 1.0}, {"m": "A", "e": 3.0}], ("m",), ("e",))
    [{'m': 'A', 'runs': 2, 'e': 2.0, 'e_std': 1.0, 'e_se': 1.0}]
    """
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in by), []).append(row)
    out = []
    for key, group in groups.items():
        item: dict[str, Any] = dict(zip(by, key, strict=True))
        item["runs"] = len(group)
        for v in values:
            arr = np.array([g[v] for g in group], dtype=float)
            item[v] = float(arr.mean())
            item[v + "_std"] = float(arr.std())
            item[v + "_se"] = standard_error(arr.tolist())
        out.append(item)
    return out


def plot(
    path: Path,
    series: dict[str, tuple[list[float], list[float]]],
    xlabel: str,
    ylabel: str,
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, (xs, ys) in series.items():
        ax.plot(xs, ys, marker="o", label=name, linestyle="--" if name.endswith("C") else "-")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _error_rows(errors: dict[str, NDArray[np.float64]], **keys: Any) -> list[dict[str, Any]]:
    return [
        {**keys, "method": name, "max_error": float(e.max()), "avg_error": float(e.mean())}
        for name, e in errors.items()
    ]


def _series(
    summary: list[dict[str, Any]], x: str, y: str
) -> dict[str, tuple[list[float], list[float]]]:
    out: dict[str, tuple[list[float], list[float]]] = {}
    for row in summary:
        xs, ys = out.setdefault(row["method"], ([], []))
        xs.append(float(row[x]))
        ys.append(float(row[y]))
    return out


# -- the experiments -------------------------------------------------------------------------------------
def exp_errors_vs_epsilon(
    cube: Cube, out: Path, seeds: int, epsilons: list[float], tag: str
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for eps in track(epsilons, f"Exp-{tag}: epsilon"):
        for seed in range(seeds):
            errors, _ = run_all_methods(cube, eps, seed)
            rows.extend(_error_rows(errors, epsilon=eps, seed=seed))
    write_csv(out / f"{tag}.csv", rows)
    summary = summarise(rows, ("epsilon", "method"), ("max_error", "avg_error"))
    write_csv(out / f"{tag}-summary.csv", summary)
    if len(epsilons) > 1:
        for metric in ("max_error", "avg_error"):
            plot(
                out / f"{tag}-{metric}.png",
                _series(summary, "epsilon", metric),
                "epsilon",
                metric.replace("_", " "),
                f"Exp-{tag}",
            )
    return summary


def exp_theta0(cube: Cube, out: Path, seeds: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    bmax, _ = cube.selection("bmax")
    for k in track(range(1, 11), "Exp-II: theta0"):
        theta0 = k / 10
        sel, _ = cube.selection("pmost", theta0)
        same = sel.sources == bmax.sources
        for seed in range(seeds):
            errors, _ = run_method(cube, "pmost", 1.0, seed, True, theta0)
            for row in _error_rows(errors, theta0=theta0, seed=seed):
                row.update(lpre=len(sel.sources), precise=sel.info["precise"], equals_bmax=same)
                rows.append(row)
    write_csv(out / "II.csv", rows)
    summary = summarise(
        rows, ("theta0", "method", "lpre", "precise", "equals_bmax"), ("max_error", "avg_error")
    )
    write_csv(out / "II-summary.csv", summary)
    for metric in ("max_error", "avg_error"):
        plot(
            out / f"II-{metric}.png",
            _series(summary, "theta0", metric),
            "theta0 / theta'",
            metric.replace("_", " "),
            "Exp-II (PMost)",
        )
    return summary


def exp_by_dimensionality(cube: Cube, out: Path, seeds: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    dims = np.array([popcount(m) for m in cube.published])
    for seed in track(range(seeds), "Exp-III: seeds"):
        errors, _ = run_all_methods(cube, 1.0, seed)
        for name, e in errors.items():
            for m in range(cube.lattice.d + 1):
                rows.append(
                    {"seed": seed, "method": name, "m": m, "max_error": float(e[dims == m].max())}
                )
    write_csv(out / "III.csv", rows)
    summary = summarise(rows, ("m", "method"), ("max_error",))
    write_csv(out / "III-summary.csv", summary)
    plot(
        out / "III.png",
        _series(summary, "m", "max_error"),
        "cuboid dimensionality m",
        "max cuboid error",
        "Exp-III (Adult, eps=1)",
    )
    return summary


def exp_dimensions(
    data_dir: Path,
    out: Path,
    seeds: int,
    dims: list[int],
    skip_allc_from: int,
    only: Iterable[str] = METHODS,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    domain = json.loads((data_dir / "adult" / "adult-domain.json").read_text())
    cards = [int(domain[d]) for d in ADULT_DIMS] + [4, 4]
    for d in track(dims, "Exp-IV: dimensions"):
        cube = Cube(Lattice(tuple(cards[:d])), None)
        methods = [m for m in only if not (m == "AllC" and d >= skip_allc_from)]
        for seed in range(seeds):
            errors, _ = run_all_methods(cube, 1.0, seed, methods)
            rows.extend(_error_rows(errors, d=d, seed=seed))
    write_csv(out / "IV.csv", rows)
    summary = summarise(rows, ("d", "method"), ("max_error", "avg_error"))
    write_csv(out / "IV-summary.csv", summary)
    for metric in ("max_error", "avg_error"):
        plot(
            out / f"IV-{metric}.png",
            _series(summary, "d", metric),
            "dimensions",
            metric.replace("_", " "),
            "Exp-IV (Adult + synthetic)",
        )
    return summary


def exp_cardinality(
    out: Path, seeds: int, cards: list[int], rows_count: int = 10**8
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng(0)
    for k in track(cards, "Exp-V: cardinality"):
        lat = Lattice((k,) * 7)
        base = rng.multinomial(rows_count, np.full(lat.cells(lat.base), 1.0 / lat.cells(lat.base)))
        cube = Cube(lat, base.reshape(shape(lat, lat.base)).astype(np.int64))
        for seed in range(seeds):
            errors, _ = run_all_methods(cube, 1.0, seed)
            for row in _error_rows(errors, cardinality=k, seed=seed):
                row["lpre"] = len(
                    cube.selection(
                        {"All": "all", "Base": "base", "BMax": "bmax", "PMost": "pmost"}[
                            row["method"].removesuffix("C")
                        ]
                    )[0].sources
                )
                rows.append(row)
    write_csv(out / "V.csv", rows)
    summary = summarise(rows, ("cardinality", "method", "lpre"), ("max_error", "avg_error"))
    write_csv(out / "V-summary.csv", summary)
    for metric in ("max_error", "avg_error"):
        plot(
            out / f"V-{metric}.png",
            _series(summary, "cardinality", metric),
            "cardinality",
            metric.replace("_", " "),
            "Exp-V (7 dims, 10^8 rows)",
        )
    return summary


def exp_budgets(cube: Cube, out: Path, seeds: int) -> list[dict[str, Any]]:
    """Uniform vs non-uniform budgets (paper section 7.2) for BMax(C) and PMost(C), epsilon = 1."""
    rows: list[dict[str, Any]] = []
    for budget in ("uniform", "optimal"):
        for base_method in ("bmax", "pmost"):
            sel, _ = cube.selection(base_method, 0.5, budget)
            for seed in track(range(seeds), f"budgets: {base_method} {budget}"):
                errors, _ = run_method(cube, base_method, 1.0, seed, True, 0.5, budget)
                for row in _error_rows(errors, budget=budget, seed=seed):
                    row.update(lpre=len(sel.sources), bound=float(sel.bound_u))
                    rows.append(row)
    write_csv(out / "budgets.csv", rows)
    summary = summarise(rows, ("method", "budget", "lpre", "bound"), ("max_error", "avg_error"))
    write_csv(out / "budgets-summary.csv", summary)
    return summary


def exp_timing(
    data_dir: Path, out: Path, dims: list[int], skip_allc_from: int
) -> list[dict[str, Any]]:
    """Publishing time per phase; the true counts of L_pre come from the fact table through DuckDB."""
    import pandas as pd

    frame = pd.read_csv(data_dir / "adult" / "adult.csv", usecols=list(ADULT_DIMS)).astype(str)
    rng = np.random.default_rng(1)
    frame["syn1"] = rng.integers(0, 4, len(frame)).astype(str)
    frame["syn2"] = rng.integers(0, 4, len(frame)).astype(str)
    domain = json.loads((data_dir / "adult" / "adult-domain.json").read_text())
    names = [*ADULT_DIMS, "syn1", "syn2"]
    cards = {n: int(domain[n]) for n in ADULT_DIMS} | {"syn1": 4, "syn2": 4}
    rows: list[dict[str, Any]] = []
    for d in track(dims, "Exp-VI: dimensions"):
        schema = nominal_schema({n: cards[n] for n in names[:d]})
        geo = CubeGeometry(schema)
        cube = Cube(geo.lattice, None)
        for base_method, name in (
            ("all", "All"),
            ("base", "Base"),
            ("bmax", "BMax"),
            ("pmost", "PMost"),
        ):
            sel, _ = cube.selection(base_method)
            start = time.perf_counter()
            true, _ = counts_from_source(geo, frame[list(schema.names)], sel.sources)
            t_count = time.perf_counter() - start
            cube.given = true
            consistent = base_method != "base" and not (
                base_method == "all" and d >= skip_allc_from
            )
            _, times = run_method(cube, base_method, 1.0, 0, consistent)
            times["counting"] = t_count
            row: dict[str, Any] = {
                "d": d,
                "method": name,
                "lpre": len(sel.sources),
                **{p: times.get(p, 0.0) for p in PHASES},
            }
            row["total"] = sum(times.get(p, 0.0) for p in PHASES[:4])
            rows.append({**row, "consistency": 0.0})
            if consistent:
                rows.append(
                    {**row, "method": name + "C", "total": row["total"] + times["consistency"]}
                )
    write_csv(out / "VI.csv", rows)
    plot(
        out / "VI-total.png",
        _series(rows, "d", "total"),
        "dimensions",
        "seconds",
        "Exp-VI publishing time",
    )
    return rows


def lpre_timing(
    cube: Cube, seeds: int, sizes: Iterable[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
) -> list[dict[str, Any]]:
    """Fig. 9(b) (the paper's Exp-VI): on one table, the CPU seconds of noise injection
    with aggregation (K_part) and of L2 consistency for several choices of L_pre: Base, PMost,
    BMax, All, and random sets of the given sizes that contain the base cuboid (``seeds`` draws
    of each). Every cuboid is published. The counts are the cube's (counting is not timed)."""
    lat = cube.lattice
    published = cube.published
    rng = np.random.default_rng(9)
    choices: list[tuple[str, tuple[int, ...]]] = []
    for method, name in (("base", "Base"), ("pmost", "PMost"), ("bmax", "BMax"), ("all", "All")):
        choices.append((name, cube.selection(method)[0].sources))
    others = [m for m in published if m != lat.base]
    for size in sizes:
        if size > len(published):
            continue
        for _ in range(seeds):
            picked = rng.choice(len(others), size=size - 1, replace=False)
            choices.append((f"random-{size}", (lat.base, *(others[int(i)] for i in picked))))
    rows: list[dict[str, Any]] = []
    for name, sources in track(choices, "Fig. 9(b): L_pre choices"):
        n = len(sources)
        sel = Selection(sources, Fraction(0), tuple(Fraction(1, n) for _ in sources))
        true = cube.counts(sources)
        start = time.process_time()
        noisy, variances, _ = measure(true, sel, 1.0, 1, "uniform", SeededRandomSource(n))
        best = best_sources(lat, {m: Fraction(v) for m, v in variances.items()}, published)
        aggregate(noisy, best, published)
        noise_time = time.process_time() - start
        start = time.process_time()
        l2_consistent(lat, noisy, {m: 1.0 / v for m, v in variances.items()}, published)
        rows.append(
            {
                "lpre": name,
                "size": n,
                "noise_aggregation_cpu": noise_time,
                "consistency_cpu": time.process_time() - start,
            }
        )
    return rows


def lpre_summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The two claims of Fig. 9(b): consistency time linear in |L_pre| (R^2 of a straight line,
    and the slope), noise + aggregation time decreasing in |L_pre| (Spearman rank correlation).

    >>> rows = [{"size": s, "consistency_cpu": 2.0 * s, "noise_aggregation_cpu": 10.0 / s}
    ...         for s in (1, 2, 4, 8)]
    >>> {k: round(v, 3) for k, v in lpre_summary(rows).items()}
    {'consistency_slope': 2.0, 'consistency_r2': 1.0, 'noise_spearman': -1.0}
    """
    from scipy.stats import spearmanr

    x = np.array([r["size"] for r in rows], dtype=np.float64)
    y = np.array([r["consistency_cpu"] for r in rows], dtype=np.float64)
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    r2 = 1.0 - float(residual @ residual) / float(((y - y.mean()) ** 2).sum())
    rho = spearmanr(x, [r["noise_aggregation_cpu"] for r in rows]).statistic
    return {"consistency_slope": float(slope), "consistency_r2": r2, "noise_spearman": float(rho)}


#: Noise draws per experiment: quick (CI) and full (>= 10; >= 20 for max-error plots).
#: Exp-VI and 9b are timings (9b's count is its random selections, not noise draws).
QUICK_SEEDS = {"I": 2, "II": 3, "III": 5, "budgets": 5, "IV": 1, "V": 1, "VI": 1, "9b": 3, "acs": 2}
FULL_SEEDS = {"I": 10, "II": 10, "III": 20, "budgets": 10, "IV": 10, "V": 10, "VI": 1, "9b": 3, "acs": 10}  # fmt: skip


def plan(full: bool, explicit: int | None = None) -> dict[str, int]:
    """Noise draws per experiment: ``--seeds`` for all if given, else the full ones with ``--full``.

    >>> plan(True)["III"], plan(False)["III"], plan(True, 4)["I"]
    (20, 5, 4)
    """
    if explicit is not None:
        return dict.fromkeys(QUICK_SEEDS, explicit)
    return dict(FULL_SEEDS if full else QUICK_SEEDS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.datacube", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        required=True,
        help="the shared data directory (adult/, acs_temporal/)",
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for CSV and PNG outputs")
    parser.add_argument(
        "--exp", default="I,II,III", help=f"comma-separated experiments of {', '.join(EXPERIMENTS)}"
    )
    parser.add_argument(
        "--seeds", type=int, default=None, help="noise draws per setting (default per experiment)"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="the full draws: 10 per setting, 20 for Exp-III's max-error plot",
    )
    parser.add_argument("--epsilons", default="0.25,0.5,1,2", help="Exp-I epsilon grid")
    parser.add_argument("--dims", default="6,7,8,9,10", help="Exp-IV / VI numbers of dimensions")
    parser.add_argument("--cards", default="2,3,4,5,6,7,8,9,10", help="Exp-V cardinalities")
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help="Exp-IV: the methods to run (default all seven)",
    )
    parser.add_argument(
        "--skip-allc-from", type=int, default=10, help="skip AllC from this many dims on"
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    wanted = [e.strip() for e in args.exp.split(",") if e.strip()]
    unknown = [e for e in wanted if e not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment {unknown[0]!r}; choose from {', '.join(EXPERIMENTS)}")
    seeds = plan(args.full, args.seeds)
    print("noise draws per setting: " + ", ".join(f"{e} {seeds[e]}" for e in wanted), flush=True)
    results: dict[str, Any] = {}
    if {"I", "II", "III", "budgets"} & set(wanted):
        schema = adult_schema(args.data_dir)
        hist: Histogram = histogram(args.data_dir / "adult" / "adult.csv", schema)
        adult = Cube(CubeGeometry(schema).lattice, hist.counts)
        if "I" in wanted:
            epsilons = [float(x) for x in args.epsilons.split(",")]
            results["I"] = exp_errors_vs_epsilon(adult, out, seeds["I"], epsilons, "I")
        if "II" in wanted:
            results["II"] = exp_theta0(adult, out, seeds["II"])
        if "III" in wanted:
            results["III"] = exp_by_dimensionality(adult, out, seeds["III"])
        if "budgets" in wanted:
            results["budgets"] = exp_budgets(adult, out, seeds["budgets"])
    dims = [int(x) for x in args.dims.split(",")]
    if "IV" in wanted:
        only = [m.strip() for m in args.methods.split(",") if m.strip() in METHODS]
        results["IV"] = exp_dimensions(
            args.data_dir, out, seeds["IV"], dims, args.skip_allc_from, only
        )
    if "V" in wanted:
        results["V"] = exp_cardinality(out, seeds["V"], [int(x) for x in args.cards.split(",")])
    if "VI" in wanted:
        results["VI"] = exp_timing(args.data_dir, out, dims, args.skip_allc_from)
    if "9b" in wanted:
        schema = adult_schema(args.data_dir)
        hist = histogram(args.data_dir / "adult" / "adult.csv", schema)
        rows = lpre_timing(Cube(CubeGeometry(schema).lattice, hist.counts), seeds["9b"])
        write_csv(out / "fig9b.csv", rows)
        results["9b"] = [*rows, lpre_summary(rows)]
    if "acs" in wanted:
        schema = acs_schema(args.data_dir)
        hist = histogram(acs_csv(args.data_dir, out / "_work"), schema)
        acs = Cube(CubeGeometry(schema).lattice, hist.counts)
        results["acs"] = exp_errors_vs_epsilon(acs, out, seeds["acs"], [1.0], "acs")
    for name, summary in results.items():
        print(f"== Exp-{name} ({out})")
        for row in summary:
            print(
                "  "
                + ", ".join(
                    f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
                )
            )
    return 0


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
