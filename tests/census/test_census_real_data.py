"""Census releases on real files: G declared public, NULLs, unknown regions, a unit in several
regions, and person files with every column type."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import dpcube
from dpcube.cli.main import main
from dpcube.errors import BudgetError, DataError
from dpcube.privacy import BudgetLedger

H = {"GA": "US", "NY": "US"}
#: The running example of Fioretto, Van Hentenryck and Zhu (Artificial Intelligence 296, 2021,
#: Example 2 and Table 3): GA has units A (3 persons), B, C; NY has D (3), E, F (2). G = 6.
PERSONS = pd.DataFrame(
    {
        "unit": ["A", "A", "A", "B", "C", "D", "D", "D", "E", "F", "F"],
        "state": ["GA", "GA", "GA", "GA", "GA", "NY", "NY", "NY", "NY", "NY", "NY"],
    }
)
ARGS = {"unit": "unit", "region": "state", "hierarchy": H, "max_size": 3}


def _files(tmp_path: Path) -> tuple[Path, Path]:
    data, regions = tmp_path / "persons.csv", tmp_path / "regions.csv"
    PERSONS.to_csv(data, index=False)
    regions.write_text("region,parent\nUS,\nGA,US\nNY,US\n")
    return data, regions


def _release(tmp_path: Path, data: Path, regions: Path, *flags: str) -> int:
    return main(
        ["release", str(data), "--mechanism", "census-hierarchy", "--group-by", "unit",
         "--region", "state", "--hierarchy", str(regions), "--max-size", "3", "--epsilon", "1",
         "--total-epsilon", "2", "--param", "method=dp", "--out", str(tmp_path / "rel"), *flags]
    )  # fmt: skip


def _ledger(path: Path, total: float) -> BudgetLedger:
    ledger = BudgetLedger(path)
    ledger.set_total(total)
    return ledger


def _charged(home: Path) -> float:
    """The epsilon charged to every ledger under ``home`` (a refused release charges nothing)."""
    return sum(BudgetLedger(p).spent().epsilon for p in home.rglob("*.ledger"))


# -- G declared public ------------------------------------------------------------------------


def test_release_without_declaration_is_refused_before_the_charge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    data, regions = _files(tmp_path)
    assert _release(tmp_path, data, regions) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "number of groups G" in err and "--public-groups" in err and "--groups-are-public" in err
    assert not (tmp_path / "rel").exists() and _charged(tmp_path / "home") == 0
    # The same in Python: refused before the ledger is touched.
    ledger = _ledger(tmp_path / "l.ledger", 5.0)
    table = dpcube.group_sizes(PERSONS, **ARGS)
    with pytest.raises(DataError, match="declare it with --public-groups"):
        dpcube.CensusHierarchy(1.0, method="dp").release(table, ledger=ledger)
    assert ledger.spent().epsilon == 0


def test_wrong_public_groups_is_refused_without_the_true_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    data, regions = _files(tmp_path)
    assert _release(tmp_path, data, regions, "--public-groups", "7") == 2
    err = capsys.readouterr().err.strip()
    assert "--public-groups 7: the data holds a different number of groups" in err
    assert "6" not in err.replace("--public-groups 7", "")
    assert not (tmp_path / "rel").exists() and _charged(tmp_path / "home") == 0
    assert _release(tmp_path, data, regions, "--public-groups", "7", "--show-values") == 2
    assert "(6)" in capsys.readouterr().err
    both = ("--public-groups", "6", "--groups-are-public")
    assert _release(tmp_path, data, regions, *both) == 2
    assert "give one of them" in capsys.readouterr().err
    with pytest.raises(DataError, match="different number of groups"):
        dpcube.group_sizes(PERSONS, **ARGS, public_groups=5)


@pytest.mark.parametrize(
    ("flags", "how"),
    [
        (("--public-groups", "6"), "--public-groups 6"),
        (("--groups-are-public",), "--groups-are-public"),
    ],
)
def test_declaration_is_in_the_manifest_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], how: str
) -> None:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    data, regions = _files(tmp_path)
    assert _release(tmp_path, data, regions, *flags) == 0
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    declared = manifest["metadata"]["declared_public"]
    assert declared == [{"figure": "groups", "value": 6, "declared_by": "curator", "how": how}]
    assert (
        f"declared public: groups = 6 (declared by the curator: {how})"
        in (tmp_path / "rel" / "report.md").read_text()
    )
    assert main(["report", str(tmp_path / "rel"), "--runs", "20"]) == 0
    html = next((tmp_path / "rel").glob("*.html")).read_text()
    assert "declared public" in html and how in html
    release = dpcube.load_release(tmp_path / "rel")
    assert release.metadata.declared_public == declared


def test_api_declarations() -> None:
    h = dpcube.RegionHierarchy.from_parents(H)
    counts = h.aggregate(np.array([[2, 0, 1], [1, 1, 1]]))
    assert not dpcube.GroupSizeTable(h, counts).groups_declared
    t = dpcube.GroupSizeTable(h, counts, public_groups=6)
    assert t.declared_public == [
        {"figure": "groups", "value": 6, "declared_by": "curator", "how": "public_groups=6"}
    ]
    with pytest.raises(DataError, match="public_groups=4: the data holds a different"):
        dpcube.GroupSizeTable(h, counts, public_groups=4)
    r = dpcube.CensusHierarchy(1.0, method="dp").release(t, random_state=1)
    assert r.metadata.declared_public == t.declared_public
    table = dpcube.group_sizes(PERSONS, **ARGS, public_groups=True)
    assert table.declared_public[0]["how"] == "public_groups=True"


# -- NULLs and regions outside the hierarchy follow --on-out-of-domain --------------------------


def test_null_unit_or_region_follows_the_policy() -> None:
    nulls = pd.concat(
        [PERSONS, pd.DataFrame({"unit": [None, "A", None], "state": ["GA", None, None]})],
        ignore_index=True,
    )
    with pytest.raises(DataError, match=r"3 rows have a NULL .*--on-out-of-domain drop"):
        dpcube.group_sizes(nulls, **ARGS)
    with pytest.raises(DataError, match="clip does not apply to a NULL"):
        dpcube.group_sizes(nulls, **ARGS, on_out_of_domain="clip")
    kept = dpcube.group_sizes(nulls, **ARGS, on_out_of_domain="drop")
    clean = dpcube.group_sizes(PERSONS, **ARGS)
    np.testing.assert_array_equal(kept.counts, clean.counts)
    assert kept.report["dropped"]["rows_with_null_unit_or_region"] == 3
    # the hashed and the reassigning plans drop alike
    first = dpcube.group_sizes(nulls, **ARGS, on_out_of_domain="drop", region_of_unit="first")
    np.testing.assert_array_equal(first.counts, clean.counts)


def test_cli_on_out_of_domain_reaches_census(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    data, regions = _files(tmp_path)
    with data.open("a") as f:
        f.write(",GA\nG,\nZ,TX\n")  # a NULL unit, a NULL region, a region outside the hierarchy
    assert _release(tmp_path, data, regions, "--groups-are-public") == 2
    assert "NULL" in capsys.readouterr().err
    flags = ("--groups-are-public", "--on-out-of-domain", "drop")
    assert _release(tmp_path, data, regions, *flags) == 0
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    assert manifest["metadata"]["declared_public"][0]["value"] == 6  # unit Z (in TX) dropped


@pytest.mark.parametrize("rule", [None, "first", "most"])
def test_rows_outside_the_hierarchy_leaves_are_dropped_one_by_one(rule: str | None) -> None:
    """Rows are dropped before the units are formed: unit Z (only in TX) is gone, unit A keeps
    its three GA rows although two more rows of A say TX (with "most" they would otherwise have
    moved A to TX), and a row in the internal region US is not a leaf's."""
    extra = pd.DataFrame(
        {"unit": ["Z", "Z", "A", "A", "B"], "state": ["TX", "TX", "TX", "TX", "US"]}
    )
    data = pd.concat([PERSONS, extra], ignore_index=True)
    refused = r"missing from the hierarchy.*--on-out-of-domain drop" if rule else "span several"
    with pytest.raises(DataError, match=refused):
        dpcube.group_sizes(data, **ARGS, region_of_unit=rule)
    kept = dpcube.group_sizes(data, **ARGS, on_out_of_domain="drop", region_of_unit=rule)
    np.testing.assert_array_equal(kept.counts, dpcube.group_sizes(PERSONS, **ARGS).counts)
    assert kept.report["dropped"]["rows_outside_the_hierarchy_leaves"] == 5


# -- a unit in several regions --------------------------------------------------------------------

#: Unit A: 2 rows in NY, 1 in GA (most: NY; first: GA). Unit F: 1 in GA, 1 in NY (a tie: GA).
SPREAD = pd.DataFrame(
    {
        "unit": ["A", "A", "A", "B", "C", "D", "D", "D", "E", "F", "F"],
        "state": ["NY", "GA", "NY", "GA", "GA", "NY", "NY", "NY", "NY", "NY", "GA"],
    }
)


def test_unit_in_two_regions_is_refused_with_the_fix_named() -> None:
    with pytest.raises(DataError, match=r"2 units .* span several .*--region-of-unit first\|most"):
        dpcube.group_sizes(SPREAD, **ARGS)


@pytest.mark.parametrize(
    ("rule", "ga", "ny"),
    [
        ("first", [2, 1, 1], [1, 0, 1]),  # A (3) -> GA, F (2) -> GA
        ("most", [2, 1, 0], [1, 0, 2]),  # A (3) -> NY, F (2) tie -> GA
    ],
)
def test_region_of_unit_rules_ignore_row_order(rule: str, ga: list[int], ny: list[int]) -> None:
    table = dpcube.group_sizes(SPREAD, **ARGS, region_of_unit=rule)
    assert table.row("GA").tolist() == ga and table.row("NY").tolist() == ny
    assert table.report["units_reassigned"] == 2
    for seed in range(3):
        shuffled = SPREAD.sample(frac=1.0, random_state=seed)
        again = dpcube.group_sizes(shuffled, **ARGS, region_of_unit=rule)
        np.testing.assert_array_equal(again.counts, table.counts)


def test_reassigned_units_go_to_group_size_methods_only(tmp_path: Path) -> None:
    table = dpcube.group_sizes(SPREAD, **ARGS, region_of_unit="most", public_groups=6)
    ledger = _ledger(tmp_path / "l.ledger", 5.0)
    with pytest.raises(BudgetError, match="method dp, qp, qip or topdown"):
        dpcube.CensusHierarchy(1.0, method="cdp").release(table, ledger=ledger)
    assert ledger.spent().epsilon == 0
    r = dpcube.CensusHierarchy(1.0, method="dp").release(table, ledger=ledger)
    assert r.groups == 6 and ledger.spent().epsilon == 1.0


# -- person files with every column type ---------------------------------------------------------


def test_census_from_files_with_every_column_type(tmp_path: Path) -> None:
    """Units keyed by a timestamp with time zone, regions as text, and columns of other types
    beside them, in CSV and Parquet: counted, fingerprinted and released."""
    frame = duckdb.sql(
        "SELECT TIMESTAMPTZ '2013-01-01 05:00:00+00' + CAST(u AS INTEGER) * INTERVAL 1 HOUR "
        "AS unit, CASE WHEN u < 3 THEN 'GA' ELSE 'NY' END AS state, "
        "DATE '2013-01-01' AS day, INTERVAL 1 DAY AS span, [u] AS list, {'u': u} AS record, "
        "CAST(u AS DECIMAL(9, 2)) AS amount, CAST('x' AS BLOB) AS bytes, "
        "repeat('y', 50000) AS long_text, CAST(NULL AS VARCHAR) AS never "
        "FROM (SELECT unnest([0, 0, 0, 1, 2, 3, 3, 3, 4, 5, 5]) AS u)"
    )
    parquet, csv = tmp_path / "persons.parquet", tmp_path / "persons.csv"
    frame.write_parquet(str(parquet))
    duckdb.sql(f"COPY (SELECT unit, state, day, amount, long_text FROM '{parquet}') TO '{csv}'")
    (tmp_path / "csv.csv").write_text(
        "unit,state\n" + "".join(f"2013-01-01T0{u}:00:00Z,{'GA' if u < 3 else 'NY'}\n"
                                 for u in [0, 0, 0, 1, 2, 3, 3, 3, 4, 5, 5])
    )  # fmt: skip
    for path in (parquet, csv, tmp_path / "csv.csv"):
        table = dpcube.group_sizes(str(path), **ARGS, public_groups=6)
        assert table.row("GA").tolist() == [2, 0, 1] and table.row("NY").tolist() == [1, 1, 1]
        assert table.dataset is not None and table.dataset.startswith("sha256:")
        ledger = _ledger(tmp_path / f"{path.name}.ledger", 1.0)
        release = dpcube.CensusHierarchy(1.0, method="dp").release(table, ledger=ledger)
        assert release.groups == 6


def test_spread_unit_with_a_zoned_timestamp_id_is_named_as_text() -> None:
    stamps = pd.DataFrame(
        {"unit": pd.to_datetime(["2013-01-01T05:00:00Z"] * 2), "state": ["GA", "NY"]}
    )
    with pytest.raises(DataError, match=r"e\.g\. unit '2013-01-01 05:00:00\+00' in 'GA' and 'NY'"):
        dpcube.group_sizes(stamps, **ARGS, show_values=True)


@pytest.mark.parametrize("rule", ["first", "most"])
def test_reassignment_keeps_the_group_size_sensitivity(rule: str) -> None:
    """Brute force: with units given one region by ``rule`` (and rows outside the domain dropped),
    adding or removing one person's row changes each level's group-size vectors by at most 2 in
    L1 (Lemma 4's bound, which the group-size methods calibrate to); the cumulative vectors move
    by more (so the other methods refuse such tables)."""
    h = dpcube.RegionHierarchy.from_parents(
        {"N": "all", "S": "all", "a": "N", "b": "N", "c": "S", "d": "S"}
    )
    rng = np.random.default_rng(7)
    base = pd.DataFrame(
        {
            "unit": rng.integers(0, 6, 14).astype(str),
            "region": np.array(list("abcd"))[rng.integers(0, 4, 14)],
        }
    )
    args = {"unit": "unit", "region": "region", "hierarchy": h, "max_size": 4, "top_code": True}

    def levels(frame: pd.DataFrame) -> list[np.ndarray]:
        t = dpcube.group_sizes(frame, **args, on_out_of_domain="drop", region_of_unit=rule)
        return [t.counts[h.level_slice(level)] for level in range(1, h.levels + 1)]

    def cumulative(vectors: list[np.ndarray]) -> list[np.ndarray]:
        return [np.cumsum(v, axis=1) for v in vectors]

    before = levels(base)
    worst, worst_cumulative = 0, 0
    units = sorted(set(base["unit"]))
    for unit in units:  # one person joins an existing unit, in any region (or outside)
        for region in ["a", "b", "c", "d", "zz"]:
            joined = levels(pd.concat([base, pd.DataFrame({"unit": [unit], "region": [region]})]))
            worst = max(
                worst, *(int(np.abs(x - y).sum()) for x, y in zip(before, joined, strict=True))
            )
            worst_cumulative = max(
                worst_cumulative,
                *(
                    int(np.abs(x - y).sum())
                    for x, y in zip(cumulative(before), cumulative(joined), strict=True)
                ),
            )
    for row in range(len(base)):  # one person leaves (a unit of one person leaves with them)
        if (base["unit"] == base.loc[row, "unit"]).sum() == 1:
            continue
        left = levels(base.drop(index=row))
        worst = max(worst, *(int(np.abs(x - y).sum()) for x, y in zip(before, left, strict=True)))
    assert worst <= 2
    assert worst_cumulative > 1  # a move changes several cumulative counts
