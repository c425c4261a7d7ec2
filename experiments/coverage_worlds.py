"""Coverage of the trusted intervals on generated worlds nobody tuned them on.

``python -m experiments.coverage_worlds --worlds 100 --out DIR``: draws ``--worlds``
worlds (seeded: world ``w`` is drawn from ``--seed + w``), half spatial, half census group-size
tables, each from one of several families, releases each with every mechanism of its kind
(seeded, unaccounted: an experiment, never for publication), answers random queries of every
shape with :func:`dpcube.release.uncertainty.answer_uncertainty` (the default, trusted
intervals) and counts how often the *trusted* intervals (``interval_kind`` exact or bound) hold
the true answer, per mechanism x world family x query shape.

Spatial families (cell counts on a ``side x side`` grid, ``N`` points, ``N`` log-uniform in
[10^3, 10^7], drawn as one multinomial over the cells' densities):

- ``uniform``: even density; ``clustered``: a few tight Gaussian clusters on a faint background;
- ``heavy``: many clusters with Pareto(1.2) weights and widths (a few dominate);
- ``roads``: points along random straight lines, a cell wide;
- ``sparse``: the same as clustered with N in [10^2, 10^3];
- ``corners``: points piled in one corner cell of every 8 x 8 block (the layout the uniformity
  assumption is most wrong about).

Census families (a nation with regions, or regions with sub-regions; group sizes 1..k):

- ``long_tail``: Zipf sizes (exponent 1.3..2.5) capped at k; ``small_regions``: 100-300
  regions holding 1-10 groups each; ``big_groups``: k up to 1,000 with log-uniform sizes;
  ``households``: geometric sizes, many groups per region.

Query shapes: spatial ``cell`` (one cell), ``small`` (at most 2 % of the map), ``medium``
(2-20 %), ``large`` (20-95 %); census ``one_size`` (a region, one size), ``size_range`` (a
region, a range of sizes), ``region_total`` (a region, every size), at every level of the
hierarchy.

A cell of the table passes when its coverage is at least ``95 % - 2 sqrt(0.05 x 0.95 / n)``
(``n`` trusted answers in the cell). Answers of one release share its noise, so the binomial
standard error is a floor: a failing cell is a finding, a passing one is evidence, not proof.
Answers with no trusted interval (``model`` or ``none``) are counted separately.

Outputs under ``--out``: ``coverage_worlds.csv`` (one row per mechanism x family x shape) and
``coverage_worlds.md`` (the table). ``--quick``: small grids, few queries, N at most 10^5, k at
most 60 (the test suite runs it).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.files import write_atomic
from dpcube.histogram import Histogram
from dpcube.release.cells import box_sums, prefix_sums
from dpcube.release.uncertainty import answer_uncertainty

LEVEL = 0.95
SPATIAL_FAMILIES = ("uniform", "clustered", "heavy", "roads", "sparse", "corners")
CENSUS_FAMILIES = ("long_tail", "small_regions", "big_groups", "households")
#: Spatial mechanisms: (label, registry name, extra parameters); ``-nc``: without consistency
#: (the bound then rests on the released leaves, not on the raw counts kept beside them).
SPATIAL_MECHANISMS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("ug", "ug", {}),
    ("htf", "htf", {}),
    ("privtree", "privtree", {}),
    ("quadtree", "quadtree", {}),
    ("quadtree-nc", "quadtree", {"consistency": False}),
    ("kdtree", "kdtree", {}),
    ("kdtree-nc", "kdtree", {"consistency": False}),
    ("ag", "ag", {}),
)
CENSUS_MECHANISMS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("dp", {"method": "dp"}),
    ("cdp", {"method": "cdp"}),
    ("topdown", {"method": "topdown"}),
)
EPSILONS = (0.1, 0.5, 1.0)


# -- worlds ---------------------------------------------------------------------------------


def spatial_world(family: str, side: int, rng: np.random.Generator, quick: bool) -> NDArray:
    """Cell counts of one world of ``family`` on a ``side x side`` grid."""
    top = 5 if quick else 7
    n = int(10 ** rng.uniform(2, 3)) if family == "sparse" else int(10 ** rng.uniform(3, top))
    rr, cc = np.meshgrid(np.arange(side) + 0.5, np.arange(side) + 0.5, indexing="ij")
    density = np.full((side, side), 1e-9)
    if family == "uniform":
        density += 1.0
    elif family in ("clustered", "sparse"):
        density += 0.02
        for _ in range(int(rng.integers(2, 6))):
            r0, c0 = rng.uniform(0, side, 2)
            w = rng.uniform(0.5, side / 10)
            density += rng.uniform(1, 5) * np.exp(-((rr - r0) ** 2 + (cc - c0) ** 2) / (2 * w * w))
    elif family == "heavy":
        for _ in range(int(rng.integers(20, 60))):
            r0, c0 = rng.uniform(0, side, 2)
            w = min(0.3 * (rng.pareto(1.2) + 1.0), side / 3)
            density += (rng.pareto(1.2) + 1.0) * np.exp(
                -((rr - r0) ** 2 + (cc - c0) ** 2) / (2 * w * w)
            )
    elif family == "roads":
        for _ in range(int(rng.integers(3, 9))):
            r0, c0 = rng.uniform(0, side, 2)
            angle = rng.uniform(0, math.pi)
            dist = np.abs((rr - r0) * math.sin(angle) - (cc - c0) * math.cos(angle))
            density += rng.uniform(0.5, 2) * (dist < 0.7)
        density += 0.001
    elif family == "corners":
        density[::8, ::8] += 1.0
    else:
        raise ValueError(f"unknown spatial family {family!r}")
    p = (density / density.sum()).ravel()
    return rng.multinomial(n, p).reshape(side, side).astype(np.int64)


def spatial_queries(
    side: int, per_shape: int, rng: np.random.Generator
) -> list[tuple[str, NDArray[np.int64]]]:
    """``per_shape`` random inclusive boxes of each shape: (shape, [[r0, r1], [c0, c1]])."""
    out: list[tuple[str, NDArray[np.int64]]] = []
    area = side * side
    bands = {"cell": (1, 1), "small": (2, 0.02 * area), "medium": (0.02 * area, 0.2 * area),
             "large": (0.2 * area, 0.95 * area)}  # fmt: skip
    for shape, (lo, hi) in bands.items():
        made = 0
        while made < per_shape:
            target = rng.uniform(lo, max(lo, hi))
            aspect = math.exp(rng.uniform(-math.log(4), math.log(4)))
            h = int(np.clip(round(math.sqrt(target * aspect)), 1, side))
            w = int(np.clip(round(target / h), 1, side))
            if shape == "cell":
                h = w = 1
            elif not lo <= h * w <= max(lo, hi):
                continue
            r0, c0 = int(rng.integers(0, side - h + 1)), int(rng.integers(0, side - w + 1))
            out.append((shape, np.array([[r0, r0 + h - 1], [c0, c0 + w - 1]], dtype=np.int64)))
            made += 1
    return out


def census_world(family: str, rng: np.random.Generator, quick: bool) -> Any:
    """A :class:`~dpcube.mechanisms.census.table.GroupSizeTable` of one world of ``family``."""
    from dpcube.mechanisms.census.hierarchy import RegionHierarchy
    from dpcube.mechanisms.census.table import GroupSizeTable

    if family == "small_regions":
        regions = int(rng.integers(30, 60)) if quick else int(rng.integers(100, 300))
        groups = rng.integers(1, 11, size=regions)
    else:
        regions = int(rng.integers(3, 12)) if quick else int(rng.integers(5, 50))
        groups = rng.integers(5, 200 if quick else 2000, size=regions)
    k = {"big_groups": 60 if quick else int(rng.integers(200, 1001))}.get(
        family, 30 if quick else 100
    )
    three_levels = bool(rng.random() < 0.5) and family != "small_regions"
    if three_levels:
        parents = {f"S{i}": "N" for i in range(max(2, regions // 3))}
        parents.update({f"R{i}": f"S{i % max(2, regions // 3)}" for i in range(regions)})
    else:
        parents = {f"R{i}": "N" for i in range(regions)}
    h = RegionHierarchy.from_parents(parents)
    n_leaves = len(np.arange(h.size)[h.leaves])
    leaves = np.zeros((n_leaves, k), dtype=np.int64)
    exponent = rng.uniform(1.3, 2.5)
    for i, g in enumerate(groups[:n_leaves]):
        if family in ("long_tail", "small_regions"):
            sizes = rng.zipf(exponent, size=int(g))
        elif family == "big_groups":
            sizes = np.exp(rng.uniform(0, math.log(k), size=int(g))).astype(np.int64)
        elif family == "households":
            sizes = rng.geometric(0.4, size=int(g))
        else:
            raise ValueError(f"unknown census family {family!r}")
        np.add.at(leaves[i], np.clip(sizes, 1, k) - 1, 1)
    # an experiment on generated data: its number of groups is public by construction
    return GroupSizeTable(h, h.aggregate(leaves)).declare_public_groups(declared_by="experiment")


def census_queries(
    table: Any, per_shape: int, rng: np.random.Generator
) -> list[tuple[str, dict[str, Any]]]:
    """``per_shape`` queries of each census shape, regions drawn from every level."""
    h = table.hierarchy
    k = int(table.counts.shape[1])
    out: list[tuple[str, dict[str, Any]]] = []
    for shape in ("one_size", "size_range", "region_total"):
        for _ in range(per_shape):
            level = int(rng.integers(1, h.levels + 1))
            names = [n for n, lv in zip(h.names, h.level, strict=True) if lv == level]
            region = names[int(rng.integers(0, len(names)))]
            if shape == "one_size":
                s = int(min(k, rng.zipf(1.5)))
                size: Any = [s, s]
            elif shape == "size_range":
                lo = int(rng.integers(1, k + 1))
                size = [lo, int(rng.integers(lo, k + 1))]
            else:
                size = [1, k]
            out.append((shape, {"region": region, "size": size}))
    return out


# -- one world --------------------------------------------------------------------------------


Tally = dict[tuple[str, str, str], list[int]]


def _tally(
    tally: Tally, key: tuple[str, str, str], u: Any, truth: NDArray, shapes: list[str]
) -> None:
    trusted = np.isin(u.interval_kind, ("exact", "bound"))
    inside = (truth >= u.lower) & (truth <= u.upper)
    for i, shape in enumerate(shapes):
        cell = tally[(key[0], key[1], shape)]
        if trusted[i]:
            cell[0] += 1
            cell[1] += int(inside[i])
        else:
            cell[2] += 1


def run_spatial_world(tally: Tally, w: int, seed: int, quick: bool, per_shape: int) -> None:
    from dpcube import registry
    from dpcube.mechanisms.spatial._common import spatial_case_schema

    rng = np.random.default_rng(seed + w)
    family = SPATIAL_FAMILIES[w % len(SPATIAL_FAMILIES)]
    side = 32 if quick else int(rng.choice([64, 128]))
    F = spatial_world(family, side, rng, quick)
    hist = Histogram(spatial_case_schema(side, side), F)
    boxes = spatial_queries(side, per_shape, rng)
    queries = [{"p": {"bins": b.tolist()}} for _, b in boxes]
    truth = box_sums(prefix_sums(F), np.stack([b for _, b in boxes])).astype(np.float64)
    shapes = [s for s, _ in boxes]
    epsilon = float(rng.choice(EPSILONS))
    for label, name, params in SPATIAL_MECHANISMS:
        cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
        release = cls(epsilon, **params).release(hist, random_state=seed + w, account=False)
        u = answer_uncertainty(release, queries, level=LEVEL)
        _tally(tally, (label, family, ""), u, truth, shapes)


def run_census_world(tally: Tally, w: int, seed: int, quick: bool, per_shape: int) -> None:
    from dpcube.mechanisms.census.mechanism import CensusHierarchy

    rng = np.random.default_rng(seed + w)
    family = CENSUS_FAMILIES[w % len(CENSUS_FAMILIES)]
    table = census_world(family, rng, quick)
    picked = census_queries(table, per_shape, rng)
    queries = [q for _, q in picked]
    h = table.hierarchy
    truth = np.array(
        [
            table.counts[h.region_index(q["region"]), q["size"][0] - 1 : q["size"][1]].sum()
            for q in queries
        ],
        dtype=np.float64,
    )
    epsilon = float(rng.choice(EPSILONS))
    for label, params in CENSUS_MECHANISMS:
        release = CensusHierarchy(epsilon, **params).release(
            table, random_state=seed + w, account=False
        )
        u = answer_uncertainty(release, queries, level=LEVEL)
        _tally(tally, (label, family, ""), u, truth, [s for s, _ in picked])


def threshold(n: int) -> float:
    """95 % minus two binomial standard errors at ``n`` answers.

    >>> round(threshold(100), 4)
    0.9064
    """
    return LEVEL - 2.0 * math.sqrt(LEVEL * (1 - LEVEL) / max(n, 1))


def run(
    worlds: int, seed: int = 0, quick: bool = False, per_shape: int = 8
) -> list[dict[str, Any]]:
    """The table's rows: mechanism, family, shape, trusted answers, covered, coverage, the
    threshold, whether it passes, and the answers with no trusted interval. ``per_shape``:
    queries of each shape per world (answers of one release share its noise: more worlds with
    fewer queries each give a sharper table than the reverse)."""
    tally: Tally = defaultdict(lambda: [0, 0, 0])
    for w in range(worlds):
        if w % 2 == 0:
            run_spatial_world(tally, w // 2, seed, quick, per_shape)
        else:
            run_census_world(tally, w // 2, seed, quick, per_shape)
    rows = []
    for (mech, family, shape), (n, covered, untrusted) in sorted(tally.items()):
        coverage = covered / n if n else float("nan")
        rows.append(
            {
                "mechanism": mech,
                "family": family,
                "shape": shape,
                "trusted": n,
                "covered": covered,
                "coverage": coverage,
                "threshold": threshold(n),
                "passes": bool(n == 0 or coverage >= threshold(n)),
                "not_trusted": untrusted,
            }
        )
    return rows


def markdown(rows: Sequence[dict[str, Any]], command: str) -> str:
    lines = [
        f"Coverage of trusted 95 % intervals on generated worlds (`{command}`).",
        "",
        "| mechanism | family | shape | trusted answers | coverage | threshold | passes | no trusted interval |",
        "|---|---|---|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        cov = "-" if r["trusted"] == 0 else f"{100 * r['coverage']:.1f} %"
        lines.append(
            f"| {r['mechanism']} | {r['family']} | {r['shape']} | {r['trusted']} | {cov} | "
            f"{100 * r['threshold']:.1f} % | {'yes' if r['passes'] else 'NO'} | {r['not_trusted']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.coverage_worlds")
    p.add_argument("--worlds", type=int, default=100, help="worlds (half spatial, half census)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="small worlds (the test suite)")
    p.add_argument("--queries", type=int, default=8, help="queries of each shape per world")
    p.add_argument("--out", required=True, help="directory for coverage_worlds.{csv,md}")
    args = p.parse_args(argv)
    if args.worlds < 1 or args.queries < 1:
        p.error(f"--worlds and --queries must be at least 1, got {args.worlds}, {args.queries}")
    rows = run(args.worlds, args.seed, args.quick, args.queries)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header = list(rows[0]) if rows else []
    csv = (
        ",".join(header) + "\n" + "".join(",".join(str(r[h]) for h in header) + "\n" for r in rows)
    )
    import sys

    given = list(argv) if argv is not None else sys.argv[1:]
    # the command as given, the output directory (a local path) written as DIR
    shown = ["DIR" if i > 0 and given[i - 1] == "--out" else a for i, a in enumerate(given)]
    command = "python -m experiments.coverage_worlds " + " ".join(shown)
    write_atomic(out / "coverage_worlds.csv", csv.encode())
    write_atomic(out / "coverage_worlds.md", markdown(rows, command.strip()).encode())
    failing = [r for r in rows if not r["passes"]]
    print(f"{len(rows)} cells, {len(failing)} below 95 % minus two binomial standard errors")
    for r in failing:
        print(f"  {r['mechanism']} {r['family']} {r['shape']}: {r['covered']}/{r['trusted']}")
    return 0


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
