"""``python -m experiments.spatial``: the HTF paper's experiments (Figures 3-6) on the data we have.

Shaham et al. (SIGSPATIAL 2021) evaluate on a proprietary Los Angeles data set (3.5M points) and
synthetic Gaussian clusters; the text reports trends only (Sec. 5). This script runs:

- **Fig. 3** HTF vs kd-tree (geometric / uniform budgets) by tree height, eps in {0.1, 0.3, 0.5};
- **Fig. 4** HTF (stop counts 10, 50, 100) vs UG and AG by epsilon;
- **Fig. 5** HTF vs quadtree (geometric / uniform) by height (x = 2k for quadtree height k);
- **Fig. 6** all methods at eps = 0.1 with mixed workloads on every data set: an LA-like proxy,
  the six synthetic sets G{20,50,100}-{1M,3.5M} (Sec. 5), the DPBench 2-D location grids
  (Gowalla check-ins, Beijing and SF taxis, Twitter; 256 x 256) and the raw GeoLife points binned
  at 1024 x 1024 over their bounding box;
- a heat map of an HTF release next to the true histogram, user-level HTF on GeoLife, and an
  ablation of HTF's partition (exact objective instead of the private search).

Queries follow the paper's Sec. 5 (2,000 per workload, fixed seed, the same for every method); the error
is the mean relative error with smoothing bound 20 (Sec. 5). Output: ``results.csv`` (one row
per run), ``summary.csv`` (mean and sd over repetitions), ``fig3.png`` ... ``fig6.png``,
``heatmap.png`` and ``checks.md`` (the paper's reported trends as targets with pass/fail flags).
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri

from dpcube.histogram import Histogram
from dpcube.mechanisms.spatial import (
    HTF,
    AdaptiveGrid,
    KDTree,
    PrivTree,
    QuadTree,
    Singular,
    Uniform,
    UniformGrid,
)
from dpcube.mechanisms.spatial._common import (
    geometric_shares,
    noisy_count,
    relative_error,
    spatial_case_schema,
    tree_height,
)
from dpcube.mechanisms.spatial.htf import htf_partition
from dpcube.mechanisms.spatial.release import LeafRelease, density
from dpcube.mechanisms.spatial.tree import binary_tree, consistent_leaves, htf_perturb, quad_tree
from dpcube.mechanisms.spatial.trees import level_budgets, median_chooser, release_tree_counts
from dpcube.privacy.random import NO_NOISE, SeededRandomSource
from dpcube.release.cells import box_sums, prefix_sums
from experiments.repetitions import repetitions, standard_error

Array = NDArray[Any]
SIZES = (0.02, 0.06, 0.10)
WORKLOADS = ("random", "square2", "square6", "square10")
LOCATION_GRIDS = {
    "Gowalla": "checkin_256_256.npy",
    "BeijingTaxiE": "BeijingTaxiE_256_256.npy",
    "BeijingTaxiS": "BeijingTaxiS_256_256.npy",
    "SFTaxiE": "cabspottingE_256_256.npy",
    "SFTaxiS": "cabspottingS_256_256.npy",
    "Twitter": "twitter_256_256.npy",
}


# ---------------------------------------------------------------------------------------------
# data sets (synthetic data is generated here; it is data, not privacy noise)
# ---------------------------------------------------------------------------------------------


def _gaussian_points(
    rng: np.random.Generator, centre: Array, sigma: float, n: int, side: int
) -> Array:
    """n points ~ N(centre, sigma^2 I) inside [0, side)^2, out-of-domain points redrawn."""
    out = np.zeros((0, 2))
    while len(out) < n:
        z = ndtri(rng.uniform(1e-12, 1 - 1e-12, size=(2 * (n - len(out)) + 16, 2)))
        pts = centre + sigma * z
        pts = pts[np.all((pts >= 0) & (pts < side), axis=1)]
        out = np.concatenate([out, pts])
    return out[:n]


def _grid(points: Array, side: int) -> Array:
    F = np.zeros((side, side), dtype=np.int64)
    idx = np.floor(points).astype(np.int64)
    np.add.at(F, (idx[:, 0], idx[:, 1]), 1)
    return F


def gaussian_dataset(sigma: float, n: int, seed: int, side: int = 1024) -> Array:
    """The paper's synthetic data (Sec. 5): one cluster, centre uniform, sigma in cells."""
    rng = np.random.default_rng(seed)
    centre = rng.uniform(0, side, size=2)
    return _grid(_gaussian_points(rng, centre, sigma, n, side), side)


def la_proxy(n: int = 3_500_000, seed: int = 2021, side: int = 1024) -> Array:
    """An LA-like proxy for the paper's proprietary Los Angeles data: 40 clusters with Pareto weights and sigmas of 3-80
    cells around a few urban cores, plus a 5 % uniform background."""
    rng = np.random.default_rng(seed)
    cores = rng.uniform(0.2 * side, 0.8 * side, size=(5, 2))
    k = 40
    centres = (
        cores[rng.integers(0, 5, size=k)]
        + ndtri(rng.uniform(1e-9, 1 - 1e-9, size=(k, 2))) * side / 8
    )
    centres = np.clip(centres, 0, side - 1)
    weights = rng.pareto(1.2, size=k) + 0.05
    weights /= weights.sum()
    sigmas = np.exp(rng.uniform(np.log(3), np.log(80), size=k))
    background = int(0.05 * n)
    sizes = rng.multinomial(n - background, weights)
    parts = [
        _gaussian_points(rng, c, s, m, side)
        for c, s, m in zip(centres, sigmas, sizes, strict=True)
        if m
    ]
    parts.append(rng.uniform(0, side, size=(background, 2)))
    return _grid(np.concatenate(parts), side)


#: The ``core`` GeoLife window, (lat0, lon0, lat1, lon1): Beijing, about 67 x 68 km, holding 96.4 %
#: of the sample's points (209,876 of 217,653). The sample's own bounding box spans 22-41 N (its
#: two users travelled), on which a 256 x 256 grid leaves all but 32 cells empty.
GEOLIFE_CORE_BBOX = (39.6, 116.0, 40.2, 116.8)


def geolife_dataset(
    data_dir: Path, side: int = 1024, window: str = "bbox"
) -> tuple[Histogram, Any] | None:
    """GeoLife points binned at side x side through dpcube.histogram, over their bounding box
    (``window="bbox"``) or over Beijing, :data:`GEOLIFE_CORE_BBOX` (``"core"``; the points
    outside it are dropped and counted in the histogram's report)."""
    from dpcube.engine.duckdb_engine import open_source
    from dpcube.histogram import histogram
    from dpcube.schema import Schema

    if window not in ("bbox", "core"):
        raise ValueError(f"window must be 'bbox' or 'core', got {window!r}")
    path = data_dir / "geolife" / "geolife_sample.txt.gz"
    if not path.exists():
        return None
    if window == "core":
        lat0, lon0, lat1, lon1 = GEOLIFE_CORE_BBOX
    else:
        with open_source(str(path)) as view:
            lat0, lat1, lon0, lon1 = view.sql(
                "SELECT min(lat), max(lat), min(lng), max(lng) FROM src"
            ).fetchall()[0]
    schema = Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "p",
                    "kind": "spatial",
                    "columns": ["lat", "lng"],
                    "bbox": [lat0, lon0, lat1, lon1],
                    "resolution": [side, side],
                }
            ]
        }
    )
    if window == "core":
        return histogram(str(path), schema, on_out_of_domain="drop"), (path, schema)
    return histogram(str(path), schema), (path, schema)


# ---------------------------------------------------------------------------------------------
# queries and answers
# ---------------------------------------------------------------------------------------------


def query_boxes(shape: tuple[int, int], workload: str, count: int, seed: int) -> Array:
    """Inclusive boxes (count, 2, 2) of the paper's query generator (Sec. 5): "random" (size uniform in
    {2, 6, 10} %, log2 aspect ~ U[-2, 2]) or "squareS" (S % of the area); uniform placement."""
    rng = np.random.default_rng(seed)
    rows, cols = shape
    area = rows * cols
    if workload == "random":
        s = rng.choice(SIZES, size=count)
        rho = 2.0 ** rng.uniform(-2, 2, size=count)
        w = np.clip(np.rint(np.sqrt(s * area * rho)), 1, cols).astype(np.int64)
        h = np.clip(np.rint(np.sqrt(s * area / rho)), 1, rows).astype(np.int64)
    else:
        frac = int(workload.removeprefix("square")) / 100
        h = np.full(count, max(1, round(math.sqrt(frac) * rows)), dtype=np.int64)
        w = np.full(count, max(1, round(math.sqrt(frac) * cols)), dtype=np.int64)
    r0 = (rng.random(count) * (rows - h + 1)).astype(np.int64)
    c0 = (rng.random(count) * (cols - w + 1)).astype(np.int64)
    return np.stack(
        [np.stack([r0, r0 + h - 1], axis=1), np.stack([c0, c0 + w - 1], axis=1)], axis=1
    )


def answers(release: Any, boxes: Array) -> Array:
    """Answers from any release: summed-area table of the leaf density or of the cells."""
    if isinstance(release, LeafRelease):
        return release.answer_boxes(boxes)
    if isinstance(release, tuple):
        shape, rects, counts = release
        return box_sums(prefix_sums(density(shape, rects, counts)), boxes).astype(np.float64)
    return box_sums(prefix_sums(np.asarray(release.counts, dtype=np.float64)), boxes).astype(
        np.float64
    )


@dataclass
class Bench:
    out: Path
    reps: int
    queries: int
    seed: int
    rows: list[dict[str, Any]]

    def evaluate(
        self, name: str, F: Array, workloads: Iterable[str]
    ) -> dict[str, tuple[Array, Array]]:
        prefix = prefix_sums(F)
        result = {}
        for i, w in enumerate(workloads):
            boxes = query_boxes(F.shape, w, self.queries, self.seed + 1000 + i)
            result[w] = (boxes, box_sums(prefix, boxes).astype(np.float64))
        return result

    def record(
        self, release: Any, workloads: dict[str, tuple[Array, Array]], **fields: Any
    ) -> None:
        for w, (boxes, truth) in workloads.items():
            mre = float(relative_error(truth, answers(release, boxes)).mean())
            self.rows.append({**fields, "workload": w, "mre": mre})


def htf_runs(
    F: Array, eps: float, eps_level: float, thetas: Iterable[float], seed: int
) -> tuple[int, dict[float, tuple[Any, Any, Any]]]:
    """HTF at several stop counts sharing one height estimate and one partition (Algorithm 3
    is the only step that reads theta_count); each variant is a complete HTF release."""
    source = SeededRandomSource(seed)
    mech = HTF(eps, eps_level=eps_level)
    h = tree_height(noisy_count(int(F.sum()), mech.eps_height, source), eps)
    _, _, eps_data = mech.budget(h)
    tree = htf_partition(F, h, eps_level, mech.T, source)
    out = {}
    for theta in thetas:
        p = htf_perturb(
            tree, geometric_shares(h, eps_data), eps_data, theta, mech.theta_cells, source
        )
        out[theta] = (F.shape, p.rects, p.counts)
    return h, out


def tree_runs(
    F: Array, eps: float, height: int, seed: int, kind: str
) -> dict[str, tuple[Any, Any, Any]]:
    """A kd-tree (private medians, 15 % of eps) or a quadtree of the given height, its counts
    released with geometric and with uniform budgets, each made consistent: the same structure
    serves both allocations (the medians do not depend on the count budgets)."""
    source = SeededRandomSource(seed)
    if kind == "kdtree":
        share = KDTree(eps).median_share
        tree = binary_tree(F, height, median_chooser(F, share * eps / height, source))
        eps_counts = (1 - share) * eps
    else:
        tree = quad_tree(F, height)
        eps_counts = eps
    out = {}
    for allocation in ("geometric", "uniform"):
        shares = level_budgets(tree.height, eps_counts, allocation)
        noisy, variances, _ = release_tree_counts(tree, shares, source)
        rects, values = consistent_leaves(tree, noisy, variances)
        out[allocation] = (F.shape, rects, values)
    return out


def _hist(F: Array) -> Histogram:
    return Histogram(spatial_case_schema(*F.shape), F)


# ---------------------------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------------------------


def figure3(b: Bench, F: Array, eps_values: list[float], heights: list[int]) -> None:
    loads = b.evaluate("la", F, WORKLOADS)
    for eps in eps_values:
        for rep in range(b.reps):
            seed = b.seed + rep
            for eps_level in (5e-4, 1e-3):
                h, runs = htf_runs(F, eps, eps_level, [100.0], seed)
                b.record(
                    runs[100.0],
                    loads,
                    figure=3,
                    dataset="LA-proxy",
                    method=f"HTF eps'={eps_level:g}",
                    epsilon=eps,
                    height=h,
                    seed=seed,
                )
            for h in heights:
                runs_kd = tree_runs(F, eps, h, seed, "kdtree")
                for alloc, label in (
                    ("geometric", "KdTree (geo)"),
                    ("uniform", "KdTree (uniform)"),
                ):
                    r = runs_kd[alloc]
                    b.record(
                        r,
                        loads,
                        figure=3,
                        dataset="LA-proxy",
                        method=label,
                        epsilon=eps,
                        height=h,
                        seed=seed,
                    )


def figure4(b: Bench, F: Array, eps_values: list[float]) -> None:
    loads = b.evaluate("la", F, WORKLOADS)
    H = _hist(F)
    for eps in eps_values:
        for rep in range(b.reps):
            seed = b.seed + rep
            h, runs = htf_runs(F, eps, 5e-4, [10.0, 50.0, 100.0], seed)
            for theta, rel in runs.items():
                b.record(
                    rel,
                    loads,
                    figure=4,
                    dataset="LA-proxy",
                    method=f"HTF stop={theta:g}",
                    epsilon=eps,
                    height=h,
                    seed=seed,
                )
            for mech, label in ((UniformGrid(eps), "UG"), (AdaptiveGrid(eps), "AG")):
                b.record(
                    mech.release(H, random_state=seed),
                    loads,
                    figure=4,
                    dataset="LA-proxy",
                    method=label,
                    epsilon=eps,
                    height="",
                    seed=seed,
                )


def figure5(b: Bench, F: Array, eps_values: list[float], ks: list[int]) -> None:
    loads = b.evaluate("la", F, WORKLOADS)
    for eps in eps_values:
        for rep in range(b.reps):
            seed = b.seed + rep
            h, runs = htf_runs(F, eps, 5e-4, [100.0], seed)
            b.record(
                runs[100.0],
                loads,
                figure=5,
                dataset="LA-proxy",
                method="HTF",
                epsilon=eps,
                height=h,
                seed=seed,
            )
            for k in ks:
                runs_q = tree_runs(F, eps, k, seed, "quadtree")
                for alloc, label in (
                    ("geometric", "QuadTree (geo)"),
                    ("uniform", "QuadTree (uniform)"),
                ):
                    r = runs_q[alloc]
                    b.record(
                        r,
                        loads,
                        figure=5,
                        dataset="LA-proxy",
                        method=label,
                        epsilon=eps,
                        height=2 * k,
                        seed=seed,
                    )


def t25(b: Bench, side: int, n: int, ks: list[int]) -> list[str]:
    """The paper's reproduction targets (Shaham et al., SIGSPATIAL 2021, Sec. 5), checked on the
    synthetic sigma = 100 set with 1M points at
    eps = 0.1, MRE(HTF) below UG, below the geometric quadtree at its best height and below
    Singular; and the HTF/UG gap smaller on sigma = 20 than on sigma = 100. Returns the table."""
    mre: dict[tuple[int, str], list[float]] = {}
    for sigma in (100, 20):
        F = gaussian_dataset(sigma * side / 1024, n, seed=sigma, side=side)
        loads = b.evaluate(f"G{sigma}", F, ["random"])
        for rep in range(b.reps):
            seed = b.seed + rep
            start = len(b.rows)
            fields = {"figure": "T25", "dataset": f"G{sigma}", "epsilon": 0.1, "seed": seed}
            _, runs = htf_runs(F, 0.1, 5e-4, [100.0], seed)
            b.record(runs[100.0], loads, method="HTF", **fields)
            b.record(
                UniformGrid(0.1).release(_hist(F), random_state=seed, account=False),
                loads,
                method="UG",
                **fields,
            )
            b.record(
                Singular(0.1).release(_hist(F), random_state=seed, account=False),
                loads,
                method="Singular",
                **fields,
            )
            for k in ks if sigma == 100 else []:
                q = tree_runs(F, 0.1, k, seed, "quadtree")["geometric"]
                b.record(q, loads, method=f"QuadTree (geo) k={k}", **fields)
            for r in b.rows[start:]:
                mre.setdefault((sigma, r["method"]), []).append(r["mre"])

    def m(sigma: int, method: str) -> float:
        return float(np.mean(mre[(sigma, method)]))

    quad = {k: m(100, f"QuadTree (geo) k={k}") for k in ks}
    best_k = min(quad, key=lambda k: quad[k])
    htf = m(100, "HTF")
    gap100, gap20 = m(100, "UG") / htf, m(20, "UG") / m(20, "HTF")
    rows = [
        ("MRE(HTF) < MRE(UG), sigma 100", htf < m(100, "UG"), f"{htf:.4g} vs {m(100, 'UG'):.4g}"),
        (
            f"MRE(HTF) < best geometric quadtree (k = {best_k})",
            htf < quad[best_k],
            f"{htf:.4g} vs {quad[best_k]:.4g}",
        ),
        (
            "MRE(HTF) < MRE(Singular)",
            htf < m(100, "Singular"),
            f"{htf:.4g} vs {m(100, 'Singular'):.4g}",
        ),
        (
            "UG/HTF gap smaller on sigma 20 than on 100",
            gap20 < gap100,
            f"UG/HTF {gap20:.3g} (sigma 20) vs {gap100:.3g} (sigma 100)",
        ),
    ]
    lines = ["| T25 target | result | MRE (%), mean of the runs |", "|---|---|---|"]
    lines += [f"| {c} | {'PASS' if ok else 'FAIL'} | {e} |" for c, ok, e in rows]
    lines.append(
        "| quadtree (geo) by height k | | "
        + ", ".join(f"k={k}: {v:.4g}" for k, v in quad.items())
        + " |"
    )
    return lines


def fig6_methods(eps: float) -> list[tuple[str, Callable[[], Any]]]:
    methods: list[tuple[str, Callable[[], Any]]] = [
        ("KdTree", lambda: KDTree(eps)),
        (
            "QuadTree",
            lambda: QuadTree(eps, height_rule="spec"),
        ),  # HTF's Eq. 10 mapped to the quadtree
        ("UG", lambda: UniformGrid(eps)),
        ("AG", lambda: AdaptiveGrid(eps)),
        ("PrivTree", lambda: PrivTree(eps)),
        ("Singular", lambda: Singular(eps)),
        ("Uniform", lambda: Uniform(eps)),
    ]
    try:
        from dpcube.mechanisms.privelet.mechanism import Privelet

        methods.append(("Privelet", lambda: Privelet(eps, neighbour="add_remove")))
    except ImportError:
        pass
    return methods


def figure6(b: Bench, datasets: dict[str, Array], eps: float) -> None:
    for name, F in datasets.items():
        loads = b.evaluate(name, F, ("random",))
        H = _hist(F)
        for rep in range(b.reps):
            seed = b.seed + rep
            h, runs = htf_runs(F, eps, 5e-4, [100.0], seed)
            b.record(
                runs[100.0],
                loads,
                figure=6,
                dataset=name,
                method="HTF",
                epsilon=eps,
                height=h,
                seed=seed,
            )
            for label, make in fig6_methods(eps):
                try:
                    r = make().release(H, random_state=seed)
                except Exception as exc:  # a baseline from another module may not take this data
                    print(f"  {label} on {name}: skipped ({type(exc).__name__}: {exc})")
                    continue
                b.record(
                    r,
                    loads,
                    figure=6,
                    dataset=name,
                    method=label,
                    epsilon=eps,
                    height="",
                    seed=seed,
                )


def ablation(b: Bench, F: Array, eps: float) -> None:
    """HTF with the partition noise switched off (exact objective values, T = 3 and T = 10, the
    latter finding the exact argmin) against the private partition, counts noisy in all three:
    does the homogeneity objective itself give good partitions?"""
    loads = b.evaluate("la", F, ("random",))
    mech = HTF(eps)
    for rep in range(b.reps):
        seed = b.seed + rep
        h = tree_height(F.sum(), eps)
        _, _, eps_data = mech.budget(h)
        for label, T, partition_source in (
            ("HTF private partition (T=3)", 3, SeededRandomSource(seed)),
            ("HTF exact objective, T=3", 3, NO_NOISE),
            ("HTF exact objective, T=10 (argmin)", 10, NO_NOISE),
        ):
            tree = htf_partition(F, h, mech.eps_level, T, partition_source)
            p = htf_perturb(
                tree, geometric_shares(h, eps_data), eps_data, 100.0, 5, SeededRandomSource(seed)
            )
            b.record(
                (F.shape, p.rects, p.counts),
                loads,
                figure="ablation",
                dataset="LA-proxy",
                method=label,
                epsilon=eps,
                height=h,
                seed=seed,
            )


def user_level(b: Bench, geolife: Any, eps: float, bounds: list[int]) -> None:
    from dpcube.mechanisms.spatial import bound_contributions

    path, schema = geolife
    for c in bounds:
        H = bound_contributions(str(path), schema, "uid", c, seed=0.5)
        loads = b.evaluate("geolife-users", H.counts, ("random",))
        for rep in range(b.reps):
            r = HTF(eps, user_bound=c).release(H, random_state=b.seed + rep)
            b.record(
                r,
                loads,
                figure="users",
                dataset=f"GeoLife c={c} (dropped {H.report['rows_dropped_by_bound']})",
                method="HTF user-level",
                epsilon=eps,
                height=r.metadata.noise["height"],
                seed=b.seed + rep,
            )


# ---------------------------------------------------------------------------------------------
# summaries, plots and checks
# ---------------------------------------------------------------------------------------------

KEYS = ("figure", "dataset", "method", "epsilon", "height", "workload")


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean relative error per setting (``KEYS``) over the runs: ``mre``, its deviation ``sd`` and
    the standard error of the mean ``se`` (nan for one run)."""
    groups: dict[tuple[Any, ...], list[float]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in KEYS), []).append(r["mre"])
    return [
        {
            **dict(zip(KEYS, k, strict=True)),
            "mre": float(np.mean(v)),
            "sd": float(np.std(v)),
            "se": standard_error(v),
            "runs": len(v),
        }
        for k, v in groups.items()
    ]


def _select(summary: list[dict[str, Any]], **where: Any) -> list[dict[str, Any]]:
    return [r for r in summary if all(r[k] == v for k, v in where.items())]


def _mre(summary: list[dict[str, Any]], **where: Any) -> float:
    rows = _select(summary, **where)
    return float(np.mean([r["mre"] for r in rows])) if rows else float("nan")


def plot(
    summary: list[dict[str, Any]], out: Path, real: dict[str, Array], heat: tuple[Array, Any] | None
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def panels(
        fig_no: int, x_key: str, panel_spec: list[tuple[str, dict[str, Any]]], title: str
    ) -> None:
        rows = _select(summary, figure=fig_no)
        if not rows:
            return
        fig, axes = plt.subplots(2, 3, figsize=(15, 8))
        for ax, (label, where) in zip(axes.ravel(), panel_spec, strict=False):
            sel = _select(rows, **where)
            for j, method in enumerate(sorted({r["method"] for r in sel})):
                pts = sorted(
                    (float(r[x_key]), r["mre"])
                    for r in sel
                    if r["method"] == method and r[x_key] != ""
                )
                if not pts:
                    continue
                xs, ys = zip(*pts, strict=True)
                if len(set(xs)) == 1 or (method.startswith("HTF") and x_key == "height"):
                    ax.axhline(
                        float(np.mean(ys)),
                        ls="--",
                        lw=1.5,
                        color=f"C{j}",
                        label=f"{method} (h={int(np.mean(xs))})" if x_key == "height" else method,
                    )
                else:
                    ax.plot(xs, ys, marker="o", color=f"C{j}", label=method)
            ax.set_title(label)
            ax.set_xlabel(x_key)
            ax.set_ylabel("MRE (%)")
            ax.set_yscale("log")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(out / f"fig{fig_no}.png", dpi=80)
        plt.close(fig)

    eps_panels = [
        (f"eps={e}, random shape", {"epsilon": e, "workload": "random"}) for e in (0.1, 0.3, 0.5)
    ]
    sq = [(f"eps=0.1, square {s}%", {"epsilon": 0.1, "workload": f"square{s}"}) for s in (2, 6, 10)]
    panels(3, "height", eps_panels + sq, "Fig. 3: HTF vs kd-tree by tree height (LA proxy)")
    panels(
        5,
        "height",
        eps_panels + sq,
        "Fig. 5: HTF vs quadtree by height (x = 2k for quadtree height k; LA proxy)",
    )
    rows4 = _select(summary, figure=4)
    if rows4:
        fig, axes = plt.subplots(2, 3, figsize=(15, 8))
        for ax, theta in zip(axes[0], (10, 50, 100), strict=True):
            for method in (f"HTF stop={theta}", "UG", "AG"):
                pts = sorted(
                    (r["epsilon"], r["mre"])
                    for r in rows4
                    if r["method"] == method and r["workload"] == "random"
                )
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", label=method)
            ax.set_title(f"stop count {theta}, random shape")
        for ax, s in zip(axes[1], (2, 6, 10), strict=True):
            for method in ("HTF stop=100", "UG", "AG"):
                pts = sorted(
                    (r["epsilon"], r["mre"])
                    for r in rows4
                    if r["method"] == method and r["workload"] == f"square{s}"
                )
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", label=method)
            ax.set_title(f"square {s}%")
        for ax in axes.ravel():
            ax.set_xlabel("epsilon")
            ax.set_ylabel("MRE (%)")
            ax.set_yscale("log")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        fig.suptitle("Fig. 4: HTF vs UG / AG (LA proxy)")
        fig.tight_layout()
        fig.savefig(out / "fig4.png", dpi=80)
        plt.close(fig)
    rows6 = _select(summary, figure=6)
    if rows6:
        datasets = list(dict.fromkeys(r["dataset"] for r in rows6))
        methods = list(dict.fromkeys(r["method"] for r in rows6))
        fig, ax = plt.subplots(figsize=(16, 6))
        width = 0.8 / len(methods)
        for j, m in enumerate(methods):
            ys = [_mre(rows6, dataset=d, method=m) for d in datasets]
            ax.bar(np.arange(len(datasets)) + j * width, ys, width, label=m)
        ax.set_xticks(np.arange(len(datasets)) + 0.4)
        ax.set_xticklabels(datasets, rotation=30, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("MRE (%), mixed workload, eps = 0.1")
        ax.legend(fontsize=8, ncol=3)
        fig.tight_layout()
        fig.savefig(out / "fig6.png", dpi=80)
        plt.close(fig)
    if heat is not None:
        F, rel = heat
        fig, axes = plt.subplots(1, 2, figsize=(12, 6))
        z = density(F.shape, rel[1], rel[2])
        vmax = math.log10(max(F.max(), 1) + 1)
        axes[0].imshow(np.log10(F + 1), origin="lower", vmin=0, vmax=vmax)
        axes[0].set_title("true counts (log10(1 + c))")
        axes[1].imshow(np.log10(np.clip(z, 0, None) + 1), origin="lower", vmin=0, vmax=vmax)
        axes[1].set_title(f"HTF release, eps = 0.1 ({len(rel[1])} leaves)")
        fig.tight_layout()
        fig.savefig(out / "heatmap.png", dpi=50)
        plt.close(fig)


def checks(
    summary: list[dict[str, Any]], heights: dict[float, list[int]]
) -> list[tuple[str, bool | None, str]]:
    """The paper's reported trends (Sec. 5) as soft checks: (claim, passed, evidence)."""
    out: list[tuple[str, bool | None, str]] = []

    def add(claim: str, ok: bool | None, evidence: str) -> None:
        out.append((claim, ok, evidence))

    if heights:
        got = {e: sorted(set(h)) for e, h in heights.items()}
        add(
            "heights 15/16/17 for 3.5M points at eps 0.1/0.3/0.5",
            got.get(0.1) == [15] and got.get(0.3) == [16] and got.get(0.5) == [17],
            str(got),
        )
    for fig, base in ((3, "KdTree (geo)"), (5, "QuadTree (geo)")):
        for eps in (0.1, 0.3, 0.5):
            rows = sorted(
                (float(r["height"]), r["mre"])
                for r in _select(summary, figure=fig, method=base, epsilon=eps, workload="random")
            )
            htf = [
                r["mre"]
                for r in _select(summary, figure=fig, epsilon=eps, workload="random")
                if r["method"].startswith("HTF")
            ]
            if len(rows) >= 3 and htf:
                ys = [y for _, y in rows]
                interior = 0 < int(np.argmin(ys)) < len(ys) - 1
                add(
                    f"Fig. {fig}: {base} MRE is U-shaped in height (eps={eps})",
                    interior,
                    " ".join(f"{x:g}:{y:.3g}" for x, y in rows),
                )
                add(
                    f"Fig. {fig}: HTF below the best {base} (eps={eps})",
                    min(htf) <= min(ys),
                    f"HTF {min(htf):.3g} vs best {min(ys):.3g}",
                )
    rows4 = _select(summary, figure=4, workload="random")
    if rows4:
        eps_values = sorted({r["epsilon"] for r in rows4})
        wins = [
            _mre(rows4, method="HTF stop=100", epsilon=e)
            < min(_mre(rows4, method="UG", epsilon=e), _mre(rows4, method="AG", epsilon=e))
            for e in eps_values
        ]
        add(
            "Fig. 4: HTF < UG and AG for most epsilon",
            sum(wins) > len(wins) / 2,
            f"{sum(wins)}/{len(wins)} epsilon values",
        )
        lo, hi = min(eps_values), max(eps_values)
        r_lo = _mre(rows4, method="AG", epsilon=lo) / _mre(rows4, method="HTF stop=100", epsilon=lo)
        r_hi = _mre(rows4, method="AG", epsilon=hi) / _mre(rows4, method="HTF stop=100", epsilon=hi)
        add(
            "Fig. 4: MRE(AG)/MRE(HTF) larger at the smallest epsilon than at the largest",
            r_lo > r_hi,
            f"{r_lo:.3g} at {lo} vs {r_hi:.3g} at {hi}",
        )
        m = {t: _mre(rows4, method=f"HTF stop={t}") for t in (10, 50, 100)}
        add(
            "Fig. 4: stop count 50 at least as good as 10 and 100",
            m[50] <= m[10] and m[50] <= m[100],
            " ".join(f"{k}:{v:.3g}" for k, v in m.items()),
        )
    rows6 = _select(summary, figure=6)
    if rows6:
        datasets = list(dict.fromkeys(r["dataset"] for r in rows6))
        best = []
        paper_best = []
        for d in datasets:
            scores = {r["method"]: r["mre"] for r in _select(rows6, dataset=d)}
            best.append((d, min(scores, key=lambda k: scores[k])))
            paper = {k: v for k, v in scores.items() if k != "PrivTree"}
            paper_best.append((d, min(paper, key=lambda k: paper[k])))
        add(
            "Fig. 6: HTF best on every data set among the paper's methods (PrivTree left out)",
            all(w == "HTF" for _, w in paper_best),
            "; ".join(f"{d}: {w}" for d, w in paper_best),
        )
        add(
            "HTF better than PrivTree (not in the paper)",
            all(w == "HTF" for _, w in best),
            "; ".join(f"{d}: {w}" for d, w in best),
        )
        gains = {}
        for s in (20, 50, 100):
            names = [d for d in datasets if d.startswith(f"G{s}-")]
            if names:
                g = [
                    min(_mre(rows6, dataset=d, method=m) for m in ("UG", "AG", "QuadTree"))
                    / _mre(rows6, dataset=d, method="HTF")
                    for d in names
                ]
                gains[s] = float(np.mean(g))
        if len(gains) == 3:
            add(
                "Fig. 6: gain over best of UG/AG/QuadTree grows sigma 20 -> 50 -> 100",
                gains[20] < gains[50] < gains[100],
                " ".join(f"s{k}:{v:.3g}" for k, v in gains.items()),
            )
        g100 = [d for d in datasets if d.startswith("G100-1M")]
        if g100:
            d = g100[0]
            htf_g = _mre(rows6, dataset=d, method="HTF")
            ok = htf_g < _mre(rows6, dataset=d, method="UG") and htf_g < _mre(
                rows6, dataset=d, method="Singular"
            )
            q = _select(summary, figure=5, method="QuadTree (geo)", epsilon=0.1, workload="random")
            add(
                "T25: G100-1M eps=0.1: HTF < UG and HTF < Singular",
                ok,
                f"HTF {htf_g:.3g}, UG {_mre(rows6, dataset=d, method='UG'):.3g}, Singular {_mre(rows6, dataset=d, method='Singular'):.3g}",
            )
            if q:
                add(
                    "T25 (on the LA proxy): HTF < QuadTree-geo at its best height",
                    _mre(summary, figure=5, method="HTF", epsilon=0.1, workload="random")
                    < min(r["mre"] for r in q),
                    "",
                )
        skewed = [d for d in datasets if d.startswith("G100") or d == "LA-proxy"]
        if skewed:
            far = all(
                min(
                    _mre(rows6, dataset=d, method="Singular"),
                    _mre(rows6, dataset=d, method="Uniform"),
                )
                > 2 * _mre(rows6, dataset=d, method="HTF")
                for d in skewed
            )
            add(
                "Fig. 6: Singular and Uniform far worse (> 2x HTF) on skewed data",
                far,
                ", ".join(skewed),
            )
    for fig in (3, 5):
        sel = _select(summary, figure=fig, epsilon=0.1)
        methods = sorted({r["method"] for r in sel})
        dec = []
        for m in methods:
            v = [_mre(sel, method=m, workload=f"square{s}") for s in (2, 6, 10)]
            dec.append(v[0] >= v[1] >= v[2])
        if methods:
            add(
                f"Fig. {fig}: MRE decreases with query size (2 -> 6 -> 10 %) for every method",
                all(dec),
                f"{sum(dec)}/{len(dec)} methods",
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.spatial", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--reps", type=int, default=None, help="mechanism runs (seeds) per setting (default 2)"
    )
    parser.add_argument("--full", action="store_true", help="the full count: 5 runs per setting")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--figures",
        default="3,4,5,6,users,ablation,t25",
        help="comma-separated subset of 3,4,5,6,users,ablation,t25",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small grids and few settings (a smoke test)"
    )
    args = parser.parse_args(argv)
    args.reps, why = repetitions("spatial", args.full, args.reps)
    print(f"runs per setting: {args.reps} ({why})")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    figures = set(args.figures.split(","))
    side, n_la = (128, 200_000) if args.quick else (1024, 3_500_000)
    bench = Bench(out, args.reps, args.queries, args.seed, [])
    start = time.time()
    print(f"generating data (grid {side} x {side}) ...")
    la = la_proxy(n_la, side=side)
    heights: dict[float, list[int]] = {}
    eps3 = [0.1] if args.quick else [0.1, 0.3, 0.5]
    if "3" in figures:
        print(f"[{time.time() - start:4.0f} s] " + "Fig. 3 ...")
        figure3(bench, la, eps3, [6, 10, 14] if args.quick else [8, 10, 12, 14, 16, 18, 20])
    if "4" in figures:
        print(f"[{time.time() - start:4.0f} s] " + "Fig. 4 ...")
        figure4(bench, la, [0.1, 0.5] if args.quick else [0.05, 0.1, 0.2, 0.3, 0.5])
    if "5" in figures:
        print(f"[{time.time() - start:4.0f} s] " + "Fig. 5 ...")
        figure5(bench, la, eps3, [3, 5, 7] if args.quick else [4, 5, 6, 7, 8, 9, 10])
    for r in bench.rows:
        if (
            r["method"].startswith("HTF")
            and r["figure"] in (3, 5)
            and r["workload"] == "random"
            and "1e-3" not in r["method"]
            and "0.001" not in r["method"]
        ):
            heights.setdefault(r["epsilon"], []).append(int(r["height"]))
    real: dict[str, Array] = {}
    geolife = None
    if "6" in figures or "users" in figures:
        grid_dir = args.data_dir / "dpbench" / "2D"
        for name, fname in LOCATION_GRIDS.items():
            if (grid_dir / fname).exists():
                real[name] = np.rint(np.load(grid_dir / fname)).astype(np.int64)
        loaded = geolife_dataset(args.data_dir, 256 if args.quick else 1024)
        if loaded is not None:
            real["GeoLife"] = loaded[0].counts
            geolife = loaded[1]
    if "6" in figures:
        print(f"[{time.time() - start:4.0f} s] " + "Fig. 6 ...")
        data = {"LA-proxy": la}
        for s in (20, 50, 100):
            for n, label in ((1_000_000, "1M"), (3_500_000, "3.5M")):
                if args.quick and label == "3.5M":
                    continue
                data[f"G{s}-{label}"] = gaussian_dataset(
                    s * side / 1024, n // (64 if args.quick else 1), seed=s, side=side
                )
        data.update(real if not args.quick else dict(list(real.items())[:2]))
        figure6(bench, data, 0.1)
    if "users" in figures and geolife is not None:
        print(f"[{time.time() - start:4.0f} s] " + "user-level GeoLife ...")
        user_level(bench, geolife, 0.5, [10, 100])
    if "ablation" in figures:
        print(f"[{time.time() - start:4.0f} s] " + "HTF partition ablation ...")
        ablation(bench, la, 0.1)
    t25_lines: list[str] = []
    if "t25" in figures:
        print(
            f"[{time.time() - start:4.0f} s] " + "T25 on the synthetic sigma = 100 and 20 sets ..."
        )
        t25_lines = t25(
            bench,
            side,
            1_000_000 // (64 if args.quick else 1),
            [2, 3] if args.quick else list(range(1, 11)),
        )
        (out / "t25.md").write_text("\n".join(t25_lines) + "\n")
        print("\n".join(t25_lines))
        bench.rows = [r for r in bench.rows if r.get("figure") != "T25"]
    summary = summarise(bench.rows)
    for name, rows in (("results.csv", bench.rows), ("summary.csv", summary)):
        with open(out / name, "w", newline="") as f:
            fields = list(dict.fromkeys(k for r in rows for k in r))
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    _, runs = htf_runs(la, 0.1, 5e-4, [100.0], args.seed)
    plot(summary, out, real, (la, runs[100.0]))
    results = checks(summary, heights)
    lines = ["| target | result | evidence |", "|---|---|---|"]
    for claim, ok, evidence in results:
        lines.append(
            f"| {claim} | {'PASS' if ok else 'FAIL' if ok is not None else 'n/a'} | {evidence} |"
        )
    (out / "checks.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"done in {time.time() - start:.0f} s; outputs in {out}")
    return 0


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
