"""A publication: several tables, the budget split by the planner's figures, charged once,
written atomically into one directory, served as a set."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize

from dpcube.cli.main import main
from dpcube.errors import DataError, DPCubeError
from dpcube.planning.publication import (
    Publication,
    load_publication,
    plan_shares,
    publication_members,
    release_publication,
    split_budget,
)
from dpcube.privacy.ledger import BudgetLedger, RequestedTotal
from dpcube.release.base import Release

ROOT = Path(__file__).resolve().parents[2]
PERSONS = ROOT / "examples" / "census" / "persons.csv"
REGIONS = ROOT / "examples" / "census" / "regions.csv"
EXAMPLE = ROOT / "examples" / "publication" / "publication.yaml"

SCHEMA = """attributes:
  - {name: age, kind: ordinal, range: [0, 99], width: 10}
  - {name: sex, kind: nominal, categories: [F, M]}
"""
NARROW = """attributes:
  - {name: age, kind: ordinal, range: [0, 40], width: 10}
"""


def _publication(tmp_path: Path, *, narrow: bool = False) -> Publication:
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "narrow.yaml").write_text(NARROW)
    tables = [
        {
            "name": "cube",
            "mechanism": "datacube",
            "schema": "schema.yaml",
            "params": {"publish": "k=1"},
        },
        {"name": "cells", "mechanism": "identity", "schema": "schema.yaml", "weight": 2},
        {
            "name": "households",
            "mechanism": "census-hierarchy",
            "group_by": "household",
            "region": "county",
            "hierarchy": str(REGIONS),
            "max_size": 9,
            "top_code": True,
            "groups_are_public": True,
        },
    ]
    if narrow:  # ages above 40 are out of this schema's domain: refused while counting
        tables.append({"name": "young", "mechanism": "identity", "schema": "narrow.yaml"})
    return Publication.from_dict({"tables": tables}, source="pub.yaml", base=tmp_path)


def _ledger(tmp_path: Path) -> BudgetLedger:
    ledger = BudgetLedger(tmp_path / "persons.ledger", "persons")
    ledger.set_total(5.0)
    return ledger


# -- the split ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_split_matches_a_numerical_optimum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    weights = rng.uniform(0.1, 3.0, n)
    costs = rng.uniform(0.5, 500.0, n)
    total = float(rng.uniform(0.2, 4.0))
    shares = np.array(split_budget(total, list(weights), list(costs)))

    def objective(eps: np.ndarray) -> float:
        return float(np.sum(weights * costs / eps**2))

    def on_simplex(z: np.ndarray) -> np.ndarray:  # eps = E softmax(z): sums to E, all positive
        e = np.exp(z - z.max())
        return np.asarray(total * e / e.sum())

    scale = objective(np.full(n, total / n))
    found = minimize(
        lambda z: objective(on_simplex(z)) / scale,
        np.zeros(n),
        method="BFGS",
        options={"gtol": 1e-12, "maxiter": 10_000},
    )
    numeric = on_simplex(found.x)
    assert np.sum(shares) <= total
    # the closed form is the optimum: BFGS's gradient tolerance 1e-12 on the normalised,
    # strictly convex objective puts its shares within about 1e-6 relative of the optimum (1e-4
    # leaves room), and the numerical point never beats the closed form
    np.testing.assert_allclose(shares, numeric, rtol=1e-4)
    assert objective(shares) <= objective(numeric) * (1 + 1e-9)


def test_data_dependent_tables_get_a_share_by_weight() -> None:
    shares = split_budget(3.0, [1.0, 2.0, 3.0], [10.0, None, 80.0])
    assert shares[1] == pytest.approx(3.0 * 2.0 / 6.0)
    rest = 3.0 - shares[1]  # the closed form splits the rest as (w c)^(1/3): 10 and 240
    assert shares[0] / shares[2] == pytest.approx((10.0 / 240.0) ** (1 / 3))
    assert sum(shares) <= 3.0 and shares[0] + shares[2] == pytest.approx(rest)


def test_shares_follow_the_planner(tmp_path: Path) -> None:
    rows = {r.spec.name: r for r in plan_shares(_publication(tmp_path), 1.0)}
    assert rows["households"].cost is None and rows["households"].epsilon == pytest.approx(0.25)
    assert rows["cube"].cost is not None and rows["cells"].cost is not None
    ratio = rows["cube"].epsilon / rows["cells"].epsilon
    assert ratio == pytest.approx((rows["cube"].cost / (2 * rows["cells"].cost)) ** (1 / 3))


# -- one charge, atomic output ---------------------------------------------------------------


def test_one_charge_for_the_whole_publication(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    out = tmp_path / "pub"
    done = release_publication(
        _publication(tmp_path), str(PERSONS), 1.5, out, ledger=ledger, dataset="persons"
    )
    charges = ledger.charges()
    assert len(charges) == 1 and charges[0].epsilon == 1.5
    assert charges[0].mechanism == "publication"
    assert sorted(os.listdir(out)) == [
        "cells",
        "cube",
        "households",
        "publication.json",
        "publication.md",
    ]
    loaded = load_publication(out)
    shares = [loaded[n].metadata.report["publication"]["epsilon_share"] for n in loaded]
    assert sum(shares) <= 1.5
    for name, release in loaded.items():
        assert release.metadata.accounted and release.metadata.for_publication
        assert release.metadata.epsilon == release.metadata.report["publication"]["epsilon_share"]
        assert release.metadata.report["publication"]["id"] == charges[0].release_id
        assert done.releases[name].metadata.release_id == release.metadata.release_id
    assert "charged once" in (out / "publication.md").read_text()


def test_a_failing_table_charges_nothing_and_writes_nothing(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    out = tmp_path / "pub"
    with pytest.raises(DPCubeError, match=r"table 'young': .*outside the domain"):
        release_publication(
            _publication(tmp_path, narrow=True),
            str(PERSONS),
            1.0,
            out,
            ledger=ledger,
            dataset="persons",
        )
    assert ledger.charges() == []
    assert not out.exists()


def test_a_failure_after_the_charge_leaves_no_partial_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = _ledger(tmp_path)
    out = tmp_path / "pub"
    saved: list[str] = []
    real_save = Release.save

    def save(self: Release, directory: str | os.PathLike[str], **kw: object) -> Path:
        saved.append(str(directory))
        if len(saved) == 2:
            raise OSError(28, "No space left on device")
        return real_save(self, directory, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Release, "save", save)
    with pytest.raises(OSError):
        release_publication(
            _publication(tmp_path), str(PERSONS), 1.0, out, ledger=ledger, dataset="persons"
        )
    assert len(ledger.charges()) == 1  # charged, as a failure after the charge must say
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".dpcube-tmp-")] == []


def test_a_refused_total_charges_nothing(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    with pytest.raises(DPCubeError):
        release_publication(
            _publication(tmp_path),
            str(PERSONS),
            6.0,
            tmp_path / "pub",
            ledger=ledger,
            dataset="persons",
        )
    assert ledger.charges() == [] and not (tmp_path / "pub").exists()


# -- the file's bad input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({}, "tables"),
        ({"tables": []}, "tables"),
        (
            {"tables": [{"name": "a", "mechanism": "nope", "schema": "s"}]},
            "tables[0] (a).mechanism",
        ),
        ({"tables": [{"name": "a", "mechanism": "identity"}]}, "tables[0] (a).schema"),
        (
            {"tables": [{"name": "a", "mechanism": "identity", "schema": "s", "weight": 0}]},
            "weight",
        ),
        ({"tables": [{"name": "a/b", "mechanism": "identity", "schema": "s"}]}, "tables[0].name"),
        (
            {"tables": [{"name": "a", "mechanism": "identity", "schema": "s", "colour": 1}]},
            "colour",
        ),
        (
            {"tables": [{"name": "a", "mechanism": "identity", "schema": "s"}] * 2},
            "tables[1].name",
        ),
        (
            {"tables": [{"name": "h", "mechanism": "census-hierarchy", "group_by": "g"}]},
            "tables[0] (h).region",
        ),
        (
            {"tables": [{"name": "a", "mechanism": "identity", "schema": "s"}], "budget": 1},
            "budget",
        ),
        (
            {
                "tables": [
                    {
                        "name": "h",
                        "mechanism": "census-hierarchy",
                        "group_by": "g",
                        "region": "r",
                        "hierarchy": "h.csv",
                        "max_size": "9",
                        "groups_are_public": True,
                    }
                ]
            },
            "tables[0] (h).max_size",
        ),
    ],
)
def test_bad_fields_are_one_line_naming_the_field(raw: object, named: str) -> None:
    with pytest.raises(DataError) as info:
        Publication.from_dict(raw, source="pub.yaml")
    line = str(info.value)
    assert "\n" not in line and line.startswith("pub.yaml: ") and named in line


def test_cli_bad_plan_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables:\n  - {name: a, mechanism: identity, schema: s.yaml, weight: -1}\n")
    code = main(
        [
            "release",
            str(PERSONS),
            "--plan",
            str(bad),
            "--epsilon",
            "1",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "tables[0] (a).weight" in err
    assert not (tmp_path / "o").exists()


def test_cli_refuses_single_release_flags_with_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "release",
            str(PERSONS),
            "--plan",
            str(EXAMPLE),
            "--mechanism",
            "identity",
            "--epsilon",
            "1",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2 and "--mechanism does not apply with --plan" in capsys.readouterr().err


# -- served as a set ---------------------------------------------------------------------------


def test_served_as_a_set_and_tampering_refused(tmp_path: Path) -> None:
    from dpcube.serve.cli import _release_dirs

    out = tmp_path / "pub"
    release_publication(
        _publication(tmp_path), str(PERSONS), 1.0, out, ledger=_ledger(tmp_path), dataset="persons"
    )
    dirs = _release_dirs([str(out)])
    assert [Path(d).name for d in dirs] == ["cube", "cells", "households"]
    from fastapi.testclient import TestClient

    from dpcube.serve import create_app

    with TestClient(create_app(dirs, runs=20, bootstrap_seed=1)) as client:
        names = {r["name"] for r in client.get("/api/releases").json()["releases"]}
    assert names == {"cube", "cells", "households"}
    manifest = json.loads((out / "publication.json").read_text())
    manifest["tables"][0]["epsilon"] = 9.0
    (out / "publication.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="integrity"):
        publication_members(out)


def test_the_example_plans(tmp_path: Path) -> None:
    rows = plan_shares(Publication.from_file(EXAMPLE), 1.0)
    assert [r.spec.name for r in rows] == ["age_by_sex", "age_ranges", "household_sizes"]
    assert sum(r.epsilon for r in rows) <= 1.0
    assert RequestedTotal(1.0, None).epsilon == 1.0


def test_each_table_is_weighed_as_configured(tmp_path: Path) -> None:
    """The planner's figure is the configured mechanism's (its strategy, or its default), and a
    map's share is by weight (its error depends on the data)."""
    raw = {
        "tables": [
            {
                "name": "lsa",
                "mechanism": "matrix",
                "schema": "w.yaml",
                "params": {"workload": "allrange"},
            },
            {
                "name": "ident",
                "mechanism": "matrix",
                "schema": "w.yaml",
                "params": {"workload": "allrange", "strategy": "identity"},
            },
            {"name": "map", "mechanism": "ug", "schema": "map.yaml"},
        ]
    }
    (tmp_path / "w.yaml").write_text((ROOT / "examples" / "workload" / "schema.yaml").read_text())
    (tmp_path / "map.yaml").write_text((ROOT / "examples" / "location" / "schema.yaml").read_text())
    rows = plan_shares(Publication.from_dict(raw, base=tmp_path), 1.0)
    assert "matrix(lsa)" in rows[0].basis and "matrix(identity)" in rows[1].basis
    assert rows[0].cost != rows[1].cost
    assert rows[2].cost is None and rows[2].epsilon == pytest.approx(1.0 / 3.0)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--group-by", "household"], "--group-by"),
        (["--privacy-unit", "household", "--max-rows-per-unit", "3"], "--privacy-unit"),
        (["--on-out-of-domain", "drop"], "--on-out-of-domain"),
        (["--integer"], "--integer"),
    ],
)
def test_cli_refuses_flags_the_file_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], named: str
) -> None:
    argv = ["release", str(PERSONS), "--plan", str(EXAMPLE), "--epsilon", "1"]
    code = main([*argv, "--out", str(tmp_path / "o"), *flags])
    err = capsys.readouterr().err
    assert code == 2 and f"{named} does not apply with --plan" in err
    assert not (tmp_path / "o").exists()


def test_cli_one_charge_and_a_failure_after_it_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    _publication(tmp_path)
    plan = tmp_path / "pub.yaml"
    plan.write_text(
        "tables:\n"
        "  - {name: cube, mechanism: datacube, schema: schema.yaml, params: {publish: k=1}}\n"
        "  - {name: cells, mechanism: identity, schema: schema.yaml}\n"
    )
    argv = ["release", str(PERSONS), "--plan", str(plan), "--epsilon", "0.5", "--dataset", "p"]
    assert main([*argv, "--total-epsilon", "2", "--out", str(tmp_path / "a"), "--no-report"]) == 0
    assert "charged once" in capsys.readouterr().out
    ledger = BudgetLedger.for_identity("name:p")
    assert [c.epsilon for c in ledger.charges()] == [0.5]

    def failing_save(self: Release, directory: object, **kw: object) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Release, "save", failing_save)
    assert main([*argv, "--out", str(tmp_path / "b"), "--no-report"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "epsilon=0.5 WAS charged" in err
    assert not (tmp_path / "b").exists()
    assert [c.epsilon for c in BudgetLedger.for_identity("name:p").charges()] == [0.5, 0.5]


def test_a_cube_without_consistency_is_not_weighed_as_one_with_it(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SCHEMA)
    cube = {"mechanism": "datacube", "schema": "s.yaml"}
    raw = {
        "tables": [
            {**cube, "name": "plain", "params": {"publish": "k=1"}},
            {**cube, "name": "l2", "params": {"publish": "k=1", "consistency": "l2"}},
        ]
    }
    plain, l2 = plan_shares(Publication.from_dict(raw, base=tmp_path), 1.0)
    assert "datacube(bmax)" in plain.basis and "datacube(bmax, l2)" in l2.basis


def test_a_refused_parameter_names_the_table(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SCHEMA)
    raw = {
        "tables": [
            {"name": "c", "mechanism": "datacube", "schema": "s.yaml", "params": {"colour": 1}}
        ]
    }
    with pytest.raises(DataError) as info:
        plan_shares(Publication.from_dict(raw, base=tmp_path), 1.0)
    assert str(info.value).startswith("table 'c': params: ") and "colour" in str(info.value)


def test_a_seeded_publication_is_marked_not_for_publication(tmp_path: Path) -> None:
    done = release_publication(
        _publication(tmp_path),
        str(PERSONS),
        1.0,
        tmp_path / "pub",
        ledger=None,
        dataset="persons",
        random_state=3,
    )
    assert not done.charged and not done.manifest["for_publication"]
    assert all(not r.metadata.for_publication for r in load_publication(tmp_path / "pub").values())
    assert "NOT FOR PUBLICATION" in (tmp_path / "pub" / "publication.md").read_text()
    with pytest.raises(DPCubeError, match="ledger"):  # unseeded: a ledger is required
        release_publication(
            _publication(tmp_path),
            str(PERSONS),
            1.0,
            tmp_path / "p2",
            ledger=None,
            dataset="persons",
        )
    assert not (tmp_path / "p2").exists()


def test_an_integer_table_is_whole_and_non_negative(tmp_path: Path) -> None:
    # one bin per year: the years above the oldest person are empty cells, where noise of scale
    # 1/0.1 = 10 (the cells' share is below 0.2) is negative with probability about 1/2 each, so
    # an unrounded table of these 18 empty cells (ages 91-99) has a negative count but for
    # 2**-18, about 4e-6
    (tmp_path / "s.yaml").write_text(SCHEMA.replace("width: 10", "width: 1"))
    raw = {
        "tables": [
            {"name": "cells", "mechanism": "identity", "schema": "s.yaml", "integer": True},
            {"name": "cube", "mechanism": "datacube", "schema": "s.yaml"},
        ]
    }
    ledger = _ledger(tmp_path)
    release_publication(
        Publication.from_dict(raw, base=tmp_path),
        str(PERSONS),
        0.2,
        tmp_path / "pub",
        ledger=ledger,
        dataset="persons",
    )
    cells = load_publication(tmp_path / "pub")["cells"]
    counts = np.asarray(cells.counts)  # type: ignore[attr-defined]
    assert (counts >= 0).all() and (counts == np.round(counts)).all()
    assert cells.metadata.report["publication"]["table"] == "cells"
    assert len(ledger.charges()) == 1


# -- one report ----------------------------------------------------------------------------------


def _guarantee_section(html: str) -> str:
    start = html.index('<section id="guarantee">')
    return html[start : html.index("</section>", start)]


def test_cli_writes_one_publication_report_with_the_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpcube.planning import publication as publication_module

    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    _publication(tmp_path)
    plan = tmp_path / "pub.yaml"
    plan.write_text(
        "tables:\n"
        "  - {name: cube, mechanism: datacube, schema: schema.yaml, params: {publish: k=1}}\n"
        "  - {name: cells, mechanism: identity, schema: schema.yaml, weight: 3}\n"
    )
    out = tmp_path / "bulletin"
    seen_before_rename: list[bool] = []
    real_replace = publication_module.os.replace

    def replace(src: object, dst: object) -> None:  # the reports are in place before the rename
        if Path(str(src)).is_dir() and Path(str(src)).name.startswith(".dpcube-tmp-publication"):
            seen_before_rename.append((Path(str(src)) / "publication.html").is_file())
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(publication_module.os, "replace", replace)
    argv = ["release", str(PERSONS), "--plan", str(plan), "--epsilon", "0.5", "--dataset", "p"]
    assert main([*argv, "--total-epsilon", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    assert seen_before_rename == [True]
    html = (out / "publication.html").read_text()
    manifest = json.loads((out / "publication.json").read_text())
    for t in manifest["tables"]:
        assert f'<td class="label">{t["name"]}</td>' in html
        assert f"{t['epsilon']:.4g}" in html and f"{t['epsilon'] / 0.5:.1%}" in html
        assert f'href="{t["name"]}/report.html"' in html
        assert (out / t["name"] / "report.html").is_file()
    guarantee = _guarantee_section(html)
    assert "charged once" in guarantee and "{" not in guarantee
    assert "NOT FOR PUBLICATION" not in html
    assert "dpcube: plotly.js" not in html  # no figures on this page, so no Plotly inlined
    load_publication(out)  # the reports do not break the publication's hashes
    from dpcube.release.base import is_dpcube_report

    # dpcube's marks moved with the files: `dpcube report` may rewrite the reports where they are
    assert is_dpcube_report(out / "publication.html")
    assert all(is_dpcube_report(out / t["name"] / "report.html") for t in manifest["tables"])


def test_no_report_is_left_when_the_release_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpcube.report.publication import write_publication_report

    written: list[Path] = []

    def writer(staging: Path, manifest: dict[str, object]) -> None:
        written.append(write_publication_report(staging, manifest))

    real_save = Release.save
    saves: list[int] = []

    def save(self: Release, directory: str | os.PathLike[str], **kw: object) -> Path:
        saves.append(1)
        if len(saves) == 3:
            raise OSError(28, "No space left on device")
        return real_save(self, directory, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Release, "save", save)
    out = tmp_path / "pub"
    with pytest.raises(OSError):
        release_publication(
            _publication(tmp_path),
            str(PERSONS),
            1.0,
            out,
            ledger=_ledger(tmp_path),
            dataset="persons",
            report_writer=writer,
        )
    assert written == [] and not out.exists()
    assert list(tmp_path.rglob("*.html")) == []

    def failing_writer(staging: Path, manifest: dict[str, object]) -> None:
        writer(staging, manifest)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Release, "save", real_save)
    with pytest.raises(OSError):
        release_publication(
            _publication(tmp_path),
            str(PERSONS),
            1.0,
            out,
            ledger=_ledger(tmp_path),
            dataset="persons",
            report_writer=failing_writer,
        )
    assert len(written) == 1 and not written[0].exists() and not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".dpcube-tmp-")] == []


def test_a_seeded_publication_report_says_not_for_publication(tmp_path: Path) -> None:
    from dpcube.report.publication import write_publication_report

    done = release_publication(
        _publication(tmp_path),
        str(PERSONS),
        1.0,
        tmp_path / "pub",
        ledger=None,
        dataset="persons",
        random_state=3,
        report_writer=lambda staging, manifest: None,
    )
    page = write_publication_report(tmp_path / "pub", done.manifest, linked=set()).read_text()
    assert "NOT FOR PUBLICATION" in page
    assert 'href="cube/report.html"' not in page and 'href="cube/report.md"' in page


def test_a_directory_named_like_the_staging_one_is_never_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the staging directory is dpcube's own, made fresh: a directory already there under a name
    # it could have picked (here forced by a fixed random id) is neither reused nor deleted
    import dpcube.planning.publication as publication_module

    monkeypatch.setattr(publication_module.os, "urandom", lambda n: b"\0" * n)
    theirs = tmp_path / ".dpcube-tmp-publication-000000000000"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("keep me")
    out = tmp_path / "pub"
    release_publication(
        _publication(tmp_path),
        str(PERSONS),
        1.0,
        out,
        ledger=_ledger(tmp_path),
        dataset="persons",
        report_writer=lambda staging, manifest: None,
    )
    assert (theirs / "notes.txt").read_text() == "keep me"
    assert (out / "publication.json").is_file() and not (out / "notes.txt").exists()
