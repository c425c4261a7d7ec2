"""The error the integer step (``to_integer``, ``dpcube release --integer``) adds, measured.

For each release: the unrounded release's error against the truth, the integer release's, and
the mean change the step made (integer minus unrounded), per published table (cuboid degree,
census level, spatial leaves and random rectangles), with the seconds ``to_integer`` took.
Data: a generated 5-way cube of 110,592 cells and 336,776 records (the shape of the flights
cube), Adult's 5-way cube (workclass x education-num x occupation x relationship x race,
64,800 cells), IPUMS CPS households by state, DPBench's HEPTH histogram (4,096 cells), the
Gowalla check-ins grid (DPBench 2-D, 256 x 256) and generated clustered points. Seeded; prints one markdown table.

    .venv/bin/python -m experiments.integer --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from dpcube import Histogram, Schema
from dpcube.mechanisms.datacube.mechanism import DataCube

ADULT_CUBE = ("workclass", "education-num", "occupation", "relationship", "race")


def _nominal(cards: dict[str, int]) -> Schema:
    return Schema.from_dict(
        {
            "attributes": [
                {"name": n, "kind": "nominal", "categories": [str(j) for j in range(k)]}
                for n, k in cards.items()
            ]
        }
    )


def cube_rows(name: str, counts: np.ndarray, schema: Schema, epsilon: float) -> list[str]:
    """One row per cuboid degree: mean |error| of the unrounded and integer cells, mean change."""
    release: Any = DataCube(epsilon, method="bmax", consistency="l2").release(
        Histogram(schema, counts), random_state=1, account=False
    )
    t = time.perf_counter()
    whole = release.to_integer()
    seconds = time.perf_counter() - t
    rows = []
    by_degree: dict[int, list[tuple[float, float, float, int, int]]] = {}
    for cuboid in release.published:
        names = list(cuboid)
        axes = tuple(k for k, a in enumerate(schema.names) if a not in names)
        truth = counts.sum(axis=axes) if axes else counts
        a, b = release.cuboid(names), whole.cuboid(names)
        by_degree.setdefault(len(names), []).append(
            (
                float(np.abs(a - truth).sum()),
                float(np.abs(b - truth).sum()),
                float(np.abs(b - a).sum()),
                int(a.size),
                int((a < 0).sum()),
            )
        )
    for degree in sorted(by_degree):
        parts = by_degree[degree]
        cells = sum(p[3] for p in parts)
        rows.append(
            f"| {name} | {degree}-way cuboids ({len(parts)}) | {cells:,} | "
            f"{sum(p[4] for p in parts):,} | {sum(p[0] for p in parts) / cells:.2f} | "
            f"{sum(p[1] for p in parts) / cells:.2f} | {sum(p[2] for p in parts) / cells:.2f} | "
            f"{seconds:.2f} |"
        )
    return rows


def generated_cube(epsilon: float) -> list[str]:
    cards = dict(
        zip(("month", "carrier", "origin", "hour", "delay"), (12, 16, 3, 24, 8), strict=True)
    )
    schema = _nominal(cards)
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(int(np.prod(schema.shape)), 0.05))
    counts = rng.multinomial(336_776, p).reshape(schema.shape)
    return cube_rows(f"generated 5-way cube, eps={epsilon:g}", counts, schema, epsilon)


def adult_cube(data_dir: Path, epsilon: float) -> list[str]:
    import json

    import pandas as pd

    domain = json.loads((data_dir / "adult" / "adult-domain.json").read_text())
    df = pd.read_csv(data_dir / "adult" / "adult.csv", usecols=list(ADULT_CUBE))
    cards = {a: int(domain[a]) for a in ADULT_CUBE}
    schema = _nominal(cards)
    counts = np.zeros(schema.shape, dtype=np.int64)
    np.add.at(counts, tuple(df[a].to_numpy() for a in ADULT_CUBE), 1)
    return cube_rows(f"Adult 5-way cube, eps={epsilon:g}", counts, schema, epsilon)


def census_rows(data_dir: Path, epsilon: float) -> list[str]:
    from dpcube.mechanisms.census.mechanism import CensusHierarchy
    from experiments.census import ipums_table

    table = ipums_table(data_dir / "ipums_cps")
    rows = []
    for method in ("dp", "topdown", "cdp_approx"):
        release: Any = CensusHierarchy(epsilon, method=method).release(
            table, random_state=1, account=False
        )
        t = time.perf_counter()
        whole = release.to_integer()
        seconds = time.perf_counter() - t
        before = np.abs(release.values - table.counts).mean()
        after = np.abs(whole.values - table.counts).mean()
        change = np.abs(whole.values - release.values).mean()
        rows.append(
            f"| IPUMS CPS households, {method}, eps={epsilon:g} | regions x sizes | "
            f"{release.values.size:,} | {int((release.values < 0).sum())} | {before:.2f} | "
            f"{after:.2f} | {change:.2f} | {seconds:.2f} |"
        )
    return rows


def spatial_rows(name: str, grid: np.ndarray, epsilon: float) -> list[str]:
    from dpcube.mechanisms.spatial._common import spatial_case_schema
    from dpcube.mechanisms.spatial.htf import HTF
    from dpcube.mechanisms.spatial.trees import QuadTree

    rows_, cols = grid.shape
    schema = spatial_case_schema(rows_, cols)
    rng = np.random.default_rng(2)
    r = np.sort(rng.integers(0, rows_, size=(500, 2)), axis=1)
    c = np.sort(rng.integers(0, cols, size=(500, 2)), axis=1)
    boxes = np.stack([r, c], axis=1)  # (q, 2 axes, [lo, hi] inclusive cells)
    prefix = np.pad(grid.cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    truth = np.array(
        [prefix[b + 1, y + 1] - prefix[a, y + 1] - prefix[b + 1, x] + prefix[a, x]
         for (a, b), (x, y) in zip(r, c, strict=True)]
    )  # fmt: skip
    out = []
    for label, make in (("HTF", lambda: HTF(epsilon)), ("quadtree", lambda: QuadTree(epsilon))):
        release: Any = make().release(Histogram(schema, grid), random_state=1, account=False)
        t = time.perf_counter()
        whole = release.to_integer()
        seconds = time.perf_counter() - t
        a, b = release.answer_boxes(boxes), whole.answer_boxes(boxes)
        leaves = np.asarray(release.leaf_counts, dtype=np.float64)
        out.append(
            f"| {name}, {label}, eps={epsilon:g} | 500 random rectangles ({len(leaves):,} "
            f"leaves) | 500 | {int((leaves < 0).sum()):,} | {np.abs(a - truth).mean():.2f} | "
            f"{np.abs(b - truth).mean():.2f} | {np.abs(b - a).mean():.2f} | {seconds:.2f} |"
        )
    return out


def cells_rows(name: str, counts: np.ndarray, epsilon: float) -> list[str]:
    """Identity on a 1-D histogram: 500 random ranges, unrounded and integer."""
    from dpcube import Identity

    n = len(counts)
    schema = Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, n - 1], "width": 1}]}
    )
    release = Identity(epsilon).release(Histogram(schema, counts), random_state=1, account=False)
    t = time.perf_counter()
    whole = release.to_integer()
    seconds = time.perf_counter() - t
    rng = np.random.default_rng(2)
    ends = np.sort(rng.integers(0, n, size=(500, 2)), axis=1)
    prefix = np.concatenate([[0], np.cumsum(counts)])
    truth = prefix[ends[:, 1] + 1] - prefix[ends[:, 0]]
    a = release.answer_many(whole.parsed([{"x": [int(lo), int(hi)]} for lo, hi in ends]))
    b = whole.answer_many(whole.parsed([{"x": [int(lo), int(hi)]} for lo, hi in ends]))
    return [
        f"| {name}, Identity, eps={epsilon:g} | 500 random ranges ({n:,} cells) | 500 | "
        f"{int((release.counts < 0).sum()):,} | {np.abs(a - truth).mean():.2f} | "
        f"{np.abs(b - truth).mean():.2f} | {np.abs(b - a).mean():.2f} | {seconds:.2f} |"
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    p.add_argument("--epsilon", type=float, default=1.0)
    args = p.parse_args(argv)
    eps = args.epsilon
    rows = [
        "| release | table | cells / queries | negative before | mean abs error, unrounded "
        "| mean abs error, integer | mean abs change | to_integer seconds |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows += generated_cube(eps)
    if (args.data_dir / "adult").is_dir():
        rows += adult_cube(args.data_dir, eps)
    if (args.data_dir / "ipums_cps").is_dir():
        rows += census_rows(args.data_dir, eps)
    hepth = args.data_dir / "dpbench" / "1D" / "HEPTH.n4096.npy"
    if hepth.is_file():
        rows += cells_rows("DPBench HEPTH", np.rint(np.load(hepth)).astype(np.int64), eps)
    gowalla = args.data_dir / "dpbench" / "2D" / "checkin_256_256.npy"
    if gowalla.is_file():
        grid = np.rint(np.load(gowalla)).astype(np.int64)
        rows += spatial_rows("Gowalla check-ins 256 x 256", grid, eps)
    rng = np.random.default_rng(3)
    pts = np.clip(rng.normal(20, 4, size=(20_000, 2)), 0, 63).astype(int)
    grid = np.zeros((64, 64), dtype=np.int64)
    np.add.at(grid, (pts[:, 0], pts[:, 1]), 1)
    rows += spatial_rows("generated clustered points 64 x 64", grid, eps)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
