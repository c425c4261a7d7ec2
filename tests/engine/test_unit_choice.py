"""``--max-rows-per-unit auto``: K chosen privately from a noisy log2 histogram of rows per unit
(dpcube.privacy.unit_choice), counted in the engine, charged once with the release."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpcube
from dpcube.cli.main import main
from dpcube.engine import get_engine
from dpcube.histogram import UnitBoundCandidates
from dpcube.privacy.ledger import BudgetLedger
from dpcube.privacy.random import NO_NOISE, SeededRandomSource
from dpcube.privacy.unit_choice import (
    UnitSizeBins,
    bin_middles,
    choose_max_rows_per_unit,
    estimated_dropped,
    noisy_unit_counts,
    threshold,
)
from dpcube.registry import MECHANISMS, resolve

SCHEMA = dpcube.Schema.from_dict(
    {
        "attributes": [
            {"name": "delay", "kind": "ordinal", "range": [0, 7], "width": 1},
            {"name": "carrier", "kind": "nominal", "categories": ["AA", "B6", "UA"]},
        ]
    }
)


def flights(sizes: list[int], seed: int = 0) -> pd.DataFrame:
    """One plane per entry of ``sizes`` with that many flights."""
    rng = np.random.default_rng(seed)
    tail = np.repeat([f"N{i:04d}" for i in range(len(sizes))], sizes)
    n = len(tail)
    return pd.DataFrame(
        {
            "tailnum": tail,
            "delay": rng.integers(0, 8, n),
            "carrier": rng.choice(["AA", "B6", "UA"], n).astype(object),
        }
    )


def exact_bins(sizes: list[int], bits: int = 10) -> tuple[list[int], list[int]]:
    counts, rows = [0] * (bits + 1), [0] * (bits + 1)
    for n in sizes:
        b = min(n.bit_length() - 1, bits)
        counts[b] += 1
        rows[b] += min(n, 2 ** (bits + 1))
    return counts, rows


SIZES = [1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 3000, 7, 7, 7, 40, 40]


def test_the_engine_bins_units_by_log2_of_their_rows() -> None:
    counts, rows = get_engine("duckdb", None).unit_sizes(flights(SIZES), "tailnum", 10)
    assert (counts.tolist(), rows.tolist()) == exact_bins(SIZES)
    assert rows[-1] == 2048  # the unit of 3000 rows counted up to 2**11


def test_a_null_unit_id_is_refused() -> None:
    frame = flights([3, 4])
    frame.loc[2, "tailnum"] = None
    with pytest.raises(dpcube.errors.DataError, match="NULL ids"):
        get_engine("duckdb", None).unit_sizes(frame, "tailnum", 10)


def test_one_unit_moves_the_binned_counts_by_at_most_one() -> None:
    """The selection's noise is calibrated to L1 sensitivity 1 (add/remove) and 2 (replace):
    remove each unit in turn, and replace it by a unit of each size, on the engine's bins."""
    sizes = [1, 2, 2, 5, 9, 17, 40, 300, 1500]
    engine = get_engine("duckdb", None)
    full, _ = engine.unit_sizes(flights(sizes), "tailnum", 10)
    for i in range(len(sizes)):
        rest = sizes[:i] + sizes[i + 1 :]
        without, _ = engine.unit_sizes(flights(rest), "tailnum", 10)
        assert int(np.abs(full - without).sum()) == 1
        for other in (1, 3, 700, 5000):
            swapped, _ = engine.unit_sizes(flights([*rest, other]), "tailnum", 10)
            assert int(np.abs(full - swapped).sum()) <= 2


def test_the_estimated_rows_dropped_are_exact_for_units_at_the_bins_middles() -> None:
    """dropped(2**j) = sum over units of max(n - 2**j, 0), exactly when each unit holds its
    bin's middle 1.5 * 2**b rows (b >= 1)."""
    sizes = [3, 3, 6, 12, 12, 12, 24, 48, 96, 192]
    counts, _ = exact_bins(sizes)
    got = estimated_dropped(np.array(counts, dtype=float))
    want = [sum(max(n - 2**j, 0) for n in sizes) for j in range(11)]
    # bin 0 holds units of one row, whose middle 1.5 is off by half a row each: none here
    np.testing.assert_allclose(got, want)
    assert bin_middles(2).tolist() == [1.5, 3.0, 6.0]


def test_without_noise_the_choice_balances_rows_dropped_against_noise() -> None:
    """On exact bins: 100 units of 12 rows and 10 of 96. At noise_per_row 5 raising K from 8
    to 16 saves 110 * 4 = 440 rows for 40 of noise; from 64 to 128 saves 10 * 32 for 320 more
    noise; the least error is at K = 64 or 128 (equal), and ties go to the smaller K."""
    counts = np.zeros(11, dtype=np.int64)
    counts[3], counts[6] = 100, 10
    bins = UnitSizeBins(counts, counts * 0)
    kwargs: dict[str, Any] = dict(epsilon=1.0, share=0.1, neighbour="add_remove")
    choice = choose_max_rows_per_unit(bins, noise_per_row=5.0, source=NO_NOISE, **kwargs)
    assert choice.max_rows_per_unit == 64
    assert choice.rows_dropped_share == pytest.approx(10 * 32 / (100 * 12 + 10 * 96))
    # much noise per row (a table of many cells): K = 1 costs least
    assert (
        choose_max_rows_per_unit(
            bins, noise_per_row=1000.0, source=NO_NOISE, **kwargs
        ).max_rows_per_unit
        == 1
    )


def test_the_noise_has_the_discrete_laplace_scale_one_over_epsilon() -> None:
    """Variance of discrete Laplace of scale b: 2 e^(-1/b) / (1 - e^(-1/b))^2, about 2 b^2.
    With 20,000 draws at epsilon 0.5 (b = 2; 4 under replace) the sample variance is within 5%
    (its relative standard error is about sqrt((kurtosis - 1) / n) = sqrt(5 / 20000) = 1.6%)."""
    bins = UnitSizeBins(np.zeros(20_000, dtype=np.int64), np.zeros(20_000, dtype=np.int64))
    for neighbour, b in (("add_remove", 2.0), ("replace", 4.0)):
        noise = noisy_unit_counts(
            bins, epsilon=0.5, neighbour=neighbour, source=SeededRandomSource(1)
        )
        p = math.exp(-1 / b)
        assert noise.var() == pytest.approx(2 * p / (1 - p) ** 2, rel=0.05)
    assert threshold(0.5, "add_remove", 10) == pytest.approx(2 * math.log(11 / 0.05))


def test_a_release_charges_the_whole_epsilon_once_and_records_the_choice(tmp_path: Path) -> None:
    sizes = [int(s) for s in np.random.default_rng(2).integers(20, 120, 400)]
    h = dpcube.histogram(
        flights(sizes), SCHEMA, privacy_unit="tailnum", max_rows_per_unit="auto", dataset="f"
    )
    assert isinstance(h, UnitBoundCandidates) and sorted(h.at_bound) == [2**j for j in range(11)]
    ks = sorted(h.at_bound)
    totals = [h.at_bound[k].total for k in ks]
    assert totals == [int(np.minimum(sizes, k).sum()) for k in ks]  # each bound counted
    ledger = BudgetLedger(tmp_path / "ledger.json")
    ledger.set_total(2.0)
    release = dpcube.Identity(1.0).release(h, ledger=ledger)
    assert ledger.spent().epsilon == pytest.approx(1.0) and len(ledger.charges()) == 1
    unit = release.metadata.privacy_unit
    assert isinstance(unit, dict)
    chosen = unit["chosen_privately"]
    assert chosen["epsilon"] == pytest.approx(0.1) and chosen["share_of_epsilon"] == 0.1
    assert unit["max_rows_per_unit"] == chosen["chosen_max_rows_per_unit"] in ks
    assert release.metadata.epsilon == 1.0 and release.metadata.params["epsilon"] == 0.9
    assert 0.0 <= chosen["rows_dropped_share_noisy"] <= 1.0
    # sizes 20..119, 24 cells: noise_per_row = 24 sqrt 2 / 0.9 = 38 units; K = 64 leaves about
    # 220 units above it (more than 38: raise K), K = 128 none: the choice is 64 or 128
    assert chosen["chosen_max_rows_per_unit"] in (64, 128)


def test_the_choice_is_refused_before_any_charge(tmp_path: Path) -> None:
    frame = flights([3, 4, 5])
    with pytest.raises(dpcube.errors.DataError, match="--privacy-unit"):
        dpcube.histogram(frame, SCHEMA, max_rows_per_unit="auto")
    with pytest.raises(dpcube.errors.DataError, match="chooses K alone"):
        dpcube.histogram(
            frame, SCHEMA, privacy_unit="tailnum", max_rows_per_unit="auto", max_cells_per_unit=2
        )
    with pytest.raises(dpcube.errors.ParameterError, match="share"):
        dpcube.histogram(
            frame,
            SCHEMA,
            privacy_unit="tailnum",
            max_rows_per_unit="auto",
            unit_selection_share=1.0,
        )
    h = dpcube.histogram(frame, SCHEMA, privacy_unit="tailnum", max_rows_per_unit="auto")
    ledger = BudgetLedger(tmp_path / "ledger.json")
    ledger.set_total(1.0)
    # an epsilon whose noise scale at K = 1, 1 / (0.9 epsilon), is below 2**-8: every candidate
    # is checked before the charge, so this one is refused and nothing is spent
    with pytest.raises(dpcube.errors.BudgetError, match="too large"):
        dpcube.Identity(300.0 / 0.9 * 2**8).release(h, ledger=ledger)
    assert ledger.spent().epsilon == 0.0


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dpcube_release_auto_prints_and_records_k_and_its_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sizes = [int(s) for s in np.random.default_rng(3).integers(5, 200, 300)]
    data = tmp_path / "flights.csv"
    flights(sizes).to_csv(data, index=False)
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA.to_dict()))
    code, out, err = run(
        capsys,
        "release",
        str(data),
        "--schema",
        str(schema),
        "--mechanism",
        "identity",
        "--epsilon",
        "1",
        "--out",
        str(tmp_path / "rel"),
        "--privacy-unit",
        "tailnum",
        "--max-rows-per-unit",
        "auto",
        "--unit-selection-share",
        "0.2",
        "--total-epsilon",
        "3",
        "--no-report",
    )
    assert code == 0, err
    assert "chosen privately with epsilon=0.2 (20% of 1.0)" in out
    assert "budget left for this data set: epsilon=2" in out
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    unit = manifest["metadata"]["privacy_unit"]
    assert unit["chosen_privately"]["share_of_epsilon"] == 0.2
    assert unit["max_rows_per_unit"] == unit["chosen_privately"]["chosen_max_rows_per_unit"]
    text = "".join(p.read_text(errors="ignore") for p in (tmp_path / "rel").iterdir())
    assert "rows_dropped_by_bound" not in text and "units_per_log2_bin" not in text
    # refusals, each before the ledger is read
    for extra, why in (
        (["--mechanism", "census-hierarchy"], "protect one person"),
        (["--mechanism", "identity", "--max-cells-per-unit", "2"], "chooses K alone"),
    ):
        code, _, err = run(
            capsys,
            "release",
            str(data),
            "--schema",
            str(schema),
            "--epsilon",
            "1",
            "--out",
            str(tmp_path / "r2"),
            "--privacy-unit",
            "tailnum",
            "--max-rows-per-unit",
            "auto",
            *extra,
        )
        assert code != 0 and why in err
    code, _, err = run(
        capsys,
        "release",
        str(data),
        "--schema",
        str(schema),
        "--mechanism",
        "identity",
        "--epsilon",
        "1",
        "--out",
        str(tmp_path / "r3"),
        "--privacy-unit",
        "tailnum",
        "--max-rows-per-unit",
        "4",
        "--unit-selection-share",
        "0.2",
    )
    assert code != 0 and "goes with --max-rows-per-unit auto" in err


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("the Spark engine needs a Java runtime")
    from dpcube.engine.spark_engine import local_session

    session = local_session(cores=1)
    yield session
    session.stop()


def test_spark_bins_the_units_and_counts_the_candidates_as_duckdb(spark: Any) -> None:
    from dpcube.engine.spark_engine import SparkEngine

    frame = flights(SIZES)
    sdf = SparkEngine(spark).frame(frame)
    args: dict[str, Any] = dict(
        privacy_unit="tailnum", max_rows_per_unit="auto", bounding_seed="s", dataset="t"
    )
    duck = dpcube.histogram(frame, SCHEMA, **args)
    spk = dpcube.histogram(sdf, SCHEMA, **args)
    assert isinstance(duck, UnitBoundCandidates) and isinstance(spk, UnitBoundCandidates)
    np.testing.assert_array_equal(duck.unit_sizes.counts, spk.unit_sizes.counts)
    np.testing.assert_array_equal(duck.unit_sizes.rows, spk.unit_sizes.rows)
    assert duck.unit_sizes.counts.tolist() == exact_bins(SIZES)[0]
    for k in duck.at_bound:
        np.testing.assert_array_equal(duck.at_bound[k].counts, spk.at_bound[k].counts)


@pytest.mark.parametrize(
    "mechanism",
    [
        lambda: dpcube.Privelet(1.0),
        lambda: dpcube.AutoMechanism(1.0, workload="marginals:1"),
        lambda: resolve(MECHANISMS, "dawa", "mechanism")(1.0),
        lambda: resolve(MECHANISMS, "ahp", "mechanism")(1.0),
        lambda: resolve(MECHANISMS, "mwem", "mechanism")(1.0),
    ],
    ids=["privelet", "auto", "dawa", "ahp", "mwem"],
)
def test_other_histogram_mechanisms_choose_k_too(mechanism: Any, tmp_path: Path) -> None:
    sizes = [int(s) for s in np.random.default_rng(4).integers(20, 120, 300)]
    h = dpcube.histogram(
        flights(sizes), SCHEMA, privacy_unit="tailnum", max_rows_per_unit="auto", dataset="f"
    )
    ledger = BudgetLedger(tmp_path / "ledger.json")
    ledger.set_total(1.0)
    release = mechanism().release(h, ledger=ledger)
    assert ledger.spent().epsilon == pytest.approx(1.0) and len(ledger.charges()) == 1
    unit = release.metadata.privacy_unit
    assert isinstance(unit, dict) and unit["chosen_privately"]["epsilon"] == pytest.approx(0.1)


def test_too_few_units_give_k_1_and_no_share_rather_than_a_false_zero() -> None:
    """120 units of 50 rows at a selection epsilon of 0.01: the threshold is
    ln(11 / 0.05) / 0.01 = 539 units, which no bin reaches (120 units plus noise of scale 100
    passes it with probability about exp(-4.2) = 1.5%; seeded here)."""
    counts = np.zeros(11, dtype=np.int64)
    counts[5] = 120
    choice = choose_max_rows_per_unit(
        UnitSizeBins(counts, counts * 50),
        epsilon=0.01,
        share=0.1,
        neighbour="add_remove",
        noise_per_row=1.0,
        source=SeededRandomSource(0),
    )
    assert choice.max_rows_per_unit == 1 and choice.rows_dropped_share is None


# -- the data cube (cuboids counted in the engine at each candidate K) -------------------------


def cube_candidates(frame: Any, **extra: Any) -> Any:
    from dpcube.mechanisms.datacube import cube_bound_candidates

    return cube_bound_candidates(frame, SCHEMA, "tailnum", name="f", bounding_seed="k", **extra)


def test_the_cube_scores_k_with_its_own_per_cuboid_noise() -> None:
    """method='all' over the 4 cuboids of SCHEMA (8 x 3, 8, 3, 1 cells) measures each with
    discrete Laplace noise of scale 4 / epsilon at one row per unit (uniform budgets: L1
    sensitivity 4), per-cell variance 2 (4 / epsilon)**2: a cuboid of c cells has summed noise
    c sqrt(2) 4 / epsilon, whose mean over the cuboids is (24 + 8 + 3 + 1) / 4 * 4 sqrt(2) /
    epsilon = 36 sqrt(2) / epsilon (the identity mechanism's is 24 sqrt(2) / epsilon)."""
    counted = cube_candidates(flights([3, 4, 5])).at_bound[1]
    cube = dpcube.DataCube(0.9, method="all")
    assert cube.noise_per_row(counted) == pytest.approx(36 * math.sqrt(2) / 0.9)
    assert dpcube.Identity(0.9).noise_per_row(counted) == pytest.approx(24 * math.sqrt(2) / 0.9)
    # base only: C11 measured (scale 1 / epsilon), the others summed from it: a cuboid of c
    # cells sums 24 / c cells of C11, summed noise c sqrt(24 / c) sqrt(2) / epsilon
    base = dpcube.DataCube(0.9, method="base")
    want = sum(math.sqrt(24 * c) for c in (24, 8, 3, 1)) / 4 * math.sqrt(2) / 0.9
    assert base.noise_per_row(counted) == pytest.approx(want)


def test_a_cube_release_chooses_k_charges_once_and_counts_the_cube_at_k(tmp_path: Path) -> None:
    from dpcube.mechanisms.datacube import CubeBoundCandidates

    sizes = [int(s) for s in np.random.default_rng(2).integers(20, 120, 400)]
    frame = flights(sizes)
    cands = cube_candidates(frame)
    assert isinstance(cands, CubeBoundCandidates) and sorted(cands.at_bound) == list(candidates_k())
    assert cands.unit_sizes.counts.tolist() == exact_bins(sizes)[0]
    ledger = BudgetLedger(tmp_path / "ledger.json")
    ledger.set_total(2.0)
    cube = dpcube.DataCube(1.0, method="all")
    release = cube.release(cands, random_state=NO_NOISE, ledger=ledger)
    assert ledger.spent().epsilon == pytest.approx(1.0) and len(ledger.charges()) == 1
    unit = release.metadata.privacy_unit
    assert isinstance(unit, dict)
    chosen = unit["chosen_privately"]
    assert chosen["epsilon"] == pytest.approx(0.1) and chosen["share_of_epsilon"] == 0.1
    assert release.metadata.epsilon == 1.0 and release.metadata.params["epsilon"] == 0.9
    k = unit["max_rows_per_unit"]
    # without noise the choice is the rule's on the exact bins, scored with the cube's noise
    expected = choose_max_rows_per_unit(
        cands.unit_sizes,
        epsilon=0.1,
        share=0.1,
        neighbour="add_remove",
        noise_per_row=36 * math.sqrt(2) / 0.9,
        source=NO_NOISE,
    )
    assert k == chosen["chosen_max_rows_per_unit"] == expected.max_rows_per_unit
    # sizes 20..119: K = 64 leaves about 220 units above it, K = 128 none
    assert k in (64, 128)
    # the cube released is the one counted at K: its total is the rows kept, min(n_u, K) each
    assert float(release.cuboid([]).sum()) == float(np.minimum(sizes, k).sum())
    assert release.curator_log["contribution_bound"] == k


def candidates_k() -> list[int]:
    return [2**j for j in range(11)]


def test_every_cube_candidate_is_checked_before_the_one_charge(tmp_path: Path) -> None:
    cands = cube_candidates(flights([3, 4, 5]))
    ledger = BudgetLedger(tmp_path / "ledger.json")
    ledger.set_total(1.0)
    # the noise scale at K = 1 (L1 sensitivity 4 for method='all'), 4 / (0.9 epsilon), is below
    # 2**-8 for this epsilon: refused before the charge, nothing spent
    with pytest.raises(dpcube.errors.BudgetError, match="too large"):
        dpcube.DataCube(5.0 / 0.9 * 2**8, method="all").release(cands, ledger=ledger)
    assert ledger.spent().epsilon == 0.0
    with pytest.raises(dpcube.errors.DataError, match="--privacy-unit"):
        from dpcube.mechanisms.datacube import cube_bound_candidates

        cube_bound_candidates(flights([3]), SCHEMA, "")
    with pytest.raises(dpcube.errors.ParameterError, match="share"):
        cube_candidates(flights([3]), selection_share=0.0)


def test_dpcube_release_datacube_auto_records_k_and_no_exact_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sizes = [int(s) for s in np.random.default_rng(3).integers(5, 200, 300)]
    data = tmp_path / "flights.csv"
    flights(sizes).to_csv(data, index=False)
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA.to_dict()))
    code, out, err = run(
        capsys,
        "release",
        str(data),
        "--schema",
        str(schema),
        "--mechanism",
        "datacube",
        "--epsilon",
        "1",
        "--out",
        str(tmp_path / "rel"),
        "--privacy-unit",
        "tailnum",
        "--max-rows-per-unit",
        "auto",
        "--total-epsilon",
        "3",
        "--no-report",
    )
    assert code == 0, err
    assert "chosen privately with epsilon=0.1 (10% of 1.0)" in out
    assert "budget left for this data set: epsilon=2" in out
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    unit = manifest["metadata"]["privacy_unit"]
    assert unit["column"] == "tailnum" and unit["chosen_privately"]["share_of_epsilon"] == 0.1
    assert unit["max_rows_per_unit"] == unit["chosen_privately"]["chosen_max_rows_per_unit"]
    assert 0.0 <= unit["chosen_privately"]["rows_dropped_share_noisy"] <= 1.0
    text = "".join(p.read_text(errors="ignore") for p in (tmp_path / "rel").iterdir())
    for exact in ("rows_dropped_by_bound", "units_per_log2_bin", "rows_before_bounding"):
        assert exact not in text


def test_spark_counts_the_cube_candidates_and_releases_as_duckdb(
    spark: Any, tmp_path: Path
) -> None:
    from dpcube.engine.spark_engine import SparkEngine

    sizes = [int(s) for s in np.random.default_rng(5).integers(1, 40, 60)]
    frame = flights(sizes)
    sdf = SparkEngine(spark).frame(frame)
    duck, spk = cube_candidates(frame), cube_candidates(sdf)
    np.testing.assert_array_equal(duck.unit_sizes.counts, spk.unit_sizes.counts)
    assert spk.unit_sizes.counts.tolist() == exact_bins(sizes)[0]
    releases = []
    for cands in (duck, spk):
        ledger = BudgetLedger(tmp_path / f"ledger-{len(releases)}.json")
        ledger.set_total(1.0)
        releases.append(dpcube.DataCube(1.0).release(cands, random_state=NO_NOISE, ledger=ledger))
        assert ledger.spent().epsilon == pytest.approx(1.0) and len(ledger.charges()) == 1
    a, b = releases
    assert a.metadata.privacy_unit == b.metadata.privacy_unit
    k = a.metadata.privacy_unit["max_rows_per_unit"]
    # the same keyed choice of kept rows on both engines: the same cube at K
    for attrs in ([], ["delay"], ["carrier"], ["delay", "carrier"]):
        np.testing.assert_array_equal(a.cuboid(attrs), b.cuboid(attrs))
    assert float(b.cuboid([]).sum()) == float(np.minimum(sizes, k).sum())
