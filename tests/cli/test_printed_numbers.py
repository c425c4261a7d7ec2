"""What ``dpcube query`` prints for a person: counts as whole numbers with each interval rounded
outward (``--full-precision`` prints every digit), "1 row" / "N rows", and tables that are never
wrapped when stdout is not a terminal."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from dpcube import Histogram, Identity, MatrixMechanism, Schema
from dpcube.cli.main import main

SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 3], "width": 1},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
        ]
    }
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fractional(tmp_path: Path) -> Path:
    """A matrix-mechanism release: least-squares estimates, never whole numbers."""
    release = MatrixMechanism(1.0, strategy="hierarchical").release(
        Histogram(SCHEMA, np.arange(8).reshape(4, 2) * 7), random_state=5, account=False
    )
    return release.save(tmp_path / "r")


def test_answers_print_whole_numbers_and_the_interval_rounded_outward(
    fractional: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, "query", str(fractional), "--where", "age=1..2", "--json")
    exact = json.loads(out)
    assert exact["answer"] != round(exact["answer"])  # the release's figure has decimals
    _, out, _ = run(capsys, "query", str(fractional), "--where", "age=1..2")
    value, lo, hi = re.match(r"^(-?\d+) \(95% interval (-?\d+) \.\. (-?\d+);", out).groups()  # type: ignore[union-attr]
    assert int(value) == round(exact["answer"])
    assert (int(lo), int(hi)) == (math.floor(exact["lower"]), math.ceil(exact["upper"]))
    _, out, _ = run(capsys, "query", str(fractional), "--where", "age=1..2", "--full-precision")
    assert out.startswith(f"{exact['answer']!r} (95% interval {exact['lower']!r} .. ")


def test_tables_print_whole_numbers_unless_full_precision(
    fractional: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, "query", str(fractional), "--group-by", "sex", "--json")
    rows = json.loads(out)["rows"]
    _, out, _ = run(capsys, "query", str(fractional), "--group-by", "sex")
    lines = out.splitlines()
    assert lines[1].split() == [
        "F",
        str(round(rows[0]["estimate"])),
        str(math.floor(rows[0]["lower"])),
        str(math.ceil(rows[0]["upper"])),
    ]
    assert lines[3] == "2 rows"
    _, out, _ = run(capsys, "query", str(fractional), "--group-by", "sex", "--full-precision")
    assert out.splitlines()[1].split()[1] == repr(rows[0]["estimate"])
    _, out, _ = run(capsys, "query", str(fractional), "--group-by", "sex", "--where", "sex=M")
    assert out.splitlines()[2] == "1 row"


def test_export_says_1_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    release = Identity(1.0).release(
        Histogram(SCHEMA, np.arange(8).reshape(4, 2)), random_state=5, account=False
    )
    release.save(tmp_path / "r")
    code, out, _ = run(
        capsys,
        "export",
        str(tmp_path / "r"),
        *("--format", "csv", "--where", "age=1, sex=F", "--out", str(tmp_path / "t.csv")),
    )
    assert code == 0 and f"wrote 1 row to {tmp_path / 't.csv'}" in out


def test_rich_tables_are_not_wrapped_in_a_pipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dpcube budget`` prints a rich table; in a pipe (capsys: not a terminal) at 80 columns
    it wrapped the release id; now every row is one line, whatever COLUMNS says."""
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "40")
    data = tmp_path / "people.csv"
    data.write_text("age,sex\n1,F\n2,M\n")
    schema = tmp_path / "schema.yaml"
    schema.write_text(json.dumps(SCHEMA.to_dict()))
    assert run(capsys, "budget", str(data), "--set-total", "2")[0] == 0
    code, _, err = run(
        capsys,
        "release",
        *(str(data), "--schema", str(schema), "--mechanism", "identity", "--epsilon", "0.5"),
        *("--out", str(tmp_path / "rel")),
    )
    assert code == 0, err
    code, out, _ = run(capsys, "budget", str(data))
    assert code == 0
    release_id = json.loads((tmp_path / "rel" / "manifest.json").read_text())["metadata"][
        "release_id"
    ]
    (row,) = [line for line in out.splitlines() if "identity" in line]
    assert release_id in row and "0.5" in row
