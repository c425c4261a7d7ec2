"""``dpcube release`` checks everything before it charges; ``dpcube query`` warns on releases that
are not for publication."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpcube.cli.main import main

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
    folder = tmp_path / "data"
    folder.mkdir()
    rng = np.random.default_rng(0)
    n = 300
    pd.DataFrame(
        {
            "age": rng.integers(0, 10, n),
            "sex": rng.choice(["F", "M"], n),
            "job": rng.choice(["Eng", "Doc", "Cook"], n),
        }
    ).to_csv(folder / "people.csv", index=False)
    schema = folder / "schema.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    return folder / "people.csv", schema


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def release(data: Path, schema: Path, out: Path, *extra: str) -> list[str]:
    return [
        "release",
        str(data),
        "--schema",
        str(schema),
        "--mechanism",
        "identity",
        "--epsilon",
        "0.5",
        "--total-epsilon",
        "2",
        "--out",
        str(out),
        *extra,
    ]


def spent(capsys: pytest.CaptureFixture[str], data: Path) -> float:
    """Epsilon charged to ``data`` (0 when a refused release never even set its total)."""
    code, text, err = run(capsys, "budget", str(data), "--json")
    if code == 2 and "no total budget is set" in err:
        return 0.0
    assert code == 0, err
    return float(json.loads(text)["spent"]["epsilon"])


def test_out_at_the_data_folder_deletes_nothing_and_charges_nothing(
    dataset: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    (data.parent / "old.parquet").write_bytes(b"unrelated")
    before = {p.name: p.read_bytes() for p in data.parent.iterdir()}
    code, _, err = run(capsys, *release(data, schema, data.parent))
    assert code == 2
    assert "not a dpcube release" in err and err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in data.parent.iterdir()} == before
    assert spent(capsys, data) == 0


def test_out_at_the_budget_home_is_refused_and_charges_nothing(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the long fuzz run: an empty ``$DPCUBE_HOME`` passed the output check, then the
    ledger was written there and the save failed after the charge."""
    data, schema = dataset
    home = tmp_path / "home"
    home.mkdir()
    for out in (home, home / "rel", tmp_path):
        code, _, err = run(capsys, *release(data, schema, out))
        assert code == 2 and "budget ledgers" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in home.iterdir()) == []
    assert spent(capsys, data) == 0


def test_overwrite_is_needed_to_replace_a_release(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    out = tmp_path / "rel"
    assert run(capsys, *release(data, schema, out))[0] == 0
    code, _, err = run(capsys, *release(data, schema, out))
    assert code == 2 and "--overwrite" in err
    assert spent(capsys, data) == pytest.approx(0.5)
    assert run(capsys, *release(data, schema, out, "--overwrite"))[0] == 0
    assert spent(capsys, data) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--param", "levls=3"], "--param levls: identity has no such parameter"),
        (["--epsilon", "1e-300"], "too small"),
        (["--param", "noise=cauchy"], "identity: --param noise='cauchy' is outside its domain"),
        (["--mechanism", "ug", "--param", "c=-1"], "ug: --param c=-1 is outside its domain"),
        (["--mechanism", "ug", "--param", "c=0"], "expected a number > 0"),
        (["--mechanism", "ug", "--param", "grid_size=0"], "--param grid_size=0"),
        (["--mechanism", "htf", "--param", "c0=0"], "htf: --param c0=0"),
        (["--mechanism", "htf", "--param", "T=1000000000"], "an integer in [1, 63]"),
        (["--mechanism", "htf", "--param", "T=0"], "htf: --param T=0"),
        (["--mechanism", "datacube", "--param", "theta0=-1"], "datacube: --param theta0=-1"),
        (["--mechanism", "datacube", "--param", "publish=k=0"], "publish k=0 must be between 1"),
        (["--mechanism", "datacube", "--param", "publish=sex,sex"], "'sex' twice"),
        (["--mechanism", "privelet-plus", "--param", "plain_attributes=sex,sex"], "named twice"),
    ],
)
def test_refused_before_the_charge(
    dataset: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    data, schema = dataset
    code, _, err = run(capsys, *release(data, schema, tmp_path / "rel"), *extra)
    assert code == 2 and message in err and err.count("\n") == 1
    assert spent(capsys, data) == 0
    assert not (tmp_path / "rel").exists()


def test_too_many_bootstrap_runs_are_refused_while_parsing(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    argv = [*release(data, schema, tmp_path / "rel"), "--mechanism", "kdtree"]
    code, _, err = run(capsys, *argv, "--bootstrap-runs", "100000000")
    assert code == 2 and err.count("\n") == 1
    assert "more than the 5000 allowed" in err
    assert spent(capsys, data) == 0
    assert not (tmp_path / "rel").exists()


def test_datacube_publish_leaving_out_attributes_works_from_the_cli(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    args = release(data, schema, tmp_path / "cube")
    args[args.index("identity")] = "datacube"
    code, _, err = run(capsys, *args, "--publish", "sex,job", "--seed", "1")
    assert code == 0, err
    code, text, _ = run(capsys, "query", str(tmp_path / "cube"), "--where", "sex=F", "--json")
    assert code == 0 and np.isfinite(json.loads(text)["answer"])


def test_query_on_a_seeded_release_warns(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    assert run(capsys, *release(data, schema, tmp_path / "seeded", "--seed", "3"))[0] == 0
    code, _, err = run(capsys, "query", str(tmp_path / "seeded"), "--where", "sex=F")
    assert code == 0 and "NOT FOR PUBLICATION" in err and "seeded" in err
    assert run(capsys, *release(data, schema, tmp_path / "real"))[0] == 0
    code, _, err = run(capsys, "query", str(tmp_path / "real"), "--where", "sex=F")
    assert code == 0 and "NOT FOR PUBLICATION" not in err


def has_total(capsys: pytest.CaptureFixture[str], data: Path) -> bool:
    code, text, err = run(capsys, "budget", str(data), "--json")
    assert code == 0, err
    return json.loads(text)["total"] is not None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--epsilon", "3"], "exceeds the remaining budget"),  # refused by the ledger itself
        (["--epsilon", "1e-300"], "too small"),  # refused after counting, before the charge
        (["--epsilon", "1e300", "--total-epsilon", "1e300"], "too large"),
        (["--param", "levls=3"], "no such parameter"),  # refused before counting
    ],
)
def test_a_refused_release_records_no_total(
    dataset: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    """--total-epsilon is recorded with the charge or not at all: a refused first release
    leaves the data set with no total, so that a corrected retry may ask for any total."""
    data, schema = dataset
    code, _, err = run(capsys, *release(data, schema, tmp_path / "rel"), *extra)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not has_total(capsys, data)
    code, _, err = run(capsys, *release(data, schema, tmp_path / "rel"), "--total-epsilon", "0.5")
    assert code == 0, err
    assert has_total(capsys, data) and spent(capsys, data) == 0.5


def test_a_total_that_differs_from_the_recorded_one_is_refused(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    assert run(capsys, *release(data, schema, tmp_path / "a"))[0] == 0  # total 2, delta 0
    for extra, flag, fix in (
        (["--total-delta", "1e-6"], "--total-delta 1e-06", "--set-total-delta 1e-06"),
        (["--total-epsilon", "3"], "--total-epsilon 3", "--set-total 3"),
    ):
        code, _, err = run(capsys, *release(data, schema, tmp_path / "b"), *extra)
        assert code == 2 and err.count("\n") == 1, err
        assert flag in err and "differs from the total" in err and fix in err
        assert spent(capsys, data) == 0.5 and not (tmp_path / "b").exists()
    # The same total, delta included, is accepted; --total-delta alone is refused.
    code, _, err = run(capsys, *release(data, schema, tmp_path / "c"), "--total-delta", "0")
    assert code == 0, err
    args = release(data, schema, tmp_path / "d")
    at = args.index("--total-epsilon")
    code, _, err = run(capsys, *args[:at], *args[at + 2 :], "--total-delta", "0")
    assert code == 2 and "--total-delta 0 sets the total budget together" in err
    assert spent(capsys, data) == 1.0


def test_a_bad_curator_log_is_refused_before_counting(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    (tmp_path / "afile").write_text("not a directory\n")
    for log, message in (
        (tmp_path / "afile" / "log.json", "is not a writable directory"),
        (tmp_path, "is a directory"),
    ):
        args = release(data, schema, tmp_path / "rel")
        code, _, err = run(capsys, *args, "--curator-log", str(log))
        assert code == 2 and message in err and err.count("\n") == 1, err
        assert not has_total(capsys, data) and not (tmp_path / "rel").exists()
    assert (tmp_path / "afile").read_text() == "not a directory\n"


def test_a_full_disk_at_out_is_refused_before_the_charge(
    dataset: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe file that finds the disk full is dpcube's own, and it is removed."""
    import errno
    import os

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    before = sorted(p.name for p in tmp_path.iterdir())
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", full)
        code, _, err = run(capsys, *release(dataset[0], dataset[1], tmp_path / "rel"))
    assert code == 2 and "the file system is full" in err and "nothing was charged" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # the probe is gone
    assert not has_total(capsys, dataset[0])


@pytest.mark.parametrize(
    ("failure", "code_expected", "cause"),
    [
        (OSError(28, "No space left on device"), 2, "No space left on device"),
        (KeyboardInterrupt(), 130, "interrupted"),
        (MemoryError(), 2, "MemoryError"),
    ],
)
def test_a_failure_after_the_charge_says_the_budget_was_spent(
    dataset: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    failure: BaseException,
    code_expected: int,
    cause: str,
) -> None:
    """A save that fails after the charge (here: after writing its journal) is one line saying
    what was charged, that nothing was released, why, and where the journal was left."""
    from dpcube.release.base import Release

    def failing_save(self: Release, directory: str, *, overwrite: bool = False) -> Path:
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        (out / ".dpcube-tmp-test.pending").write_text("[]")
        raise failure

    data, schema = dataset
    with monkeypatch.context() as patch:
        patch.setattr(Release, "save", failing_save)
        code, out, err = run(capsys, *release(data, schema, tmp_path / "rel"))
    assert code == code_expected and err.count("\n") == 1 and out == "", err
    assert "epsilon=0.5 WAS charged" in err and "the release was NOT written" in err
    assert cause in err and str(tmp_path / "rel" / ".dpcube-tmp-test.pending") in err
    assert spent(capsys, data) == 0.5


def test_a_mechanism_failure_after_the_charge_says_the_budget_was_spent(
    dataset: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dpcube.mechanisms.identity import Identity

    def broken(*args: object) -> None:
        raise RuntimeError("the noise could not be drawn")

    monkeypatch.setattr(Identity, "_release", broken)
    data, schema = dataset
    code, _, err = run(capsys, *release(data, schema, tmp_path / "rel"))
    assert code == 2 and err.count("\n") == 1, err
    assert "epsilon=0.5 WAS charged" in err and "RuntimeError: the noise could not be drawn" in err
    assert not (tmp_path / "rel").exists() and spent(capsys, data) == 0.5


def test_budget_of_a_data_set_without_a_total(
    dataset: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data, _ = dataset
    code, out, err = run(capsys, "budget", str(data))
    assert code == 0 and err == ""
    assert "no total budget is set" in out and "--set-total EPSILON" in out
    code, out, err = run(capsys, "budget", str(data), "--set-total-delta", "1e-6")
    assert code == 2 and "add --set-total" in err and out == ""


def test_overwrite_never_deletes_a_file_an_edited_manifest_lists(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    out = tmp_path / "rel"
    assert run(capsys, *release(data, schema, out))[0] == 0
    thesis = out / "thesis.txt"
    thesis.write_text("four years of work")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["tables"]["thesis"] = "thesis.txt"
    (out / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = run(capsys, *release(data, schema, out, "--overwrite"))
    assert code == 2 and "not a dpcube release" in err and err.count("\n") == 1, err
    assert thesis.read_text() == "four years of work"
    assert spent(capsys, data) == pytest.approx(0.5)  # the refused release charged nothing
