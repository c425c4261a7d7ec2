"""The quadtree's default height rule against every fixed height."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcube.mechanisms.spatial import QuadTree
from dpcube.mechanisms.spatial.trees import quadtree_height
from dpcube.release.cells import box_sums, prefix_sums
from experiments.quadtree_height import main, random_boxes, summary, sweep


def test_height_rules() -> None:
    assert [quadtree_height(h, 256, 256) for h in (1, 4, 12, 15, 30)] == [2, 3, 7, 8, 8]
    assert [quadtree_height(h, 256, 256, "spec") for h in (1, 4, 12, 15, 30)] == [0, 2, 6, 7, 8]
    assert quadtree_height(20, 4, 4) == 2  # capped at one cell per leaf
    with pytest.raises(Exception, match="height_rule"):
        QuadTree(1.0, height_rule="deep")


def test_sweep_oracle_is_the_minimum(capsys: pytest.CaptureFixture[str]) -> None:
    F = np.random.default_rng(3).poisson(20, size=(16, 16)).astype(np.int64)
    boxes = random_boxes(16, 50, 0)
    assert (
        box_sums(prefix_sums(F), boxes)[0]
        == F[boxes[0, 0, 0] : boxes[0, 0, 1] + 1][:, boxes[0, 1, 0] : boxes[0, 1, 1] + 1].sum()
    )
    rows = sweep("t", F, (0.1, 1.0), 1, boxes)
    for r in rows:
        maes = [r[f"mae_{k}"] for k in range(2, 5)]
        assert r[f"mae_{r['oracle_height']}"] == min(maes)
        assert all(r[f"{rule}_ratio"] >= 1.0 for rule in ("tuned", "spec", "full"))
    s = summary(rows)
    assert s["full"]["worst"] >= s["full"]["geomean"] >= 1.0
    assert main(["--quick", "--reps", "1", "--queries", "50"]) == 0
    assert "geometric mean ratio to the oracle" in capsys.readouterr().out


@pytest.mark.data
def test_tuned_rule_on_gowalla_checkins(data_dir: Path) -> None:
    """Gowalla check-ins: at eps 0.1 (N = 6.44M, h = 15) the "spec" rule floor(h/2) = 7 was 13.7x
    the full-height tree's error on 1,000 rectangles; the tuned rule picks the full height, 8.
    One seed and 300 rectangles: the gap is an order of magnitude, far beyond seed noise (the
    three-seed run gives 8,634 against 633 mean absolute error)."""
    F = np.rint(np.load(data_dir / "dpbench" / "2D" / "checkin_256_256.npy")).astype(np.int64)
    (row,) = sweep("checkin", F, (0.1,), 1, random_boxes(256, 300, 0))
    assert row["tuned_height"] == 8 and row["tuned_ratio"] < 1.1
    assert row["spec_height"] == 7 and row["spec_ratio"] > 5
