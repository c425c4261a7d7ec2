"""``dpcube query --where "attr in (A, B)"``: the set of categories, answered as one query."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpcube import Histogram, Identity, Schema
from dpcube.cli.main import main

SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {
                "name": "carrier",
                "kind": "nominal",
                "hierarchy": {"east": ["UA", "B6"], "west": ["EV", "DL"]},
            },
            {"name": "hour", "kind": "ordinal", "range": [0, 2], "width": 1},
        ]
    }
)


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, object]:
    release = Identity(1.0).release(
        Histogram(SCHEMA, np.arange(12).reshape(4, 3) * 5), random_state=2, account=False
    )
    release.save(tmp_path / "r")
    return tmp_path / "r", release


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_where_in_is_the_set_and_its_interval_is_the_set_query_s(
    saved: tuple[Path, object], capsys: pytest.CaptureFixture[str]
) -> None:
    path, release = saved
    code, out, _ = run(
        capsys, "query", str(path), "--where", "carrier in (UA, DL), hour=1..2", "--json"
    )
    assert code == 0
    got = json.loads(out)
    query = {"carrier": {"in": ["UA", "DL"]}, "hour": [1, 2]}
    assert got["answer"] == pytest.approx(release.answer(query))  # type: ignore[attr-defined]
    lower, upper = release.interval(query)  # type: ignore[attr-defined]
    assert (got["lower"], got["upper"]) == (pytest.approx(lower), pytest.approx(upper))
    # the range UA..DL is every carrier; the set is two
    code, out, _ = run(capsys, "query", str(path), "--where", "carrier=UA..DL", "--json")
    assert json.loads(out)["answer"] == pytest.approx(release.answer({}))  # type: ignore[attr-defined]


def test_group_by_inside_a_set_lists_its_categories_only(
    saved: tuple[Path, object], capsys: pytest.CaptureFixture[str]
) -> None:
    path, release = saved
    code, out, _ = run(
        capsys,
        "query",
        str(path),
        "--where",
        "carrier in (UA, west)",
        "--group-by",
        "carrier",
        "--json",
    )
    assert code == 0
    assert [r["carrier"] for r in json.loads(out)["rows"]] == ["UA", "EV", "DL"]
    code, out, _ = run(
        capsys, "query", str(path), "--where", "carrier in (UA, DL)", "--group-by", "hour", "--json"
    )
    rows = json.loads(out)["rows"]
    expected = [
        release.answer({"carrier": {"in": ["UA", "DL"]}, "hour": h})  # type: ignore[attr-defined]
        for h in (0, 1, 2)
    ]
    assert [r["estimate"] for r in rows] == pytest.approx(expected)


def test_a_reversed_list_says_it_is_a_range_and_how_to_ask_for_a_set(
    saved: tuple[Path, object], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = saved
    code, _, err = run(capsys, "query", str(path), "--where", '{"carrier": ["DL", "UA"]}')
    assert code != 0
    assert "range [first, last]" in err and "carrier in (DL, UA)" in err
    assert len(err.strip().splitlines()) == 1
