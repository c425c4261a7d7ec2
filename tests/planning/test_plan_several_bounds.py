"""``dpcube plan --max-rows-per-unit 1,5,10,50``: every mechanism's error at each K, no budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpcube.cli.main import main
from dpcube.privacy.samplers import discrete_laplace_variance

SCHEMA = {
    "attributes": [
        {"name": "delay", "kind": "ordinal", "range": [0, 7], "width": 1},
        {"name": "carrier", "kind": "nominal", "categories": ["AA", "B6", "UA"]},
    ]
}


def plan(capsys: pytest.CaptureFixture[str], tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    argv = ["plan", "--schema", str(schema), "--workload", "marginals:1", "--epsilon", "1"]
    code = main([*argv, *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_error_at_each_k_is_k_times_the_rows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The identity mechanism's noise is discrete Laplace of scale K / epsilon: its error at
    K = 50 is the variance at scale 50 over that at scale 1 times the error at K = 1 (about
    2500 / 0.92: the discrete variance at scale 1 is 1.84, not 2)."""
    code, out, err = plan(capsys, tmp_path, "--max-rows-per-unit", "1,5,10,50", "--json")
    assert code == 0, err
    by_k = json.loads(out)["by_max_rows_per_unit"]
    assert sorted(by_k, key=int) == ["1", "5", "10", "50"]
    one = {c["label"]: c["expected_error"] for c in by_k["1"]["candidates"]}
    fifty = {c["label"]: c["expected_error"] for c in by_k["50"]["candidates"]}
    ratio = float(discrete_laplace_variance(50.0) / discrete_laplace_variance(1.0))
    assert fifty["identity(laplace)"] == pytest.approx(ratio * one["identity(laplace)"])
    code, out, err = plan(capsys, tmp_path, "--max-rows-per-unit", "1,5,10,50")
    assert code == 0 and "K=50" in out and "no budget spent" in out
    assert "identity" in out


def test_several_k_are_refused_with_a_target_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = plan(capsys, tmp_path, "--max-rows-per-unit", "1,5", "--target-error", "3")
    assert code == 2 and "one whole-number --max-rows-per-unit" in err
    code, _, err = plan(capsys, tmp_path, "--max-rows-per-unit", "1,x")
    assert code == 2 and "--max-rows-per-unit" in err


def test_auto_shows_the_candidates_of_the_private_choice(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = plan(capsys, tmp_path, "--max-rows-per-unit", "auto", "--json")
    assert code == 0, err
    assert list(json.loads(out)["by_max_rows_per_unit"]) == [str(2**j) for j in range(11)]
