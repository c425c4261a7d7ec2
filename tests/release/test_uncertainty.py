"""Honest uncertainty: exact sd where the noise is linear and the estimate
unbiased, a parametric bootstrap from the release otherwise, never a bare number.

Schemas here are spatial grids, nominal hierarchies or ordinals with ``range: [0, n]`` and
``width: 1`` (value == bin index), so they do not depend on the query-unit change of ``tables``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

import dpcube
from dpcube import Histogram, Identity, Schema
from dpcube.errors import ReleaseError
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.mechanism import CensusHierarchy
from dpcube.mechanisms.census.table import GroupSizeTable
from dpcube.mechanisms.spatial._common import spatial_case_schema
from dpcube.mechanisms.spatial.htf import HTF
from dpcube.mechanisms.spatial.privtree import PrivTree
from dpcube.privacy import NO_NOISE
from dpcube.release.uncertainty import (
    answer_uncertainty,
    bootstrap_errors,
    format_answer,
    integer_truth,
)


def _ordinal_schema(n: int) -> Schema:
    return Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, n - 1], "width": 1}]}
    )


def _grid(side: int, seed: int) -> np.ndarray:
    """Two Gaussian clusters of points on a side x side grid (synthetic data, not noise)."""
    rng = np.random.default_rng(seed)
    pts = np.concatenate(
        [
            rng.normal([side * 0.3, side * 0.3], side * 0.08, size=(3000, 2)),
            rng.normal([side * 0.7, side * 0.6], side * 0.15, size=(5000, 2)),
        ]
    )
    pts = np.clip(np.floor(pts), 0, side - 1).astype(np.int64)
    F = np.zeros((side, side), dtype=np.int64)
    np.add.at(F, (pts[:, 0], pts[:, 1]), 1)
    return F


def test_exact_path_equals_variance_many() -> None:
    s = _ordinal_schema(8)
    r = Identity(0.5).release(Histogram(s, np.arange(8) * 10), random_state=3)
    qs = [{"x": [0, 0]}, {"x": [1, 5]}, {}]
    u = answer_uncertainty(r, qs)
    assert u.kind == "exact"
    var = r.variance_many(qs)
    np.testing.assert_array_equal(u.stddev, np.sqrt(var))
    np.testing.assert_array_equal(u.noise_sd, np.sqrt(var))
    z = NormalDist().inv_cdf(0.975)
    np.testing.assert_allclose(u.upper - u.answers, z * np.sqrt(var))
    np.testing.assert_allclose(u.answers - u.lower, z * np.sqrt(var))
    assert "exact noise sd" in format_answer(u.answers[1], u, 1)


def test_bootstrap_on_a_linear_mechanism_agrees_with_the_exact_sd() -> None:
    # Identity's noise does not depend on the counts, so the bootstrap's error sd estimates the
    # exact sd from R iid draws. The sample sd of R iid draws has relative standard error
    # sqrt((kurtosis - 1) / (4 R)); a sum of c discrete Laplace cells has kurtosis <= 6 (one cell),
    # so with R = 400 the relative SE is at most sqrt(5 / 1600) = 0.056. The stated sd is the
    # root mean square (bias included; the bias is 0 here, its estimate adds ~1/R relative).
    # Tolerance: 4 standard errors (false failure about 6e-5 per query, normal approximation).
    runs = 400
    s = _ordinal_schema(16)
    counts = np.full(16, 1000)  # far from 0: no clamping in the bootstrap world
    r = Identity(1.0).release(Histogram(s, counts), random_state=11)
    qs = [{"x": [3, 3]}, {"x": [0, 3]}, {"x": [2, 13]}, {}]
    exact = answer_uncertainty(r, qs)
    boot = answer_uncertainty(r, qs, intervals="model", runs=runs, seed=5, method="bootstrap")
    assert boot.kind == "bootstrap" and boot.runs == runs
    rel = np.abs(boot.stddev / exact.stddev - 1.0)
    assert np.all(rel < 4 * math.sqrt(5 / (4 * runs))), rel


def test_bootstrap_covers_the_truth_at_close_to_nominal_on_privtree() -> None:
    # PrivTree chooses its partition from the data and answers under the uniformity assumption:
    # not linear, not unbiased. Over 4 releases x 60 rectangles = 240 answers of a 95 %
    # interval, the target band is 90-99 %; the binomial standard error of a coverage
    # of 0.95 over 240 answers is sqrt(0.95 * 0.05 / 240) = 0.014 (answers of one release are
    # correlated, so we allow 3 SE: 0.04) -> accept [0.86, 1.0), and require it not be trivially
    # wide (< 1: some answer falls outside).
    from dpcube.release.cells import box_sums, prefix_sums
    from experiments.spatial import query_boxes

    F = _grid(32, seed=1)
    hist = Histogram(spatial_case_schema(32, 32), F)
    boxes = query_boxes(F.shape, "random", 60, seed=2)
    qs = [{"p": {"bins": b.tolist()}} for b in boxes]
    truth = box_sums(prefix_sums(F), boxes)
    inside = []
    for seed in range(4):
        r = PrivTree(1.0).release(hist, random_state=100 + seed, account=False)
        u = answer_uncertainty(r, qs, intervals="model", runs=100, seed=seed)
        assert u.kind == "bootstrap"
        inside.append((truth >= u.lower) & (truth <= u.upper))
    coverage = float(np.mean(inside))
    assert 0.90 - 0.04 <= coverage < 1.0, coverage


def test_census_bootstrap_covers_the_truth() -> None:
    # M_CDP releases integer, consistent, non-negative counts: bootstrap. 4 releases x 45 cells
    # (9 regions x 5 sizes) = 180 answers; binomial SE at 0.95 is 0.016, 3 SE = 0.05.
    rng = np.random.default_rng(4)
    parents = {"A": "US", "B": "US"} | {f"A{i}": "A" for i in range(3)}
    parents |= {f"B{i}": "B" for i in range(3)}
    h = RegionHierarchy.from_parents(parents)
    leaf = rng.multinomial(4000, [0.3, 0.3, 0.2, 0.12, 0.08], size=h.level_sizes[-1])
    table = GroupSizeTable(h, h.aggregate(leaf.astype(np.int64)), public_groups=True)
    qs = [{"region": n, "size": k} for n in h.names for k in range(1, 6)]
    truth = table.counts.ravel()
    inside = []
    for seed in range(4):
        r = CensusHierarchy(0.5, method="cdp").release(table, random_state=seed, account=False)
        u = answer_uncertainty(r, qs, intervals="model", runs=100, seed=seed)
        assert u.kind == "bootstrap" and np.all(u.lower >= 0)
        inside.append((truth >= u.lower) & (truth <= u.upper))
    coverage = float(np.mean(inside))
    assert 0.90 - 0.05 <= coverage < 1.0, coverage


def test_the_bootstrap_spends_no_budget(tmp_path: Path) -> None:
    F = _grid(16, seed=3)
    hist = Histogram(spatial_case_schema(16, 16), F, dataset="name:uncertainty-test")
    ledger = dpcube.ledger_for(hist)
    ledger.set_total(1.0)
    r = HTF(0.5).release(hist)  # OS entropy: charged once, for publication
    assert r.metadata.for_publication and len(ledger.charges()) == 1
    home = Path(os.environ["DPCUBE_HOME"])
    before = {p: p.stat().st_mtime_ns for p in home.rglob("*")}
    u = answer_uncertainty(r, [{"p": {"bins": [[0, 7], [0, 7]]}}], intervals="model", runs=30)
    after = {p: p.stat().st_mtime_ns for p in home.rglob("*")}
    assert after == before  # no ledger opened, created or written (not even its directory)
    assert u.kind == "bootstrap" and np.isfinite(u.stddev).all()
    assert len(ledger.charges()) == 1 and ledger.spent().epsilon == pytest.approx(0.5)


def test_noise_sd_is_never_labelled_as_the_error(tmp_path: Path) -> None:
    F = _grid(32, seed=5)
    r = HTF(1.0).release(Histogram(spatial_case_schema(32, 32), F), random_state=1)
    r.save(tmp_path / "rel")
    loaded = dpcube.load_release(tmp_path / "rel")  # the bootstrap works from the manifest alone
    qs = [{"p": {"bins": [[0, 15], [3, 20]]}}, {"p": {"bins": [[10, 31], [0, 31]]}}]
    u = answer_uncertainty(loaded, qs, intervals="model", runs=40, seed=2)
    assert u.kind == "bootstrap"
    assert np.isfinite(u.noise_sd).all()  # HTF's leaf noises are independent: known
    for i in range(2):
        line = format_answer(u.answers[i], u, i)
        assert f"bootstrap error sd {u.stddev[i]:.6g}" in line
        assert f"noise sd {u.noise_sd[i]:.6g}, noise only, not the error" in line
        assert f"error sd {u.noise_sd[i]:.6g}" not in line
    # the same seed gives the same intervals; the cache is per release object
    again = answer_uncertainty(loaded, qs, intervals="model", runs=40, seed=2)
    np.testing.assert_array_equal(again.lower, u.lower)


def test_no_error_estimate_says_why() -> None:
    s = _ordinal_schema(4)
    r = Identity(1.0).release(Histogram(s, [1, 2, 3, 4]), random_state=NO_NOISE)
    u = answer_uncertainty(r, [{"x": [0, 1]}])
    assert u.kind == "none" and np.isnan(u.stddev).all() and np.isnan(u.lower).all()
    assert format_answer(u.answers[0], u, 0).startswith("3 (no error estimate: noise switched off")


def test_bad_arguments_are_refused() -> None:
    s = _ordinal_schema(4)
    r = Identity(1.0).release(Histogram(s, [1, 2, 3, 4]), random_state=1)
    with pytest.raises(ReleaseError, match="level"):
        answer_uncertainty(r, [{}], level=1.5)
    with pytest.raises(ReleaseError, match="runs must be at least"):
        answer_uncertainty(r, [{}], method="bootstrap", intervals="model", runs=3)
    with pytest.raises(ReleaseError, match="method"):
        answer_uncertainty(r, [{}], method="magic")


def test_integer_truth_keeps_thin_densities_and_totals() -> None:
    values = np.full(1000, 0.05)
    out = integer_truth(values)
    assert out.min() >= 0 and out.sum() == 50 and out.max() == 1
    assert integer_truth(np.array([-3.0, -1.0])).tolist() == [0, 0]


def test_bootstrap_errors_shape_and_seed() -> None:
    r = PrivTree(1.0).release(
        Histogram(spatial_case_schema(16, 16), _grid(16, 7)), random_state=0, account=False
    )
    e1 = bootstrap_errors(r, [{}, {"p": {"bins": [[0, 3], [0, 3]]}}], runs=25, seed=9)
    assert e1.shape == (25, 2)
    assert not np.all(e1 == 0)


@pytest.mark.parametrize("quick", [True])
def test_coverage_experiment_quick(tmp_path: Path, quick: bool) -> None:
    from experiments.coverage import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "coverage.md").read_text()
    assert "| synthetic Gaussian | htf | 1 |" in text and "census cdp" in text
    # spatial rows report the release's dispersion estimate and the one measured on the truth
    runs = (tmp_path / "coverage_runs.csv").read_text().splitlines()
    assert "dispersion_release" in runs[0] and "dispersion_truth" in runs[0]
    assert (tmp_path / "coverage_runs.csv").stat().st_size > 0


def test_data_cubes_exact_without_clamping_and_bootstrap_with_it() -> None:
    from dpcube.mechanisms.datacube import DataCube

    s = Schema.from_dict(
        {"attributes": [{"name": n, "kind": "nominal", "categories": ["0", "1"]} for n in "ab"]}
    )
    hist = Histogram(s, [[10, 20], [30, 40]])
    qs = [{"a": "1"}, {"b": "0"}]
    linear = DataCube(1.0, consistency="l2").release(hist, random_state=1, account=False)
    u = answer_uncertainty(linear, qs)
    assert u.kind == "exact"
    np.testing.assert_array_equal(u.stddev, np.sqrt(linear.variance_many(qs)))
    clamped = DataCube(1.0, nonnegative=True).release(hist, random_state=1, account=False)
    b = answer_uncertainty(
        clamped, qs, intervals="model", runs=20, seed=1
    )  # non-linear: a bootstrap
    assert b.kind == "bootstrap" and "bootstrap interval" in format_answer(b.answers[0], b, 0)


@pytest.mark.parametrize(
    ("module", "extra", "says"),
    [
        ("coverage_empty", ["--runs", "5"], "--runs 5: a bootstrap needs at least 20 runs"),
        ("coverage_shift", ["--releases", "0"], "--releases 0: give at least 1"),
        ("coverage_shift", ["--mechanism", "htff"], "--mechanism htff:"),
        ("coverage_empty", [], "holds no geolife/geolife_sample.txt.gz"),
    ],
)
def test_coverage_diagnostics_refuse_bad_arguments_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], module: str, extra: list[str], says: str
) -> None:
    """Both diagnostics share one command line (``coverage.diagnostic_case``): a bad value is one
    line on stderr and exit 2, before any data is read or release made."""
    import importlib

    main = importlib.import_module(f"experiments.{module}").main
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-dir", str(tmp_path), *extra])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and "Traceback" not in "\n".join(err)
