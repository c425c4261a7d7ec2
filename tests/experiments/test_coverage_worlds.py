"""The generated-worlds coverage suite, small: trusted intervals cover on worlds nobody tuned
them on (spatial and census families, every query shape)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from experiments import coverage_worlds as cw


def test_generated_worlds_cover_at_the_stated_level(tmp_path: Path) -> None:
    rows = cw.run(12, seed=0, quick=True)
    families = {r["family"] for r in rows}
    assert set(cw.SPATIAL_FAMILIES) <= families and set(cw.CENSUS_FAMILIES) <= families
    shapes = {r["shape"] for r in rows}
    assert {"cell", "small", "medium", "large", "one_size", "size_range", "region_total"} <= shapes
    pooled: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        pooled[r["mechanism"]][0] += r["trusted"]
        pooled[r["mechanism"]][1] += r["covered"]
    # Every mechanism with a trusted interval, pooled over its families and shapes (a few
    # hundred answers: per-cell counts at this size are too small to judge one cell): coverage at
    # least 95 % minus two binomial standard errors (cw.threshold). Answers of one release share
    # its noise, so the spread is wider than binomial; the intervals are conservative (bounds),
    # which is why the pooled figures sit near 98-100 %.
    mechanisms = [m for m, _, _ in cw.SPATIAL_MECHANISMS] + [m for m, _ in cw.CENSUS_MECHANISMS]
    for mechanism in mechanisms:
        n, covered = pooled[mechanism]
        assert n >= 50, (mechanism, n)
        assert covered / n >= cw.threshold(n), (mechanism, covered, n)
    assert all(r["not_trusted"] == 0 for r in rows)  # every mechanism here has a trusted interval
    assert cw.main(["--worlds", "2", "--quick", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "coverage_worlds.md").read_text()
    assert "| mechanism | family | shape |" in table
    assert (tmp_path / "coverage_worlds.csv").read_text().startswith("mechanism,family,shape")


def test_worlds_are_what_their_family_says() -> None:
    rng = np.random.default_rng(1)
    corners = cw.spatial_world("corners", 32, rng, quick=True)
    mask = np.zeros((32, 32), dtype=bool)
    mask[::8, ::8] = True
    assert corners[~mask].sum() == 0 and corners[mask].sum() >= 1000
    sparse = cw.spatial_world("sparse", 32, rng, quick=True)
    assert 100 <= sparse.sum() <= 1000
    table = cw.census_world("big_groups", rng, quick=True)
    assert table.counts.shape[1] == 60 and table.counts[0, 30:].sum() > 0  # large groups exist
