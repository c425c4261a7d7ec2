"""The budget is tied to the data's records, not to a path (docs/reliability.md 4)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from dpcube.cli.main import main
from dpcube.engine import fingerprint
from dpcube.errors import BudgetError, DataError
from dpcube.histogram import Histogram, histogram
from dpcube.mechanisms.identity import Identity
from dpcube.privacy.accounting import ledger_for
from dpcube.privacy.ledger import BudgetLedger
from dpcube.schema import Schema

SCHEMA = {
    "attributes": [
        {"name": "age", "kind": "ordinal", "range": [0, 9], "width": 5},
        {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
    ]
}


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("DPCUBE_HOME", str(h))
    return h


@pytest.fixture()
def people(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "age": rng.integers(0, 10, 200),
            "sex": rng.choice(["F", "M"], 200),
            "income": rng.normal(size=200).round(3),
        }
    )
    df.loc[3, "income"] = None
    path = tmp_path / "people.csv"
    df.to_csv(path, index=False)
    return path


def _schema() -> Schema:
    return Schema.from_dict(SCHEMA)


# -- fingerprint ------------------------------------------------------------------------------


def test_fingerprint_ignores_path_order_and_format(people: Path, tmp_path: Path) -> None:
    fp = fingerprint(people)
    assert fp.startswith("sha256:") and len(fp) == 7 + 64
    parquet = tmp_path / "people.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{people}')) TO '{parquet}'")
    renamed = tmp_path / "other-name.csv"
    shutil.copy(people, renamed)
    shuffled = tmp_path / "shuffled.parquet"
    pd.read_csv(people).sample(frac=1.0, random_state=1).to_parquet(shuffled, index=False)
    assert fingerprint(parquet) == fp
    assert fingerprint(renamed) == fp
    assert fingerprint(shuffled) == fp
    assert fingerprint(pd.read_csv(people)) == fp
    changed = pd.read_csv(people)
    changed.loc[7, "age"] = (changed.loc[7, "age"] + 1) % 10
    assert fingerprint(changed) != fp
    duplicated = pd.concat([pd.read_csv(people), pd.read_csv(people).iloc[:1]])
    assert fingerprint(duplicated) != fp


# -- ledgers follow the records -----------------------------------------------------------------


def test_copy_rename_and_parquet_meet_the_same_ledger(people: Path, tmp_path: Path) -> None:
    first = BudgetLedger.for_dataset(people)
    first.set_total(1.0)
    first.charge(0.4, mechanism="identity")
    copy = tmp_path / "copy" / "renamed.csv"
    copy.parent.mkdir()
    shutil.copy(people, copy)
    parquet = tmp_path / "people.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{people}')) TO '{parquet}'")
    for other in (copy, parquet):
        ledger = BudgetLedger.for_dataset(other)
        assert ledger.path == first.path
        assert ledger.spent().epsilon == pytest.approx(0.4)


def test_a_second_ledger_directory_for_a_known_data_set_is_refused(
    people: Path, tmp_path: Path
) -> None:
    first = BudgetLedger.for_dataset(people, tmp_path / "ledgers-a")
    first.set_total(1.0)
    with pytest.raises(BudgetError, match="already has a ledger at") as info:
        BudgetLedger.for_dataset(people, tmp_path / "ledgers-b")
    assert str(first.path) in str(info.value)


def test_a_ledger_for_a_missing_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        BudgetLedger.for_dataset(tmp_path / "nope.csv")
    assert not (tmp_path / "home").exists() or not list((tmp_path / "home").rglob("*.ledger"))


def test_two_schemas_of_one_table_share_one_budget(people: Path) -> None:
    one = histogram(people, _schema())
    other = histogram(
        people,
        Schema.from_dict(
            {"attributes": [{"name": "sex", "kind": "nominal", "categories": ["F", "M"]}]}
        ),
    )
    assert one.dataset == other.dataset == fingerprint(people)
    ledger_for(one).set_total(1.0)
    Identity(0.6).release(one)
    with pytest.raises(BudgetError, match="exceeds the remaining budget"):
        Identity(0.6).release(other)


# -- accounting on by default in the API --------------------------------------------------------


def test_unseeded_api_release_charges_the_data_sets_ledger(people: Path, tmp_path: Path) -> None:
    hist = histogram(people, _schema())
    with pytest.raises(BudgetError, match="no total budget"):
        Identity(0.5).release(hist)
    ledger_for(hist).set_total(1.0)
    release = Identity(0.5).release(hist)
    assert release.metadata.accounted and release.metadata.for_publication
    assert ledger_for(hist).spent().epsilon == 0.5
    assert [c.release_id for c in ledger_for(hist).charges()] == [release.metadata.release_id]
    out = release.save(tmp_path / "rel")
    text = "".join(p.read_text(errors="ignore") for p in out.iterdir() if p.is_file())
    assert hist.dataset is not None
    assert hist.dataset.removeprefix("sha256:") not in text
    assert hist.dataset not in repr(hist)


def test_explicit_opt_out_is_unaccounted_and_not_for_publication(tmp_path: Path) -> None:
    bare = Histogram(_schema(), np.ones((2, 2), dtype=np.int64))
    with pytest.raises(BudgetError, match="account=False") as info:
        Identity(0.5).release(bare)
    assert "\n" not in str(info.value)
    release = Identity(0.5).release(bare, account=False)
    assert release.metadata.accounted is False
    assert release.metadata.for_publication is False
    manifest = json.loads((release.save(tmp_path / "r") / "manifest.json").read_text())
    assert manifest["metadata"]["accounted"] is False
    assert manifest["metadata"]["for_publication"] is False


def test_seeded_release_needs_no_ledger() -> None:
    bare = Histogram(_schema(), np.ones((2, 2), dtype=np.int64))
    assert Identity(0.5).release(bare, random_state=3).metadata.seeded


def test_named_data_set_in_the_api(tmp_path: Path, people: Path) -> None:
    hist = histogram(people, _schema(), dataset="survey-2024")
    assert hist.dataset == "name:survey-2024"
    ledger_for(hist).set_total(0.5)
    Identity(0.5).release(hist)
    assert ledger_for("name:survey-2024").spent().epsilon == 0.5


def test_laplace_release_charges_no_delta(tmp_path: Path) -> None:
    ledger = BudgetLedger(tmp_path / "d.ledger")
    ledger.set_total(1.0, 1e-6)
    bare = Histogram(_schema(), np.ones((2, 2), dtype=np.int64))
    release = Identity(0.5, delta=1e-6).release(bare, ledger=ledger)
    assert ledger.spent().delta == 0.0
    assert release.metadata.delta is None
    Identity(0.1, delta=1e-6, noise="gaussian").release(bare, ledger=ledger)
    assert ledger.spent().delta == 1e-6


# -- totals and corruption ----------------------------------------------------------------------


def test_total_below_spent_is_refused(tmp_path: Path) -> None:
    ledger = BudgetLedger(tmp_path / "d.ledger")
    ledger.set_total(1.0)
    ledger.charge(0.6, mechanism="identity")
    with pytest.raises(BudgetError, match="already spent"):
        ledger.set_total(0.5)
    assert ledger.total().epsilon == 1.0
    ledger.set_total(0.6)


def _spent_ledger(tmp_path: Path) -> BudgetLedger:
    ledger = BudgetLedger(tmp_path / "d.ledger")
    ledger.set_total(1.0)
    for _ in range(3):
        ledger.charge(0.2, mechanism="identity", note="x" * 3000)
    return ledger


def test_garbage_header_is_an_error_naming_the_file(tmp_path: Path) -> None:
    ledger = _spent_ledger(tmp_path)
    data = bytearray(ledger.path.read_bytes())
    data[:16] = b"garbage garbage!"
    ledger.path.write_bytes(bytes(data))
    with pytest.raises(BudgetError, match="restore") as info:
        BudgetLedger(ledger.path).remaining()
    assert str(ledger.path) in str(info.value)


def test_truncated_ledger_is_an_error(tmp_path: Path) -> None:
    ledger = _spent_ledger(tmp_path)
    with sqlite3.connect(ledger.path) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = ledger.path.read_bytes()
    ledger.path.write_bytes(data[: len(data) // 2])
    with pytest.raises(BudgetError, match=str(ledger.path).replace("\\", "\\\\")):
        BudgetLedger(ledger.path).remaining()


def test_deleted_or_edited_charges_are_detected(tmp_path: Path) -> None:
    ledger = _spent_ledger(tmp_path)
    con = sqlite3.connect(ledger.path)
    con.execute("UPDATE charges SET epsilon = '0.01' WHERE seq = 2")
    con.commit()
    con.close()
    with pytest.raises(BudgetError, match=r"tampered|corrupt"):
        BudgetLedger(ledger.path).remaining()
    other = BudgetLedger(tmp_path / "e.ledger")
    other.set_total(1.0)
    other.charge(0.5, mechanism="identity")
    other.charge(0.5, mechanism="identity")
    con = sqlite3.connect(other.path)
    con.execute("DELETE FROM charges WHERE seq = (SELECT max(seq) FROM charges)")
    con.commit()
    con.close()
    with pytest.raises(BudgetError, match=r"tampered|corrupt|truncated"):
        BudgetLedger(other.path).charge(0.5, mechanism="identity")


# -- command line -------------------------------------------------------------------------------


def _release_args(data: Path, out: Path, *extra: str) -> list[str]:
    schema = out.parent / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    return ["release", str(data), "--schema", str(schema), "--mechanism", "identity",
            "--epsilon", "0.5", "--out", str(out), *extra]  # fmt: skip


def test_cli_renamed_copy_shares_the_budget(people: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(_release_args(people, tmp_path / "a", "--total-epsilon", "1")) == 0
    copy = tmp_path / "renamed.csv"
    shutil.copy(people, copy)
    assert main(_release_args(copy, tmp_path / "b")) == 0
    assert main(_release_args(copy, tmp_path / "c")) == 2
    assert "exceeds the remaining budget" in capsys.readouterr().err


def test_cli_dataset_name_wins(people: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    other = tmp_path / "other.csv"
    pd.read_csv(people).iloc[:50].to_csv(other, index=False)
    assert (
        main(_release_args(people, tmp_path / "a", "--dataset", "wave1", "--total-epsilon", "0.5"))
        == 0
    )
    assert main(_release_args(other, tmp_path / "b", "--dataset", "wave1")) == 2
    assert "exceeds the remaining budget" in capsys.readouterr().err
    assert main(["budget", str(other), "--dataset", "wave1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["spent"]["epsilon"] == 0.5
    assert "sha256" not in json.dumps(shown["releases"])


def test_cli_set_total_below_spent_and_missing_path(people: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(_release_args(people, tmp_path / "a", "--total-epsilon", "1")) == 0
    assert main(["budget", str(people), "--set-total", "0.1"]) == 2
    assert "already spent" in capsys.readouterr().err
    assert main(["budget", str(tmp_path / "missing.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_delta_with_laplace_is_not_charged(people: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    args = _release_args(
        people, tmp_path / "a", "--total-epsilon", "1", "--total-delta", "1e-6", "--delta", "1e-6"
    )
    assert main(args) == 0
    assert "neither claimed nor charged" in capsys.readouterr().err
    assert main(["budget", str(people), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["spent"]["delta"] == 0.0


def test_data_cube_source_and_histogram_share_the_budget(people: Path) -> None:
    from dpcube.mechanisms.datacube.mechanism import CubeSource, DataCube

    hist = histogram(people, _schema())
    ledger_for(hist).set_total(1.0)
    DataCube(0.6, method="base").release(CubeSource(people, _schema()))
    assert ledger_for(hist).spent().epsilon == 0.6
    with pytest.raises(BudgetError, match="exceeds the remaining budget"):
        DataCube(0.6, method="base").release((str(people), _schema()))
