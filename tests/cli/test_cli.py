"""The dpcube command line: release, query, budget, demo and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpcube.cli.main import main, parse_params, parse_where

SCHEMA = {
    "attributes": [
        {"name": "age", "kind": "ordinal", "range": [0, 9], "width": 1},
        {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
        {"name": "job", "kind": "nominal", "hierarchy": {"Prof": ["Eng", "Doc"], "Svc": ["Cook"]}},
    ]
}


@pytest.fixture
def dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    rng = np.random.default_rng(0)
    n = 500
    df = pd.DataFrame(
        {
            "age": rng.integers(0, 10, n),
            "sex": rng.choice(["F", "M"], n),
            "job": rng.choice(["Eng", "Doc", "Cook"], n),
        }
    )
    data = tmp_path / "people.csv"
    df.to_csv(data, index=False)
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    return data, schema


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_release_query_budget_round_trip(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    out = tmp_path / "rel"
    code, text, _ = run(
        capsys,
        "release",
        str(data),
        "--schema",
        str(schema),
        "--mechanism",
        "identity",
        "--epsilon",
        "0.25",
        "--total-epsilon",
        "1",
        "--out",
        str(out),
        "--seed",
        "7",
    )
    assert code == 0
    assert "NOT FOR PUBLICATION" in text
    assert "epsilon=0.75" in text
    code, text, _ = run(
        capsys, "query", str(out), "--where", '{"job": "Prof", "age": [2, 5]}', "--json"
    )
    assert code == 0
    result = json.loads(text)
    assert set(result) >= {"answer", "stddev", "lower", "upper", "level"}  # the JSON contract
    # 4 ages x 2 sexes x 2 jobs = 16 cells of discrete Laplace with scale 4: variance 16 * 2p/(1-p)^2.
    p = np.exp(-1 / 4)
    assert result["stddev"] == pytest.approx(np.sqrt(16 * 2 * p / (1 - p) ** 2), rel=1e-3)
    code, text2, _ = run(capsys, "query", str(out), "--where", "job=Prof, age=2..5", "--json")
    assert json.loads(text2) == result
    code, text, _ = run(capsys, "budget", str(data), "--json")
    budget = json.loads(text)
    assert budget["spent"]["epsilon"] == pytest.approx(0.25)
    assert budget["remaining"]["epsilon"] == pytest.approx(0.75)
    assert len(budget["releases"]) == 1


def test_overspending_is_refused_in_one_line(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    args = [
        "release",
        str(data),
        "--schema",
        str(schema),
        "--mechanism",
        "identity",
        "--out",
        str(tmp_path / "r"),
    ]
    assert run(capsys, *args, "--epsilon", "0.6", "--total-epsilon", "1")[0] == 0
    code, _, err = run(capsys, *args, "--epsilon", "0.6", "--overwrite")
    assert code == 2
    assert err.count("\n") == 1 and "0.4 of 1 left" in err
    assert "Traceback" not in err


def test_release_without_a_total_budget_is_refused(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    code, _, err = run(
        capsys,
        "release",
        str(data),
        "--schema",
        str(schema),
        "--mechanism",
        "identity",
        "--epsilon",
        "0.5",
        "--out",
        str(tmp_path / "r"),
    )
    assert code == 2 and "no total budget" in err and "--set-total" in err
    # The message names the file the user gave, not only the ledger's hashed label.
    assert f"dpcube budget {data} --set-total" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--epsilon", "0"], "epsilon must be positive"),
        (["--epsilon", "-1"], "epsilon must be positive"),
        (["--epsilon", "0.1", "--param", "noise=gaussian"], "delta"),
    ],
)
def test_bad_privacy_parameters(
    dataset: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    needle: str,
) -> None:
    data, schema = dataset
    code, _, err = run(
        capsys,
        "release",
        str(data),
        "--schema",
        str(schema),
        "--mechanism",
        "identity",
        "--total-epsilon",
        "1",
        "--out",
        str(tmp_path / "r"),
        *argv,
    )
    assert code == 2 and needle in err and err.startswith("error: ")


def test_query_errors_name_the_problem(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    out = tmp_path / "rel"
    run(
        capsys,
        "release",
        str(data),
        "--schema",
        str(schema),
        "--mechanism",
        "identity",
        "--epsilon",
        "0.5",
        "--total-epsilon",
        "1",
        "--out",
        str(out),
    )
    code, _, err = run(capsys, "query", str(out), "--where", "job=Pilot")
    assert code == 2 and "'Pilot'" in err
    code, _, err = run(capsys, "query", str(out), "--where", "height=1..2")
    assert code == 2 and "unknown attribute 'height'" in err
    code, _, err = run(capsys, "query", str(tmp_path / "nothing"), "--where", "")
    assert code == 2 and "not a dpcube release" in err


def test_debug_shows_the_traceback(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    from dpcube.errors import BudgetError

    data, schema = dataset
    with pytest.raises(BudgetError):
        main(
            [
                "--debug",
                "release",
                str(data),
                "--schema",
                str(schema),
                "--mechanism",
                "identity",
                "--epsilon",
                "0",
                "--out",
                str(tmp_path / "r"),
            ]
        )


def test_parse_where_forms() -> None:
    assert parse_where("age=2..5, sex=F, loc=1..2:3..4") == {
        "age": [2, 5],
        "sex": "F",
        "loc": [[1, 2], [3, 4]],
    }
    assert parse_where("") == {}
    assert parse_params(["levels=3", "name=x", "flags=[1, 2]"]) == {
        "levels": 3,
        "name": "x",
        "flags": [1, 2],
    }


def test_demo_runs_and_writes_a_loadable_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import dpcube

    code, text, _ = run(capsys, "demo", "--rows", "20000", "--out", str(tmp_path / "demo"))
    assert code == 0
    assert "women aged 18-64" in text
    release = dpcube.load_release(tmp_path / "demo" / "release")
    assert release.metadata.for_publication
    assert release.metadata.report == {}  # the exact row count stays out of the release
    assert abs(release.answer({}) - 20000) < 20 * release.stddev({})
    # The HTML report is written beside report.md, and the demo says how to open and serve it.
    from dpcube.release.base import is_dpcube_report

    report = tmp_path / "demo" / "release" / "report.html"
    assert is_dpcube_report(report)
    flat = "".join(text.split())  # rich wraps long lines, even inside a path
    assert str(report) in flat
    assert f"serveit:dpcubeserve{tmp_path / 'demo' / 'release'}" in flat


def test_console_entry_point(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dpcube.cli.main", "query", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
