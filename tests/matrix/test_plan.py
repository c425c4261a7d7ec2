"""``dpcube plan``: expected errors of every strategy without data, and the recommendation."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from dpcube.mechanisms.matrix.bound import svdb
from dpcube.mechanisms.matrix.plan import plan, register
from dpcube.mechanisms.matrix.workloads import allrange
from dpcube.privacy.samplers import gaussian_sigma


def test_plan_errors_and_recommendation() -> None:
    result = plan(allrange((16,)), 1.0, 1e-6)
    unit = gaussian_sigma(1.0, 1.0, 1e-6) ** 2
    assert result["svdb"] == pytest.approx(unit * 404.482931, rel=1e-6)
    assert set(result["strategies"]) >= {"identity", "hierarchical", "wavelet", "eigen", "lsa"}
    assert result["strategies"]["identity"]["nominal_error"] == pytest.approx(
        unit * 16 * 17 * 18 / 6, rel=1e-9
    )
    assert result["strategies"]["lsa"]["ratio"] == pytest.approx(418.717231 / 404.482931, rel=1e-6)
    for row in result["strategies"].values():
        assert row["ratio"] >= 1 - 1e-9
    assert result["recommended"] == "gauss-opt"  # attains the certified optimum
    laplace = plan(allrange((16,)), 0.5, None, ["identity", "wavelet"])
    assert laplace["strategies"]["identity"]["nominal_error"] == pytest.approx(8 * 816, rel=1e-9)
    assert laplace["svdb"] == pytest.approx(8 * svdb(allrange((16,)).gram), rel=1e-9)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(argv)
    code = args.func(args)
    return code, capsys.readouterr().out


def test_plan_command_json_and_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(
        ["plan", "--workload", "allrange:8x8", "--epsilon", "1", "--delta", "1e-6", "--json"],
        capsys,
    )
    assert code == 0
    data = json.loads(out)
    assert data["recommended"] in data["strategies"]
    assert data["strategies"]["hierarchical"]["ratio"] > data["strategies"]["lsa"]["ratio"] >= 1
    schema = tmp_path / "s.json"
    schema.write_text(
        json.dumps(
            {"attributes": [{"name": "age", "kind": "ordinal", "range": [0, 7], "width": 1}]}
        )
    )
    queries = tmp_path / "q.json"
    queries.write_text(json.dumps([{"age": [0, 3]}, {"age": [2, 7]}, {"age": [5, 5]}]))
    code, out = _run(
        ["plan", "--schema", str(schema), "--workload", str(queries), "--epsilon", "1"], capsys
    )
    assert code == 0 and "recommended" in out
    code, _ = _run(["plan", "--workload", "nonsense:1", "--epsilon", "1"], capsys)
    assert code == 2
