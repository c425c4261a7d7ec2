"""``python -m experiments.pythia_train``: a tiny grid runs, fits a rule and scores it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcube.planning.pythia import SelectionRule
from experiments import pythia_train

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.mark.skipif(not (DATA / "dpbench").is_dir(), reason="../shared/data/dpbench is absent")
def test_a_tiny_grid_fits_and_scores_a_rule(tmp_path: Path) -> None:
    argv = ["--data-dir", str(DATA), "--max-datasets", "2", "--scales", "1e3,1e4"]
    argv += ["--trials", "1", "--epsilons", "1", "--size-1d", "16", "--size-2d", "4"]
    argv += ["--queries", "50", "--no-write-rule", "--out", str(tmp_path)]
    assert pythia_train.main(argv) == 0
    rows = pythia_train.read_rows(tmp_path / "runs.csv")
    assert {r["dims"] for r in rows} == {1, 2}
    assert {r["mechanism"] for r in rows if r["dims"] == 1} == set(pythia_train.arms_for(1))
    score = (tmp_path / "score.md").read_text()
    assert "1-D, 4 rows" in score and "2-D, 4 rows" in score
    rule = pythia_train.fit_rule(rows, 0.05, "test", seed=1)
    again = SelectionRule.from_dict(rule.to_dict())
    assert again.arms(1) and set(again.arms(2)) <= set(pythia_train.arms_for(2))
