"""``dpcube report``: one self-contained HTML file per release.

Each kind of release gets its pictures (counted by their stable ids), nothing is fetched from the
network, no exact figure of the input appears, and no file dpcube did not write is overwritten.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcube import Histogram, Identity, Schema, load_release, registry
from dpcube.cli.main import main
from dpcube.mechanisms.conformance import Case
from dpcube.release.base import is_dpcube_report
from dpcube.release.cells import CellRelease
from dpcube.report import build_report, write_report
from dpcube.report.html import PLOTLY_END, PLOTLY_START


class _Page(HTMLParser):
    """Every element's tag and attributes, and the text outside scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))


def parse(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    return p


def ids(page: _Page, prefix: str) -> list[str]:
    return [str(a["id"]) for _, a in page.elements if str(a.get("id") or "").startswith(prefix)]


def case(mechanism: str, case_id: str) -> tuple[Any, Case]:
    cls = registry.resolve(registry.MECHANISMS, mechanism, "mechanism")
    return cls, next(c for c in cls.conformance_cases() if c.id == case_id)


def saved(mechanism: str, case_id: str, tmp: Path, seed: int = 3) -> Path:
    """A seeded release of a conformance case on small random counts, saved and read back."""
    cls, c = case(mechanism, case_id)
    counts = np.random.default_rng(1).integers(1, 4, size=c.schema.shape)
    data = c.prepare(Histogram(c.schema, counts))
    neighbour = (c.neighbours or [cls.neighbours[0].value])[0]
    out: Path = c.make(neighbour).release(data, random_state=seed).save(tmp / case_id)
    return out


# (mechanism, conformance case, figure ids expected, table ids expected)
KINDS = [
    ("identity", "identity-laplace", ["fig-marginal-a", "fig-marginal-b", "fig-marginal-a-b"], []),
    ("datacube", "datacube-bmax", ["fig-marginal-a", "fig-marginal-b", "fig-marginal-c"],
     ["table-cuboid-total", "table-cuboid-a-b-c"]),
    ("ug", "ug-fixed", ["fig-spatial"], ["table-leaves"]),
    ("htf", "htf-default", ["fig-spatial"], ["table-leaves"]),
    ("census-hierarchy", "census-dp", ["fig-census-nation"],
     ["table-census-nation", "table-census-state-0"]),
    ("auto", "auto-upto-mixed", ["fig-marginal-a", "fig-plan"], ["table-plan"]),
    ("auto", "auto-allrange", ["fig-plan", "fig-plan-strategies"], ["table-plan"]),
    ("privelet", "privelet-mixed", ["fig-marginal-a", "fig-marginal-a-b"], []),
]  # fmt: skip


@pytest.mark.parametrize(("mechanism", "case_id", "figs", "tables"), KINDS,
                         ids=[k[1] for k in KINDS])  # fmt: skip
def test_each_kind_has_its_figures_and_tables(
    mechanism: str, case_id: str, figs: list[str], tables: list[str], tmp_path: Path
) -> None:
    rel = saved(mechanism, case_id, tmp_path)
    path = write_report(rel, seed=1)
    assert path == rel / "report.html" and is_dpcube_report(path)
    text = path.read_text()
    page = parse(text)
    figures = [a for _, a in page.elements if "dpcube-figure" in str(a.get("class") or "")]
    plots = [a for _, a in page.elements if a.get("class") == "plotly-graph-div"]
    assert set(figs) <= {str(a["id"]) for a in figures}
    assert len(plots) == len(figures)  # one Plotly graph per figure block
    assert text.count("Plotly.newPlot(") == len(figures)
    assert set(tables) <= set(ids(page, "table-"))
    manifest = json.loads((rel / "manifest.json").read_text())
    meta = {a.get("name"): a.get("content") for t, a in page.elements if t == "meta"}
    assert meta["dpcube-release-id"] == manifest["metadata"]["release_id"]
    assert "NOT FOR PUBLICATION" in text  # seeded: the banner says so
    # Every figure states what its error bars are, in the words of its error kind.
    captions = re.findall(r'<p class="dpcube-uncertainty">([^<]*)</p>', text)
    assert len(captions) >= len(figures) + len(tables) - ("table-plan" in tables)
    kind = load_release(rel)
    wording = {
        "exact": "exact noise sd",
        "bound": "bound interval, valid on any data",
        "bootstrap": "parametric-bootstrap interval from 50",
    }
    from dpcube.release.uncertainty import uncertainty_kind

    assert all(
        wording[uncertainty_kind(kind)[0]] in c for c in captions if "no noise is drawn" not in c
    )
    # The Plotly library is inlined exactly once, and it is the library itself.
    assert text.count(PLOTLY_START) == 1 and "Plotly" in text.split(PLOTLY_START)[1][:2000]


def test_census_drill_down_lists_each_state_with_its_children(tmp_path: Path) -> None:
    rel = saved("census-hierarchy", "census-dp", tmp_path)
    release = load_release(rel)
    text = build_report(release, seed=1)
    page = parse(text)
    h = release.hierarchy  # type: ignore[attr-defined]
    states = [i for i in range(h.size) if h.level[i] == 2 and (h.parent == i).any()]
    options = [a for t, a in page.elements if t == "option"]
    assert len(options) == len(states) == len(ids(page, "table-census-state-"))
    # Sizes are columns: one header cell per size, plus the region and "all sizes".
    nation = text.split('id="table-census-nation"')[1].split("</thead>")[0]
    assert len(re.findall(r"<th[ >]", nation)) == release.max_size + 2  # type: ignore[attr-defined]
    # Only the first state's table is shown until another is chosen.
    divs = [a for t, a in page.elements if t == "div" and a.get("class") == "census-state"]
    assert ["hidden" in a for a in divs] == [False] + [True] * (len(divs) - 1)


def test_no_network_reference(tmp_path: Path) -> None:
    """Viewable offline: no src/href to the network, no stylesheet or font fetched."""
    for mechanism, case_id in (("identity", "identity-laplace"), ("ug", "ug-fixed")):
        text = write_report(saved(mechanism, case_id, tmp_path), seed=1).read_text()
        page = parse(text)
        for tag, attrs in page.elements:
            for key in ("src", "href", "srcset", "data", "action", "poster"):
                value = str(attrs.get(key) or "")
                assert not re.match(r"\s*(https?:)?//", value, re.I), (tag, key, value)
            assert tag not in ("link", "iframe", "img", "object", "embed"), tag
        outside = text.split(PLOTLY_START)[0] + text.split(PLOTLY_END)[1]
        assert "@import" not in outside and "url(" not in outside and "@font-face" not in outside
        assert "cdn" not in outside.lower()


# -- no exact figure ------------------------------------------------------------------------------

#: age 0..5 x sex: every exact count, marginal and the total is a 6- or 7-digit number, and any two
#: of them are more than 4,000 apart, so none can be mistaken for another's noisy value.
COUNTS = 100_000 + 10_007 * np.arange(6)[:, None] + 4_001 * np.array([[0, 13]])
EXACT_SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 5], "width": 1},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
        ]
    }
)


def exact_figures(counts: np.ndarray) -> set[int]:
    return {
        *counts.ravel().tolist(),
        *counts.sum(axis=0).tolist(),
        *counts.sum(axis=1).tolist(),
        int(counts.sum()),
    }


def numbers_in(text: str) -> list[float]:
    """Every number of the page outside Plotly's library, thousands separators removed."""
    rest = text.split(PLOTLY_START)[0] + text.split(PLOTLY_END)[1]
    found = re.findall(r"-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?", rest)
    out: list[float] = []
    for token in found:
        # "1,234.5" (a table) is one number; "1.0,2.0" (JSON) is two.
        parts = [token] if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", token) else token.split(",")
        out.extend(float(p.replace(",", "")) for p in parts if p and p != "-")
    return out


def leaked(text: str, exact: set[int], released: dict[int, float]) -> list[int]:
    """Exact figures that appear (to within rounding) where the release differs from them."""
    values = np.asarray(numbers_in(text))
    return sorted(
        v for v in exact if abs(released[v] - v) >= 1 and np.any(np.abs(values - v) < 0.5)
    )


def test_no_exact_figure_of_the_input_appears(tmp_path: Path) -> None:
    """The exact counts, marginals and total of the input are absent from the report wherever
    the release differs from them; the same check finds them in a report of the exact counts
    (so it can fail)."""
    exact = exact_figures(COUNTS)
    # Discrete Laplace of scale 1/0.02 = 50 per cell: every released figure differs from its
    # exact value by several units (the check below skips any that happens not to).
    noisy = Identity(0.02).release(Histogram(EXACT_SCHEMA, COUNTS), random_state=7)
    noisy.curator_log["rows"] = int(COUNTS.sum())  # an exact figure the saved release must drop
    rel = noisy.save(tmp_path / "rel")
    loaded = load_release(rel)
    c = np.asarray(loaded.counts)  # type: ignore[attr-defined]
    released_of = dict(
        zip(COUNTS.ravel().tolist(), c.ravel().tolist(), strict=True)
    ) | dict(zip(COUNTS.sum(axis=0).tolist(), c.sum(axis=0).tolist(), strict=True)) | dict(
        zip(COUNTS.sum(axis=1).tolist(), c.sum(axis=1).tolist(), strict=True)
    ) | {int(COUNTS.sum()): float(c.sum())}  # fmt: skip
    differs = [v for v in exact if abs(released_of[v] - v) >= 1]
    assert len(differs) >= len(exact) - 2  # the check is about (nearly) every figure
    text = write_report(rel, seed=1).read_text()
    assert leaked(text, exact, released_of) == []
    # The released marginals are there (the report shows the release, rounded as in a table).
    shown = np.asarray(numbers_in(text))
    for v in c.sum(axis=1).tolist():
        assert np.any(np.abs(shown - v) < 0.5)
    # Control: a report of the exact counts (a noiseless stand-in) is caught by the same check.
    truth = CellRelease(EXACT_SCHEMA, loaded.metadata, COUNTS.astype(float))
    assert leaked(build_report(truth), exact, released_of) == sorted(differs)


# -- the command line -----------------------------------------------------------------------------


@pytest.fixture
def people(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.integers(0, 3, 60), "b": rng.choice(["x1", "x2", "y"], 60)})
    data = tmp_path / "people.csv"
    frame.to_csv(data, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps(
            {
                "attributes": [
                    {"name": "a", "kind": "ordinal", "range": [0, 2], "width": 1},
                    {"name": "b", "kind": "nominal", "categories": ["x1", "x2", "y"]},
                ]
            }
        )
    )
    return data, schema


def release_cli(
    tmp: Path, people: tuple[Path, Path], out: Path, *extra: str
) -> tuple[int, str, str]:
    data, schema = people
    argv = ["release", str(data), "--schema", str(schema), "--mechanism", "identity",
            "--epsilon", "0.5", "--seed", "1", "--out", str(out), "--ledger-dir",
            str(tmp / "ledgers"), "--total-epsilon", "100", *extra]  # fmt: skip
    return main(argv), "", ""


def test_release_writes_the_report_unless_no_report(
    tmp_path: Path, people: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert release_cli(tmp_path, people, tmp_path / "r1")[0] == 0
    out = capsys.readouterr().out
    assert f"report: {tmp_path / 'r1' / 'report.html'}" in out
    assert is_dpcube_report(tmp_path / "r1" / "report.html")
    assert release_cli(tmp_path, people, tmp_path / "r2", "--no-report")[0] == 0
    assert "report:" not in capsys.readouterr().out
    assert not (tmp_path / "r2" / "report.html").exists()
    assert release_cli(tmp_path, people, tmp_path / "r3", "--no-report", "--json")[0] == 0
    assert json.loads(capsys.readouterr().out)["report"] is None
    # Overwriting a release replaces its report with the new release's.
    old = (tmp_path / "r1" / "report.html").read_text()
    assert release_cli(tmp_path, people, tmp_path / "r1", "--overwrite")[0] == 0
    new_id = json.loads((tmp_path / "r1" / "manifest.json").read_text())["metadata"]["release_id"]
    new = (tmp_path / "r1" / "report.html").read_text()
    assert new != old and f'name="dpcube-release-id" content="{new_id}"' in new


def test_report_command_out_and_level(
    tmp_path: Path, people: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rel = tmp_path / "rel"
    release_cli(tmp_path, people, rel, "--no-report")
    capsys.readouterr()
    target = tmp_path / "elsewhere.html"
    assert main(["report", str(rel), "--out", str(target), "--level", "0.9"]) == 0
    assert capsys.readouterr().out.strip() == str(target)
    assert not (rel / "report.html").exists()  # --out only
    text = target.read_text()
    assert "90% interval" in text and "95% interval" not in text
    assert 'href="report.md"' not in text  # the link is relative to the release directory
    assert main(["report", str(rel)]) == 0
    assert capsys.readouterr().out.strip() == str(rel / "report.html")
    assert 'href="report.md"' in (rel / "report.html").read_text()
    assert main(["report", str(rel)]) == 0  # its own report: replaced
    capsys.readouterr()
    assert main(["report", str(rel), "--runs", "30"]) == 0  # exact errors: said, not ignored
    assert "--runs/--bootstrap-seed have no effect" in capsys.readouterr().err


def test_a_users_file_is_never_overwritten(
    tmp_path: Path, people: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rel = tmp_path / "rel"
    release_cli(tmp_path, people, rel, "--no-report")
    mine = rel / "report.html"
    mine.write_text("<html>my notes</html>")
    other = tmp_path / "notes.html"
    other.write_text("<html>other notes</html>")
    capsys.readouterr()
    for argv in (["report", str(rel)], ["report", str(rel), "--out", str(other)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "not written by dpcube report" in err
    assert mine.read_text() == "<html>my notes</html>"
    assert other.read_text() == "<html>other notes</html>"
    # Nor by a release that replaces the earlier one: the user's file is not the release's.
    assert release_cli(tmp_path, people, rel, "--overwrite")[0] == 2
    assert "'report.html'" in capsys.readouterr().err
    assert mine.read_text() == "<html>my notes</html>"


@pytest.mark.parametrize("where", ["missing", "empty", "file"])
def test_not_a_release_is_one_line(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / where
    if where == "empty":
        target.mkdir()
    elif where == "file":
        target.write_text("x")
    assert main(["report", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(target) in err
    assert not (tmp_path / where / "report.html").exists() if where == "empty" else True


def test_bad_options_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rel = saved("identity", "identity-laplace", tmp_path)
    for argv, words in (
        (["--level", "1.5"], "--level"),
        (["--runs", "5"], "--runs"),
        (["--out", str(tmp_path / "nowhere" / "r.html")], "does not exist"),
        (["--out", str(tmp_path)], "is a directory"),
    ):
        assert main(["report", str(rel), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err


def test_bootstrap_runs_are_stated_and_saved_replicates_preferred(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dpcube release` reports a bootstrap release with the fewest replicates and says so;
    `dpcube report --runs` sets them; replicates saved with a release are used as saved."""
    from types import SimpleNamespace

    from dpcube.release.uncertainty import RELEASE_RUNS
    from dpcube.report.sections import RELEASE_REPORT_RUNS, ReportOptions, bootstrap_arguments

    schema = tmp_path / "loc.yaml"
    schema.write_text(
        "attributes:\n  - name: loc\n    kind: spatial\n    columns: [lat, lng]\n"
        "    bbox: [0, 0, 1, 1]\n    resolution: [8, 8]\n"
    )
    rng = np.random.default_rng(0)
    pd.DataFrame({"lat": rng.uniform(0, 1, 300), "lng": rng.uniform(0, 1, 300)}).to_csv(
        tmp_path / "points.csv", index=False
    )
    rel = tmp_path / "map"
    argv = ["release", str(tmp_path / "points.csv"), "--schema", str(schema), "--mechanism",
            "ug", "--epsilon", "1", "--seed", "2", "--out", str(rel), "--ledger-dir",
            str(tmp_path / "l"), "--total-epsilon", "10"]  # fmt: skip
    # UG's intervals are bounds (no bootstrap in its report); the release still stores
    # RELEASE_RUNS replicates for its model-based alternative (dpcube query --intervals model)
    assert main(argv) == 0
    text = (rel / "report.html").read_text()
    assert "bound interval, valid on any data" in text and "re-runs" not in text
    assert json.loads((rel / "manifest.json").read_text())["bootstrap"]["runs"] == RELEASE_RUNS
    # an L1-consistent data cube's intervals are a bootstrap: the report computes the fewest
    # replicates and says they are coarse, or as many as asked
    census = saved("datacube", "datacube-bmax-l1", tmp_path)
    write_report(census, seed=1, default_runs=RELEASE_REPORT_RUNS)
    text = (census / "report.html").read_text()
    assert f"interval from {RELEASE_REPORT_RUNS} re-runs" in text and "coarse" in text
    assert "NOT TRUSTED" in text
    assert main(["report", str(census), "--runs", "30", "--bootstrap-seed", "4"]) == 0
    text = (census / "report.html").read_text()
    assert "interval from 30 re-runs" in text and "from 20 re-runs" not in text
    capsys.readouterr()
    # A release that carries saved replicates (dpcube release --bootstrap-runs) uses them as
    # saved unless a number is asked for; one without gets the report's default.
    with_saved = SimpleNamespace(stored_replicates=object())
    without = SimpleNamespace(stored_replicates=None)
    assert bootstrap_arguments(with_saved, ReportOptions(seed=9)) == (None, None)  # type: ignore[arg-type]
    assert bootstrap_arguments(with_saved, ReportOptions(runs=40, seed=9)) == (40, 9)  # type: ignore[arg-type]
    assert bootstrap_arguments(without, ReportOptions(seed=9, default_runs=20)) == (20, 9)  # type: ignore[arg-type]


def test_a_costly_bootstrap_is_skipped_within_a_budget_and_labelled(tmp_path: Path) -> None:
    """With a CPU budget (dpcube release's report), a bootstrap that would exceed it is skipped:
    the bars are the noise sd, labelled as noise only, and the page says how to get the rest."""
    from dpcube.mechanisms.datacube import DataCube

    s = Schema.from_dict(
        {"attributes": [{"name": n, "kind": "nominal", "categories": ["0", "1"]} for n in "ab"]}
    )
    clamped = DataCube(1.0, nonnegative=True).release(
        Histogram(s, [[10, 20], [30, 40]]), random_state=1
    )
    release = load_release(clamped.save(tmp_path / "clamped"))
    text = build_report(release, seed=1, bootstrap_budget_s=0.0)
    # a clamped cube does not know its answers' noise sd: no bars at all, and it says so
    assert "this release does not know its noise sd" in text
    assert "parametric-bootstrap interval" not in text
    assert "skipped in this report" in text and "dpcube report REL computes" in text
    text = build_report(release, seed=1, bootstrap_budget_s=1e9)
    assert "parametric-bootstrap interval from 50 re-runs" in text and "NOISE SD ONLY" not in text
