"""Nothing exact leaves in a release.

A release directory may hold only what the mechanism's guarantee covers: noisy values, functions
of them (post-processing), the parameters, and public facts (the schema). No figure computed
from the data without noise: not a row count, not a dropped/clipped count, not a user count.

This is not a list of forbidden keys (that would miss the next leak). Every saved file is
flattened to (location, value) pairs: each JSON leaf of the manifest with its path, each token of
each line of report.md, each cell of each table. The same data D1 is released with several seeds,
and a different data set D2 (other counts, totals, rows dropped/clipped, users) with several seeds.
A value that is the same under every seed on D1 and under every seed on D2, yet differs between D1
and D2, does not depend on the noise but does depend on the data: an exact figure. (Provenance
such as the release id, the timestamp and the table file names changes with every release, so it
is never flagged and needs no exclusion.)

Two layers: every conformance case of every registered mechanism (a histogram carrying an
engine-style data report), and the command line, where the engines, the spatial user bounding,
the census group-size table and the data cube's own counting build their data reports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dpcube import registry
from dpcube.cli.main import main
from dpcube.engine.base import policy_report
from dpcube.files import write_atomic
from dpcube.histogram import Histogram
from dpcube.mechanisms.conformance import Case, mixed_schema
from dpcube.release.base import load_release
from dpcube.report import build_report
from dpcube.report.html import PLOTLY_END, PLOTLY_START

#: Most seeds per data set before a value that never changed with the noise is called exact.
MAX_SEEDS = 16

MECHANISMS = {
    name: registry.resolve(registry.MECHANISMS, name, "mechanism")
    for name in sorted(registry.MECHANISMS)
}
CASES: list[Case] = [case for cls in MECHANISMS.values() for case in cls.conformance_cases()]


# -- flattening a saved release ---------------------------------------------------------------


def _leaves(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _leaves(v, f"{path}.{k}", out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _leaves(v, f"{path}[{i}]", out)
    else:
        out[path] = value


def flatten(directory: Path) -> dict[str, Any]:
    """Every value a saved release holds, keyed by where it is."""
    manifest = json.loads((directory / "manifest.json").read_text())
    out: dict[str, Any] = {}
    _leaves(manifest, "manifest", out)
    for i, line in enumerate((directory / "report.md").read_text().splitlines()):
        label = line.split(":", 1)[0] if ":" in line else f"line{i}"
        for j, token in enumerate(re.findall(r"[^\s,;:()\[\]{}\"'`=]+", line)):
            out[f"report[{label}]#{j}"] = token
    for name, fname in manifest["tables"].items():
        table = pq.read_table(directory / fname).to_pydict()
        for column, values in table.items():
            for r, v in enumerate(values):
                out[f"table[{name}].{column}[{r}]"] = v
    html = directory / "report.html"  # `dpcube release` writes the HTML report by default
    if html.exists():
        for j, token in enumerate(report_html_tokens(html.read_text())):
            out[f"report.html#{j}"] = token
    # Every file of the directory is accounted for: the walk above covers all that save writes.
    assert {p.name for p in directory.iterdir()} == {
        "manifest.json",
        "report.md",
        *manifest["tables"].values(),
        *(["report.html"] if html.exists() else []),
    }
    return out


def report_html_tokens(text: str) -> list[str]:
    """The tokens of an HTML report, Plotly's own library left out (it is the same in every
    report): every label, number and word of the page and of its figures' data, in order."""
    start, end = text.index(PLOTLY_START), text.index(PLOTLY_END)
    rest = re.sub(r"(?<=\d),(?=\d{3}(?![\d.]))", "", text[:start] + text[end:])  # 1,234 -> 1234
    return re.findall(r"[^\s,;:()\[\]{}\"'`=<>]+", rest)


def exact_figures(d1: list[dict[str, Any]], d2: list[dict[str, Any]]) -> dict[str, Any]:
    """Locations whose value is the same under every seed on D1 and on D2 but differs between them."""
    found: dict[str, Any] = {}
    keys = set.intersection(*(set(f) for f in d1 + d2))
    for key in sorted(keys):
        a = {json.dumps(f[key], sort_keys=True, default=str) for f in d1}
        b = {json.dumps(f[key], sort_keys=True, default=str) for f in d2}
        if len(a) == 1 and len(b) == 1 and a != b:
            found[key] = (a.pop(), b.pop())
    return found


def assert_no_exact_figures(release: Callable[[int, int, Path], Path], tmp: Path) -> None:
    """``release(data_set, seed, directory)`` saves a release of data set 1 or 2 and returns it.

    Three seeds per data set first; while some value looks exact, more seeds (up to
    :data:`MAX_SEEDS`): a noisy cell of a small-scale discrete noise can repeat by chance, an exact
    figure repeats under every seed. Seeded releases are deterministic, so this is too.
    """
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    found: dict[str, Any] = {"": None}
    seed = 0
    while found and seed < MAX_SEEDS:
        for d in (1, 2):
            runs[d].append(flatten(release(d, 100 + seed, tmp / f"d{d}-s{seed}")))
        seed += 1
        if seed >= 3:
            found = exact_figures(runs[1], runs[2])
    assert not found, f"exact figures of the data in the saved release: {found}"


# -- layer 1: every conformance case ----------------------------------------------------------


def _data(case: Case, d: int) -> Histogram:
    """D1 and D2: different counts and totals, and a different engine-style data report."""
    rng = np.random.default_rng(100 + d)
    counts = rng.integers(1, 4, size=case.schema.shape)
    first = case.schema.names[0]
    dropped, clipped = 2 * d, 5 - d
    report = policy_report(
        "drop",
        rows=int(counts.sum()) + dropped,
        counted=int(counts.sum()),
        dropped={first: dropped},
        clipped={first: clipped},
    )
    return Histogram(case.schema, counts, report)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_no_exact_figure_in_a_saved_release(case: Case, tmp_path: Path) -> None:
    neighbour = (case.neighbours or [MECHANISMS_OF[case.id].neighbours[0].value])[0]

    def release(d: int, seed: int, out: Path) -> Path:
        data = case.prepare(_data(case, d))
        return case.make(neighbour).release(data, random_state=seed).save(out)

    assert_no_exact_figures(release, tmp_path)


MECHANISMS_OF = {case.id: cls for cls in MECHANISMS.values() for case in cls.conformance_cases()}


def test_the_walk_catches_an_exact_figure_in_the_html_report(tmp_path: Path) -> None:
    """The scan of report.html: a row count planted in the page is caught."""
    case = next(c for c in CASES if c.id.startswith("identity"))

    def release(d: int, seed: int, out: Path) -> Path:
        r = case.make("add_remove").release(_data(case, d), random_state=seed)
        rows = r.curator_log["rows"]
        saved = r.save(out)
        html = build_report(load_release(saved), seed=seed)
        planted = html.replace("</body>", f"<p>rows read: {rows}</p></body>")
        write_atomic(saved / "report.html", planted.encode())
        return saved

    with pytest.raises(AssertionError, match=r"report\.html#"):
        assert_no_exact_figures(release, tmp_path)


def test_the_walk_catches_an_exact_figure(tmp_path: Path) -> None:
    """The detector itself: a release that carries its input's row count is caught."""
    case = next(c for c in CASES if c.id.startswith("identity"))

    def release(d: int, seed: int, out: Path) -> Path:
        r = case.make("add_remove").release(_data(case, d), random_state=seed)
        r.metadata.report["rows"] = r.curator_log["rows"]
        return r.save(out)

    with pytest.raises(AssertionError, match=r"manifest\.metadata\.report\.rows"):
        assert_no_exact_figures(release, tmp_path)


# -- layer 2: the command line ----------------------------------------------------------------


def _cli(tmp: Path, data: Path, out: Path, seed: int, *args: str) -> Path:
    code = main(
        [
            "release",
            str(data),
            "--out",
            str(out),
            "--seed",
            str(seed),
            "--epsilon",
            "0.5",
            "--ledger-dir",
            str(tmp / "ledgers"),
            "--total-epsilon",
            "1000",
            *args,
        ]
    )
    assert code == 0
    return out


def _mixed_rows(d: int) -> pd.DataFrame:
    """Rows over mixed_schema with d-dependent numbers of out-of-range values."""
    rng = np.random.default_rng(d)
    n = 40 + 7 * d
    a = rng.integers(0, 3, size=n).astype(float)
    a[: 2 * d] = 9.0  # above the range: dropped or clipped
    a[2 * d : 2 * d + d] = -4.0  # below
    b = rng.choice(["x1", "x2", "y"], size=n)
    return pd.DataFrame({"a": a, "b": b})


@pytest.mark.parametrize(
    ("mechanism", "policy"),
    [("identity", "drop"), ("identity", "clip"), ("datacube", "drop"), ("datacube", "clip")],
)
def test_cli_cells_with_out_of_domain_rows(mechanism: str, policy: str, tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(mixed_schema().to_dict()))
    for d in (1, 2):
        _mixed_rows(d).to_csv(tmp_path / f"d{d}.csv", index=False)

    def release(d: int, seed: int, out: Path) -> Path:
        return _cli(
            tmp_path,
            tmp_path / f"d{d}.csv",
            out,
            seed,
            "--mechanism",
            mechanism,
            "--schema",
            str(schema),
            "--on-out-of-domain",
            policy,
        )

    assert_no_exact_figures(release, tmp_path)


def test_cli_spatial_user_bounding(tmp_path: Path) -> None:
    schema = tmp_path / "loc.yaml"
    schema.write_text(
        "attributes:\n  - name: loc\n    kind: spatial\n    columns: [lat, lng]\n"
        "    bbox: [0, 0, 1, 1]\n    resolution: [4, 4]\n"
    )
    for d in (1, 2):
        rng = np.random.default_rng(d)
        uid = np.repeat(np.arange(10 + 5 * d), 3 + d)  # other users, points and drops
        lat = rng.uniform(0, 1, uid.size)
        lat[:d] = 1.5  # out of the box, dropped
        frame = pd.DataFrame({"uid": uid, "lat": lat, "lng": rng.uniform(0, 1, uid.size)})
        frame.to_csv(tmp_path / f"d{d}.csv", index=False)

    def release(d: int, seed: int, out: Path) -> Path:
        return _cli(
            tmp_path,
            tmp_path / f"d{d}.csv",
            out,
            seed,
            "--mechanism",
            "ug",
            "--schema",
            str(schema),
            "--param",
            "grid_size=4",
            "--user-column",
            "uid",
            "--max-points-per-user",
            "2",
            "--on-out-of-domain",
            "drop",
        )

    assert_no_exact_figures(release, tmp_path)


@pytest.mark.parametrize("mechanism", ["identity", "datacube", "privelet"])
def test_cli_privacy_unit_bounding(mechanism: str, tmp_path: Path) -> None:
    """Units, rows before bounding and rows dropped by the bound differ between D1 and D2."""
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(mixed_schema().to_dict()))
    for d in (1, 2):
        frame = _mixed_rows(d)
        frame["unit"] = np.random.default_rng(d).integers(0, 6 + 3 * d, size=len(frame))
        frame.to_csv(tmp_path / f"d{d}.csv", index=False)

    def release(d: int, seed: int, out: Path) -> Path:
        return _cli(
            tmp_path,
            tmp_path / f"d{d}.csv",
            out,
            seed,
            "--mechanism",
            mechanism,
            "--schema",
            str(schema),
            "--on-out-of-domain",
            "clip",
            "--privacy-unit",
            "unit",
            "--max-rows-per-unit",
            "3",
        )

    assert_no_exact_figures(release, tmp_path)


def test_cli_census_group_sizes(tmp_path: Path) -> None:
    """The units and their regions are public (the census neighbour); the sizes are not."""
    hierarchy = tmp_path / "regions.csv"
    hierarchy.write_text("region,parent\nUS,\nGA,US\nNY,US\n")
    units = np.arange(12)
    region = np.where(units < 5, "GA", "NY")
    for d in (1, 2):
        rng = np.random.default_rng(d)
        sizes = rng.integers(1, 4, size=units.size)
        frame = pd.DataFrame(
            {"household": np.repeat(units, sizes), "county": np.repeat(region, sizes)}
        )
        frame.to_csv(tmp_path / f"d{d}.csv", index=False)

    def release(d: int, seed: int, out: Path) -> Path:
        return _cli(
            tmp_path,
            tmp_path / f"d{d}.csv",
            out,
            seed,
            "--mechanism",
            "census-hierarchy",
            "--group-by",
            "household",
            "--region",
            "county",
            "--hierarchy",
            str(hierarchy),
            "--max-size",
            "4",
            "--groups-are-public",
        )

    assert_no_exact_figures(release, tmp_path)


# -- the curator log ----------------------------------------------------------------------------


def test_curator_log_is_written_outside_the_release_and_labelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(mixed_schema().to_dict()))
    _mixed_rows(1).to_csv(tmp_path / "d.csv", index=False)
    args = ["--mechanism", "identity", "--schema", str(schema), "--on-out-of-domain", "drop"]
    inside = tmp_path / "r" / "log.json"
    assert main(["release", str(tmp_path / "d.csv"), "--out", str(tmp_path / "r"),
                 "--curator-log", str(inside), "--ledger-dir", str(tmp_path / "l"),
                 "--total-epsilon", "10", "--epsilon", "1", *args]) != 0  # fmt: skip
    err = capsys.readouterr().err
    assert "inside the release directory" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()  # refused before anything was counted or charged
    log = tmp_path / "curator" / "log.json"
    _cli(tmp_path, tmp_path / "d.csv", tmp_path / "r", 1, "--curator-log", str(log), *args)
    doc = json.loads(log.read_text())
    assert doc["WARNING"].startswith("NOT PRIVATE, DO NOT PUBLISH")
    assert doc["diagnostics"]["rows"] == 47 and doc["diagnostics"]["dropped"] == {"a": 3}
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert doc["release_id"] == manifest["metadata"]["release_id"]
    err = capsys.readouterr().err
    assert "NOT PRIVATE, DO NOT PUBLISH" in err and "rows=47" in err
