"""Every bad input on the command line is one line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dpcube.cli.main import main, parse_where
from dpcube.errors import QueryError

SCHEMA = {
    "attributes": [
        {"name": "age", "kind": "ordinal", "range": [0, 9], "width": 1},
        {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
    ]
}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    data = tmp_path / "people.csv"
    data.write_text("age,sex\n1,F\n2,M\n3,F\n")
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    return data, schema


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    _, err = capsys.readouterr()
    return code, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def release(data: Path, schema: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "release", str(data), "--schema", str(schema), "--mechanism", "matrix", "--epsilon", "1",
        "--out", str(tmp_path / "rel"), "--total-epsilon", "5", *extra,
    ]  # fmt: skip


def test_param_with_wrong_type_names_the_parameter(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = files
    code, err = run(capsys, *release(data, schema, tmp_path, "--param", "branching=two"))
    assert code == 2
    assert "--param branching" in one_line(err) and "integer" in err
    code, err = run(capsys, *release(data, schema, tmp_path, "--param", "max_levels=1.5"))
    assert code == 2 and "--param max_levels" in one_line(err)


def test_workload_too_large_to_plan_is_refused_before_allocating(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = run(capsys, "plan", "--workload", "allrange:200000", "--epsilon", "1")
    assert code == 2
    assert "200000" in one_line(err) and "at most" in err


@pytest.mark.parametrize("rows", ["-5", "0"])
def test_negative_demo_size_is_refused(
    rows: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(capsys, "demo", "--rows", rows, "--out", str(tmp_path / "demo"))
    assert code == 2
    assert "--rows" in one_line(err)
    assert not (tmp_path / "demo").exists()


def test_python_dash_m_dpcube_works(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dpcube", "plan", "--workload", "allrange:8", "--epsilon", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "recommended" in proc.stdout


def test_repeated_attribute_in_where_is_an_error() -> None:
    with pytest.raises(QueryError, match=r"'age'.*twice"):
        parse_where("age=1..2, age=3..4")
    with pytest.raises(QueryError, match=r"'age'.*twice"):
        parse_where('{"age": [1, 2], "age": [3, 4]}')


def test_library_errors_name_the_file(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, schema = files
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    code, err = run(capsys, *release(junk, schema, tmp_path))
    assert code == 2 and "junk.parquet" in one_line(err)


def test_bad_yaml_schema_is_one_line(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, _ = files
    bad = tmp_path / "bad.yaml"
    bad.write_text("attributes: [\n  - {name: a\n")
    code, err = run(capsys, *release(data, bad, tmp_path))
    assert code == 2 and "bad.yaml" in one_line(err) and "line" in err


def test_release_directory_is_a_file_is_one_line(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(capsys, "query", str(files[0]), "--where", "age=1..2")
    assert code == 2
    one_line(err)


def test_unexpected_exception_is_one_line_asking_for_a_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dpcube.cli.main as cli

    def boom(_: object) -> int:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(cli, "cmd_query", boom)
    code, err = run(capsys, "query", "x")
    assert code == 1
    line = one_line(err)
    assert "internal error" in line and "--debug" in line and "ZeroDivisionError" in line
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "query", "x"])


def test_library_exception_is_translated_with_debug_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import duckdb

    import dpcube.cli.main as cli

    def boom(_: object) -> int:
        raise duckdb.IOException("IO Error: disk on fire")

    monkeypatch.setattr(cli, "cmd_query", boom)
    code, err = run(capsys, "query", "x")
    assert code == 2
    assert "disk on fire" in one_line(err) and "internal error" not in err
    with pytest.raises(duckdb.IOException):
        main(["--debug", "query", "x"])


@pytest.mark.parametrize("mechanism", ["privelet", "privelet-plus", "datacube", "census-hierarchy"])
def test_delta_is_refused_by_pure_epsilon_mechanisms(
    mechanism: str, files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--delta used to be dropped silently by census and Privelet: refused, before any charge."""
    data, schema = files
    argv = release(data, schema, tmp_path, "--delta", "1e-6")
    argv[argv.index("matrix")] = mechanism
    code, err = run(capsys, *argv)
    assert code == 2
    line = one_line(err)
    assert "--delta" in line and "pure epsilon-DP" in line and mechanism in line
    assert not (tmp_path / "rel").exists()
    assert not list((tmp_path / "home").rglob("*.ledger"))  # nothing charged
