"""`dpcube plan`: the table, --json, --target-error, and one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dpcube.cli.main import main

SCHEMA = {
    "attributes": [
        {"name": "age", "kind": "ordinal", "range": [0, 7], "width": 1},
        {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
    ]
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_table_json_and_inverse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = tmp_path / "s.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    common = ["--schema", str(schema), "--workload", "upto:2", "--strategies", "hierarchical"]
    code, out, _ = run(capsys, *common, "--epsilon", "0.5")
    assert code == 0 and "<- recommended" in out and "recommended:" in out
    code, out, _ = run(capsys, *common, "--epsilon", "0.5", "--json")
    data = json.loads(out)
    assert code == 0 and data["data_read"] is False and data["budget_spent"] == 0.0
    assert data["recommended"] in {c["label"] for c in data["candidates"]}
    # the matrix mechanism's own strategy plan is kept (svdb, nominal errors)
    assert (
        data["matrix"]["svdb"] > 0
        and "nominal_error" in data["matrix"]["strategies"]["hierarchical"]
    )
    code, out, _ = run(capsys, *common, "--target-error", "30", "--json")
    inverse = json.loads(out)["inverse"]
    assert code == 0 and inverse["level"] == 0.95 and inverse["aggregate"] == "max"
    found = [n for n in inverse["needs"] if n["epsilon"] is not None]
    assert found and all(n["basis"] == "exact" for n in found)
    code, out, _ = run(capsys, *common, "--target-error", "30", "--aggregate", "mean")
    assert code == 0 and "epsilon >=" in out and "mean variance" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--workload", "allrange:8"], "--epsilon"),
        (["--workload", "upto:2", "--epsilon", "1"], "--schema"),
        (["--workload", "allrange:8", "--epsilon", "1", "--mechanisms", "nope"], "'nope'"),
        (["--workload", "allrange:8", "--target-error", "-1"], "positive"),
        (["--workload", "allrange:8", "--target-error", "5", "--level", "2"], "level"),
    ],
)
def test_bad_requests_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_every_mechanism_asked_for_has_a_row(capsys: pytest.CaptureFixture[str]) -> None:
    """``--mechanisms identity,dawa`` lists dawa (a data-dependent mechanism, with its DPBench
    figure) instead of dropping it; one that cannot answer has a not-applicable row and a reason."""
    asked = "identity,dawa,ahp,mwem,privtree,census-hierarchy,auto"
    code, out, _ = run(capsys, "--workload", "allrange:48", "--epsilon", "1", "--mechanisms", asked)
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert set(rows) == {"identity(laplace)", *asked.split(",")[1:]}
    for name in ("dawa", "ahp", "mwem"):
        assert "benchmark" in rows[name] and "auto --adaptive" in rows[name]
    assert "not-applicable" in rows["privtree"] and "spatial attribute" in rows["privtree"]
    assert "group-sizes" in rows["census-hierarchy"]
    assert "not-applicable" in rows["auto"]
    assert "recommended: identity(laplace)" in out
    code, out, _ = run(
        capsys,
        "--workload",
        "group-sizes",
        "--epsilon",
        "1",
        "--mechanisms",
        "census-hierarchy,dawa",
    )
    assert code == 0 and "group-size tables are answered by census-hierarchy only" in out
