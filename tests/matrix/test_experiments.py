"""``python -m experiments.matrix`` (the experiments of Li and Miklau, 2011 preprint, Secs. 3.2, 4 and
5): a quick run of the analytic parts writes sane tables."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from experiments.matrix import TIE_WINDOWS, main


def _read(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_quick_run_writes_the_lsa_tables_and_plots(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path), "--quick", "--parts", "ties,fig3a,fig3c,fig3d"]) == 0
    ties = _read(tmp_path / "lsa_ties.csv")
    assert len(ties) == 2 * len(TIE_WINDOWS)
    default = {r["domain"]: r for r in ties if float(r["tie"]) == 1e-12}
    # The default tie window reproduces the unit-tested runs (tests/matrix/test_lsa.py, small grids).
    assert (default["2x2x2x2"]["levels"], default["2x2x2x2"]["rows"]) == ("5", "52")
    assert float(default["4x4x4"]["ratio"]) == pytest.approx(1.034, abs=0.005)
    assert all(float(r["ratio"]) > 1.0 for r in ties)
    separation = _read(tmp_path / "figure_3c.csv")
    assert [int(r["d"]) for r in separation] == [4, 8]
    generalization = _read(tmp_path / "figure_3d.csv")
    assert [int(r["n"]) for r in generalization] == [64]
    assert float(generalization[0]["generalized"]) >= 1.0
    lsa_3a = {r["domain"]: float(r["lsa"]) for r in _read(tmp_path / "figure_3a.csv")}
    assert set(lsa_3a) == {"64", "8x8", "4x4x4", "2x2x2x2x2x2"}
    assert all(1.0 < v < 1.2 for v in lsa_3a.values())
    for name in ("figure_3a", "figure_3c", "figure_3d"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
