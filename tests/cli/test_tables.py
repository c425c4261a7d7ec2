"""Labelled tables out: ``Release.to_pandas/to_arrow/to_polars``,
``Release.interval(s)``, ``dpcube export`` and ``dpcube query --group-by/--json``, on every
release kind (cells, spatial leaves, data-cube cuboids, census region x size)."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpcube import Histogram, Identity, Schema
from dpcube.cli.main import main
from dpcube.errors import QueryError
from dpcube.privacy.random import NO_NOISE
from dpcube.release.tables import table_info

SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 3], "width": 1},
            {"name": "income", "kind": "ordinal", "edges": [0, 100, 500]},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
        ]
    }
)
COUNTS = np.arange(16).reshape(4, 2, 2)
Z95 = NormalDist().inv_cdf(0.975)


@pytest.fixture
def cells() -> Any:
    return Identity(1.0).release(Histogram(SCHEMA, COUNTS), random_state=7)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cell_table_has_labels_edges_and_exact_intervals(cells: Any) -> None:
    df = cells.to_pandas()
    assert len(df) == 16
    assert list(df.columns) == [
        "age", "age_lo", "age_hi", "income", "income_lo", "income_hi", "sex",
        "estimate", "stddev", "lower", "upper", "level",
        "trusted", "interval_kind", "interval_reason",
    ]  # fmt: skip
    assert df.trusted.all() and set(df.interval_kind) == {"exact"}
    row = df[(df.age == "2") & (df.income == "[100, 500)") & (df.sex == "M")].iloc[0]
    assert (row.age_lo, row.age_hi, row.income_lo, row.income_hi) == (2, 3, 100, 500)
    assert row.estimate == cells.counts[2, 1, 1]
    assert row.stddev == pytest.approx(cells.stddev({}) / 4)  # one cell of 16: sd / sqrt(16)
    assert row.lower == pytest.approx(row.estimate - Z95 * row.stddev)
    assert row.upper == pytest.approx(row.estimate + Z95 * row.stddev)
    # the table sums to the release's total; Polars and Arrow carry the same rows
    assert df.estimate.sum() == pytest.approx(cells.answer({}))
    assert cells.to_polars()["estimate"].to_list() == df.estimate.tolist()
    assert table_info(cells.to_arrow(0.9)) | {"level": 0.9} == table_info(cells.to_arrow(0.9))


def test_interval_and_intervals_agree_and_widen_with_the_level(cells: Any) -> None:
    queries = [{"age": [1, 2]}, {"sex": "F"}, {}]
    both = cells.intervals(queries, 0.9)
    assert both.shape == (3, 2)
    assert tuple(both[1]) == pytest.approx(cells.interval({"sex": "F"}, 0.9))
    wide = cells.intervals(queries, 0.99)
    assert np.all(wide[:, 0] < both[:, 0]) and np.all(wide[:, 1] > both[:, 1])
    answers = cells.answer_many(queries)
    assert np.allclose((both[:, 0] + both[:, 1]) / 2, answers)  # exact: symmetric about the answer


def test_leaf_table_has_lat_lon_bounds_and_sums_to_the_total() -> None:
    from dpcube import UniformGrid

    schema = Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "p",
                    "kind": "spatial",
                    "columns": ["lat", "lon"],
                    "bbox": [10.0, 20.0, 14.0, 28.0],
                    "resolution": [4, 8],
                }
            ]
        }
    )
    counts = np.random.default_rng(1).integers(0, 20, schema.shape)
    release = UniformGrid(1.0, grid_size=2).release(Histogram(schema, counts), random_state=2)
    df = release.to_pandas(runs=20, seed=3)
    assert len(df) == len(release.rects)
    assert df.p_lat_lo.min() == 10.0 and df.p_lat_hi.max() == 14.0
    assert df.p_lon_lo.min() == 20.0 and df.p_lon_hi.max() == 28.0
    assert df.estimate.sum() == pytest.approx(release.answer({}))
    kind = table_info(release.to_arrow(runs=20, seed=3))["error_kind"]
    if kind != "exact":  # a non-exact error says so in its own columns
        assert {"noise_sd", "error_kind"} <= set(df.columns)
        assert set(df.error_kind) == {kind}
    assert np.all(df.lower <= df.upper)


def test_cuboid_tables_one_per_published_cuboid() -> None:
    from dpcube import DataCube

    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "nominal", "categories": ["x", "y"]},
                {"name": "b", "kind": "nominal", "categories": ["u", "v", "w"]},
            ]
        }
    )
    counts = np.arange(6).reshape(2, 3)
    release = DataCube(1.0, method="all").release(Histogram(schema, counts), random_state=NO_NOISE)
    assert len(release.published) > 1
    with pytest.raises(QueryError, match="one table per published cuboid"):
        release.to_pandas()
    df = release.to_pandas(cuboid=("b",))
    assert list(df.b) == ["u", "v", "w"]
    assert df.estimate.tolist() == pytest.approx(counts.sum(axis=0).tolist())  # noise off
    assert table_info(release.to_arrow(cuboid="b"))["cuboid"] == ["b"]
    with pytest.raises(QueryError, match="cuboid= applies to data-cube releases"):
        Identity(1.0).release(Histogram(schema, counts), random_state=1).to_pandas(cuboid="a")


def test_census_table_region_by_size_and_size_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dpcube.mechanisms.census.mechanism import CensusHierarchy

    case = CensusHierarchy.conformance_cases()[0]
    counts = np.random.default_rng(4).integers(1, 4, case.schema.shape)
    release = case.make("add_remove").release(
        case.prepare(Histogram(case.schema, counts)), random_state=NO_NOISE
    )
    df = release.to_pandas(runs=20, seed=1)
    assert len(df) == release.hierarchy.size * release.max_size
    assert set(df.columns) >= {"region", "region_level", "size", "estimate", "lower", "upper"}
    # the region's level in the hierarchy is region_level; level is the interval's, as in
    # every kind's table
    assert df["region_level"].min() == 1 and df["region_level"].max() >= 2  # nation, regions
    assert (df["level"] == 0.95).all() and "confidence_level" not in df.columns
    ga = df[(df.region == "GA") & (df["size"] == 2)].iloc[0]
    assert ga.estimate == release.answer({"region": "GA", "size": 2})
    release.save(tmp_path / "c")
    outs = []
    for where in ("region=GA, size=1", "region=GA, size=1..1"):
        code, out, _ = run(capsys, "query", str(tmp_path / "c"), "--where", where, "--json")
        assert code == 0
        outs.append(json.loads(out)["answer"])
    assert outs[0] == outs[1] == release.answer({"region": "GA", "size": [1, 1]})


def test_query_json_contract_and_group_by(
    cells: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells.save(tmp_path / "r")
    code, out, _err = run(
        capsys, "query", str(tmp_path / "r"), "--where", "age=1..2", "--json", "--level", "0.9"
    )
    assert code == 0
    got = json.loads(out)
    lower, upper = cells.interval({"age": [1, 2]}, 0.9)
    assert got["answer"] == cells.answer({"age": [1, 2]})
    assert (got["lower"], got["upper"], got["level"]) == (
        pytest.approx(lower),
        pytest.approx(upper),
        0.9,
    )
    code, out, _ = run(capsys, "query", str(tmp_path / "r"), "--where", "age=1..2")
    assert code == 0 and "90%" not in out and "95% interval" in out

    code, out, _ = run(
        capsys, "query", str(tmp_path / "r"), "--group-by", "sex,income", "--where", "age=0..1"
    )
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split() == ["sex", "income", "estimate", "lower", "upper"]
    assert len(lines) == 1 + 4 + 2  # header, 2 x 2 rows, "4 rows", what lower/upper are
    assert lines[5] == "4 rows"
    code, out, _ = run(
        capsys, "query", str(tmp_path / "r"), "--group-by", "sex", "--where", "age=0..1", "--json"
    )
    rows = json.loads(out)["rows"]
    assert [r["sex"] for r in rows] == ["F", "M"]
    assert rows[1]["estimate"] == cells.answer({"age": [0, 1], "sex": "M"})


def test_query_overlapping_says_what_it_answered(
    cells: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells.save(tmp_path / "r")
    code, _, err = run(capsys, "query", str(tmp_path / "r"), "--where", "income=50..499")
    assert code == 2 and "are 100..499 (inside) or 0..499 (covering)" in err
    code, out, err = run(
        capsys, "query", str(tmp_path / "r"), "--where", "income=50..499", "--overlapping"
    )
    assert code == 0 and "answered over the bins that cover income=0..499" in err
    code, out, _ = run(
        capsys,
        "query",
        *(str(tmp_path / "r"), "--where", "income=50..499", "--overlapping", "--json"),
    )
    assert json.loads(out)["covered"] == {"income": "0..499"}
    code, out, _ = run(capsys, "query", str(tmp_path / "r"), "--where", "income=#1", "--json")
    assert json.loads(out)["answer"] == cells.answer({"income": {"bins": [1, 1]}})


def test_export_csv_and_parquet_round_trip(
    cells: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells.save(tmp_path / "r")
    expected = cells.to_pandas()
    code, out, _ = run(
        capsys, "export", str(tmp_path / "r"), "--format", "csv", "--out", str(tmp_path / "t.csv")
    )
    assert code == 0 and "wrote 16 rows" in out
    got = pd.read_csv(tmp_path / "t.csv", dtype={"age": str})
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    code, out, _ = run(
        capsys,
        "export",
        *(str(tmp_path / "r"), "--format", "parquet", "--out", str(tmp_path / "t.parquet")),
        *("--level", "0.8", "--json"),
    )
    assert code == 0 and json.loads(out)["files"][0]["rows"] == 16
    table = pq.read_table(tmp_path / "t.parquet")
    assert table_info(table)["level"] == 0.8 and table_info(table)["error_kind"] == "exact"
    # CSV to stdout, the summary to stderr
    code, out, err = run(capsys, "export", str(tmp_path / "r"), "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith('"age","age_lo"') and "wrote" in err


def test_export_never_overwrites_a_file_dpcube_did_not_write(
    cells: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells.save(tmp_path / "r")
    mine = tmp_path / "mine.csv"
    mine.write_text("name,value\nalice,1\n")
    for flags in ((), ("--overwrite",)):
        code, _, err = run(
            capsys, "export", str(tmp_path / "r"), "--format", "csv", "--out", str(mine), *flags
        )
        assert code == 2 and err.count("\n") == 1
    assert mine.read_text() == "name,value\nalice,1\n"
    out = tmp_path / "t.csv"
    assert run(capsys, "export", str(tmp_path / "r"), "--format", "csv", "--out", str(out))[0] == 0
    again = ("export", str(tmp_path / "r"), "--format", "csv", "--out", str(out))
    assert run(capsys, *again)[0] == 2  # exists: needs --overwrite
    assert run(capsys, *again, "--overwrite")[0] == 0  # dpcube's own export: replaced
    assert run(capsys, "export", str(tmp_path / "r"), "--format", "parquet")[0] == 2  # no --out
    assert run(capsys, *again, "--overwrite", "--level", "1.5")[0] == 2


def test_export_overwrites_only_its_own_unchanged_file_never_a_lookalike(
    cells: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells.save(tmp_path / "r")
    first = tmp_path / "first.csv"
    export = ("export", str(tmp_path / "r"), "--format", "csv")
    assert run(capsys, *export, "--out", str(first))[0] == 0
    # A user's CSV whose header is exactly dpcube's (copied from an export): not dpcube's file.
    mine = tmp_path / "mine.csv"
    mine.write_text(first.read_text().splitlines()[0] + "\nmy,own,figures\n")
    code, _, err = run(capsys, *export, "--out", str(mine), "--overwrite")
    assert code == 2 and "not written by dpcube export" in err and err.count("\n") == 1
    assert mine.read_text().endswith("my,own,figures\n")
    # dpcube's own export, edited by its user since: theirs now, not replaced.
    first.write_text(first.read_text() + "a note\n")
    assert run(capsys, *export, "--out", str(first), "--overwrite")[0] == 2
    assert first.read_text().endswith("a note\n")
    # A Parquet file carrying dpcube's table metadata, written by someone else: not replaced.
    from dpcube.release.tables import METADATA_KEY

    lookalike = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1]}).replace_schema_metadata({METADATA_KEY: "{}"}), lookalike)
    parquet = ("export", str(tmp_path / "r"), "--format", "parquet", "--out", str(lookalike))
    assert run(capsys, *parquet, "--overwrite")[0] == 2
    assert pq.read_table(lookalike).column_names == ["x"]
    # Its own export is replaced, again and again (the mark follows the new content).
    own = tmp_path / "own.parquet"
    parquet = ("export", str(tmp_path / "r"), "--format", "parquet", "--out", str(own))
    assert run(capsys, *parquet)[0] == 0
    assert run(capsys, *parquet, "--overwrite", "--level", "0.8")[0] == 0
    assert run(capsys, *parquet, "--overwrite", "--level", "0.9")[0] == 0


def test_export_datacube_writes_one_file_per_cuboid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dpcube import DataCube

    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "nominal", "categories": ["x", "y"]},
                {"name": "b", "kind": "ordinal", "range": [0, 2], "width": 1},
            ]
        }
    )
    release = DataCube(1.0, method="all").release(
        Histogram(schema, np.arange(6).reshape(2, 3)), random_state=5
    )
    release.save(tmp_path / "r")
    code, _out, _ = run(
        capsys, "export", str(tmp_path / "r"), "--format", "csv", "--out", str(tmp_path / "t")
    )
    assert code == 0
    names = sorted(p.name for p in (tmp_path / "t").iterdir())
    assert len(names) == len(release.published) and "cuboid-a-b.csv" in names
    ab = pd.read_csv(tmp_path / "t" / "cuboid-a-b.csv")
    assert len(ab) == 6 and set(ab.a) == {"x", "y"}


def test_release_json_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "people.csv"
    pd.DataFrame({"age": [0, 1, 2, 3, 3], "sex": list("FMFMF"), "income": [5] * 5}).to_csv(
        data, index=False
    )
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA.to_dict()))
    code, out, _ = run(
        capsys,
        "release",
        *(str(data), "--schema", str(schema), "--mechanism", "identity", "--epsilon", "0.25"),
        *("--total-epsilon", "1", "--out", str(tmp_path / "rel"), "--json"),
    )
    assert code == 0
    summary = json.loads(out)
    assert summary["budget_left"]["epsilon"] == pytest.approx(0.75)
    assert summary["for_publication"] is True and summary["release"] == str(tmp_path / "rel")


def test_query_runs_and_bootstrap_seed_for_bootstrap_releases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dpcube query --runs N --bootstrap-seed S` on a release whose error is a bootstrap: the
    same interval on every call, N replicates as asked; fewer than 20 refused in one line."""
    from dpcube import HTF

    schema = Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "p",
                    "kind": "spatial",
                    "columns": ["lat", "lon"],
                    "bbox": [0.0, 0.0, 8.0, 8.0],
                    "resolution": [8, 8],
                }
            ]
        }
    )
    counts = np.random.default_rng(4).integers(0, 30, schema.shape)
    HTF(1.0).release(Histogram(schema, counts), random_state=5).save(tmp_path / "r")
    argv = ["query", str(tmp_path / "r"), "--where", "p=#0..3:0..3", "--json"]
    argv += ["--intervals", "model", "--runs", "20", "--bootstrap-seed", "7"]
    code, first, _ = run(capsys, *argv)
    assert code == 0
    code, second, _ = run(capsys, *argv)
    got = json.loads(first)
    assert got == json.loads(second) and got["error_kind"] == "bootstrap"
    assert got["trusted"] is False and got["interval_kind"] == "model"
    code, _, err = run(capsys, *argv[:-4], "--runs", "5")
    assert code == 2 and "at least 20" in err and len(err.strip().splitlines()) == 1


def test_query_runs_on_an_exact_release_is_said_to_have_no_effect(
    cells: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells.save(tmp_path / "r")
    code, _, err = run(capsys, "query", str(tmp_path / "r"), "--where", "age=1..2", "--runs", "50")
    assert code == 0 and "--runs/--bootstrap-seed have no effect here" in err and "exact" in err
