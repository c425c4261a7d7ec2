"""The DataCube mechanism end to end: noise calibration, sensitivity, Monte-Carlo variances, counting
from sources, queries, persistence and the command line (Ding et al., SIGMOD 2011: the
sensitivity of a set of cuboids, Sec. 3; noise calibration and variances, Sec. 3 eqs. (1)-(2) and
Thm. 10; data independence of the errors, Sec. 6)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcube import Histogram, Schema
from dpcube.errors import DataError, ParameterError, QueryError
from dpcube.histogram import histogram
from dpcube.mechanisms.datacube import CubeSource, CuboidRelease, DataCube
from dpcube.mechanisms.datacube.geometry import CubeGeometry
from dpcube.mechanisms.datacube.lattice import Lattice, bits, is_subset, rollup, shape
from dpcube.privacy import NO_NOISE
from dpcube.privacy.samplers import discrete_laplace_variance
from dpcube.release.base import load_release

ADULT_DIMS = [
    "workclass",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "income>50K",
]


def nominal_schema(cards: dict[str, int]) -> Schema:
    return Schema.from_dict(
        {
            "attributes": [
                {"name": n, "kind": "nominal", "categories": [str(i) for i in range(k)]}
                for n, k in cards.items()
            ]
        }
    )


EX21 = nominal_schema({"sex": 2, "age": 7, "salary": 5})


def zeros(schema: Schema) -> Histogram:
    return Histogram(schema, np.zeros(schema.shape, dtype=np.int64))


# -- the sensitivity of s cuboids (Sec. 3) ---------------------------------------------------------
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
@settings(max_examples=40, deadline=None)
def test_sensitivity_of_s_cuboids(cards: list[int], data: st.DataObject) -> None:
    lat = Lattice(tuple(cards))
    masks = data.draw(st.lists(st.integers(0, lat.base), min_size=1, max_size=6, unique=True))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    table = rng.integers(0, 4, size=shape(lat, lat.base))
    row = tuple(int(rng.integers(0, k)) for k in cards)
    other = tuple(int(rng.integers(0, k)) for k in cards)

    def vec(t: np.ndarray) -> np.ndarray:
        return np.concatenate([rollup(t, lat.base, m).ravel() for m in masks])

    added = table.copy()
    added[row] += 1
    assert np.abs(vec(added) - vec(table)).sum() == len(masks)
    replaced = added.copy()
    replaced[row] -= 1
    replaced[other] += 1
    assert np.abs(vec(replaced) - vec(added)).sum() <= 2 * len(masks)


def test_declared_sensitivity_and_scale_per_neighbour() -> None:
    for neighbour, unit in (("add_remove", 1), ("replace", 2)):
        mech = DataCube(1.0, method="bmax", neighbour=neighbour)
        claims = mech.sensitivity_claims(EX21)
        assert [c.declared for c in claims] == [4 * unit]
        release = mech.release(zeros(EX21), random_state=0)
        assert release.metadata.noise["scales"] == [pytest.approx(4 * unit, rel=1e-6)] * 4
    optimal = DataCube(1.0, budget="optimal").sensitivity_claims(EX21)
    assert all(c.declared == 1 for c in optimal) and len(optimal) >= 2


# -- Monte-Carlo noise calibration and variances (Sec. 3, Thm. 10) ---------------------------------
@pytest.mark.parametrize("consistency", [None, "l2"])
def test_monte_carlo_variances_match_exact(consistency: str | None) -> None:
    """Per-cell variance of every released cuboid over R releases of the zero table vs the exact
    value. The sample variance of n independent draws has relative s.e. <= sqrt((kurtosis - 1) / n),
    kurtosis <= 6 (Laplace; sums of Laplace have less), and we allow 5 s.e. Without consistency the
    cells of a cuboid are independent, so n = R * cells; after L2 consistency they are correlated, so
    n = R (conservative). Means: 5 s.e. of the mean, sqrt(Var / n)."""
    mech = DataCube(1.0, method="bmax", consistency=consistency)
    reps = 600
    samples: dict[tuple[str, ...], list[np.ndarray]] = {}
    release = None
    rng = np.random.default_rng(11)
    for _ in range(reps):
        release = mech.release(zeros(EX21), random_state=rng)
        for attrs in release.published:
            samples.setdefault(attrs, []).append(release.cuboid(attrs).ravel())
    assert release is not None
    scale = 4.0  # Lap(s / eps) with s = |L_pre| = 4 (Example 4.1)
    assert release.source_variances == pytest.approx([float(discrete_laplace_variance(scale))] * 4)
    p = np.exp(-1 / scale)
    mean_abs = 2 * p / (1 - p**2)  # E|Y| of the discrete Laplace of scale s/eps (about s/eps)
    for attrs, rows in samples.items():
        values = np.stack(rows)
        exact = release.cell_variance(attrs)
        n = values.size if consistency is None else reps
        if consistency is None:
            assert abs(values.mean()) < 5 * np.sqrt(exact / values.size)
            if exact == release.source_variances[0]:  # a measured cuboid: E|noise| ~ s/eps
                assert abs(np.abs(values).mean() - mean_abs) < 5 * np.sqrt(exact / values.size)
        empirical = values.var(axis=0).mean()
        assert empirical == pytest.approx(exact, rel=5 * np.sqrt(5 / n)), attrs
    if consistency is None:
        # Example 3.1 shape: variance of L_pre cuboids v, of the others 2 v
        v = release.source_variances[0]
        assert sorted({round(release.cell_variance(a) / v, 9) for a in release.published}) == [
            1.0,
            2.0,
        ]
    else:
        # AllC/BMaxC variances scale like the continuous values 70/3 and 140/3 of 32
        v = release.source_variances[0] / 32
        assert sorted({round(release.cell_variance(a) / v, 6) for a in release.published}) == [
            round(70 / 3, 6),
            round(140 / 3, 6),
        ]


def test_box_query_variance_by_monte_carlo_with_nonuniform_budgets() -> None:
    """Weighted L2 (non-uniform budgets): the exact variance of a range query vs 800 releases."""
    schema = nominal_schema({"a": 3, "b": 4, "c": 2})
    mech = DataCube(1.0, method="bmax", consistency="l2", budget="optimal")
    query = {"a": [0, 1], "b": [1, 3]}
    rng = np.random.default_rng(5)
    answers = [mech.release(zeros(schema), random_state=rng).answer(query) for _ in range(800)]
    exact = mech.release(zeros(schema), random_state=0).variance(query)
    # 800 independent answers; relative s.e. of the sample variance <= sqrt((kurtosis - 1) / 800)
    # with kurtosis <= 6 (a weighted sum of Laplace draws); 5 s.e.
    assert np.var(answers) == pytest.approx(exact, rel=5 * np.sqrt(5 / 800))


# -- consistency of released cuboids ---------------------------------------------------------------
@pytest.mark.parametrize("consistency", ["l2", "l1", "linf"])
def test_released_cuboids_are_exactly_consistent(consistency: str) -> None:
    rng = np.random.default_rng(2)
    hist = Histogram(EX21, rng.integers(0, 5, size=EX21.shape))
    release = DataCube(1.0, method="all", consistency=consistency).release(hist, random_state=3)
    geo = CubeGeometry(EX21)
    lat = geo.lattice
    arrays = {geo.mask(a): release.cuboid(a) for a in release.published}
    for small in arrays:
        for big in arrays:
            if is_subset(small, big):
                np.testing.assert_allclose(
                    rollup(arrays[big], big, small), arrays[small], atol=1e-6
                )
    assert all(arrays[m].shape == shape(lat, m) for m in arrays)


def test_inconsistent_release_sums_the_best_source() -> None:
    """Without consistency, a computed cuboid is the roll-up of its least-magnification source."""
    release = DataCube(1.0, method="bmax").release(zeros(EX21), random_state=4)
    geo = CubeGeometry(EX21)
    sources = [geo.mask(s) for s in release.sources]
    for attrs in release.published:
        mask = geo.mask(attrs)
        best = min(geo.lattice.mag(mask, s) for s in sources)
        ok = [s for s in sources if geo.lattice.mag(mask, s) == best]
        assert any(
            np.allclose(rollup(release.cuboid(geo.attributes(s)), s, mask), release.cuboid(attrs))
            for s in ok
        )


def test_postprocessing_rounds_and_clamps() -> None:
    release = DataCube(
        1.0, method="all", consistency="l2", nonnegative=True, integral=True
    ).release(zeros(EX21), random_state=1)
    for attrs in release.published:
        cube = release.cuboid(attrs)
        assert cube.min() >= 0 and np.array_equal(cube, np.rint(cube))
    assert np.isnan(release.variance({}))


# -- queries and the release interface -------------------------------------------------------------
def test_queries_publish_subsets_and_errors(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    hist = Histogram(EX21, rng.integers(0, 5, size=EX21.shape))
    mech = DataCube(2.0, method="pmost", consistency="l2", publish=[("sex", "age"), ("salary",)])
    release = mech.release(hist, random_state=NO_NOISE)
    assert isinstance(release, CuboidRelease)
    assert release.published == [("sex", "age"), ("salary",)]
    np.testing.assert_allclose(release.cuboid(["age", "sex"]), hist.counts.sum(axis=2).T)
    assert release.answer({"age": [1, 3], "sex": "1"}) == pytest.approx(hist.counts[1, 1:4].sum())
    assert release.answer({}) == pytest.approx(hist.total)
    with pytest.raises(QueryError, match=r"constrains age, salary.*publish including 'age,salary'"):
        release.answer({"age": "1", "salary": "0"})
    with pytest.raises(QueryError, match=r"\('age',\) was not published.*sex,age"):
        release.cuboid("age")
    assert release.max_variance > 0
    noisy = mech.release(hist, random_state=9)
    noisy.save(tmp_path / "r")
    loaded = load_release(tmp_path / "r")
    assert isinstance(loaded, CuboidRelease)
    np.testing.assert_array_equal(loaded.cuboid(["sex", "age"]), noisy.cuboid(["sex", "age"]))
    assert loaded.variance({"sex": "0"}) == noisy.variance({"sex": "0"})
    assert loaded.sources == noisy.sources and loaded.max_variance == noisy.max_variance
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["kind"] == "cuboids" and manifest["metadata"]["sensitivity"]


def test_inconsistent_release_answers_from_the_least_noisy_cuboid() -> None:
    release = DataCube(1.0, method="base", publish="all").release(zeros(EX21), random_state=2)
    # the total is best answered by C000 itself? No: from base everything has deg-magnified noise;
    # a 1-cell query on 'sex' reads cuboid (sex,) whose cell variance is 35 base cells.
    assert release.variance({"sex": "0"}) == pytest.approx(35 * release.source_variances[0])
    assert release.variance({"sex": "0", "age": "1"}) == pytest.approx(
        5 * release.source_variances[0]
    )


def test_bad_parameters_give_clear_errors() -> None:
    with pytest.raises(ParameterError, match=r"parameter method='fast' .* one of 'all', 'base'"):
        DataCube(1.0, method="fast")
    with pytest.raises(ParameterError, match="parameter consistency='l3'"):
        DataCube(1.0, consistency="l3")
    with pytest.raises(DataError, match="CubeSource"):
        DataCube(1.0).release([1, 2, 3])
    with pytest.raises(QueryError, match="unknown attribute 'zip'"):
        DataCube(1.0, publish="zip,sex").release(zeros(EX21), random_state=1)


# -- counting at scale: DuckDB GROUPING SETS -------------------------------------------------------
def test_grouping_sets_counts_equal_histogram_rollups(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["F", "M"], 500),
            "age": rng.uniform(0, 80, 500),
            "city": rng.choice(["a", "b", "c"], 500),
        }
    )
    frame.loc[3, "city"] = None
    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
                {"name": "age", "kind": "ordinal", "range": [0, 99], "width": 20},
                {"name": "city", "kind": "nominal", "categories": ["a", "b", "c"]},
            ]
        }
    )
    path = tmp_path / "rows.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(DataError, match=r"city.*1 rows are NULL"):
        DataCube(1.0).release(CubeSource(str(path), schema), random_state=NO_NOISE)
    for method in ("all", "bmax"):
        mech = DataCube(1.0, method=method)
        direct = mech.release(
            CubeSource(str(path), schema, on_out_of_domain="drop"), random_state=NO_NOISE
        )
        hist = histogram(str(path), schema, on_out_of_domain="drop")
        via_hist = mech.release(hist, random_state=NO_NOISE)
        for attrs in direct.published:
            np.testing.assert_array_equal(direct.cuboid(attrs), via_hist.cuboid(attrs))
        assert direct.curator_log["counted"] == 499 and direct.curator_log["dropped"] == {"city": 1}
        assert direct.metadata.report == {}


def test_only_low_cuboids_are_counted_for_a_huge_base(tmp_path: Path) -> None:
    """12 attributes of 40 categories: the base cuboid has 40^12 > 10^19 cells, yet publishing all
    1-dim cuboids with method "all" counts only those, straight from DuckDB."""
    rng = np.random.default_rng(0)
    cards = {f"x{i}": 40 for i in range(12)}
    schema = nominal_schema(cards)
    frame = pd.DataFrame({n: rng.integers(0, 40, 300).astype(str) for n in cards})
    release = DataCube(1.0, method="all", publish=1, consistency="l2").release(
        (frame, schema), random_state=NO_NOISE
    )
    assert len(release.published) == 12
    np.testing.assert_allclose(
        release.cuboid("x3"), np.bincount(frame["x3"].astype(int), minlength=40)
    )


def test_spatial_attribute_contributes_two_axes() -> None:
    schema = Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "loc",
                    "kind": "spatial",
                    "columns": ["lat", "lon"],
                    "bbox": [0, 0, 1, 1],
                    "resolution": [2, 3],
                },
                {"name": "k", "kind": "nominal", "categories": ["u", "v"]},
            ]
        }
    )
    counts = np.arange(12).reshape(2, 3, 2)
    release = DataCube(1.0, method="all", consistency="l2").release(
        Histogram(schema, counts), random_state=NO_NOISE
    )
    assert release.cuboid("loc").shape == (2, 3)
    np.testing.assert_allclose(release.cuboid(["k", "loc"]), np.moveaxis(counts, 2, 0), atol=1e-9)
    assert release.answer({"loc": {"bins": [[0, 0], [1, 2]]}, "k": "v"}) == pytest.approx(
        counts[0, 1:, 1].sum()
    )


# -- command line ----------------------------------------------------------------------------------
def test_cli_release_and_query(tmp_path: Path) -> None:
    from dpcube.cli.main import main

    frame = pd.DataFrame(
        {
            "a": ["x", "y", "x", "y", "x"],
            "b": ["p", "p", "q", "q", "q"],
            "c": ["1", "2", "3", "1", "2"],
        }
    )
    frame.to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "s.json").write_text(
        json.dumps(
            {"attributes": [{"name": "a", "kind": "nominal", "categories": ["x", "y"]},
                            {"name": "b", "kind": "nominal", "categories": ["p", "q"]},
                            {"name": "c", "kind": "nominal", "categories": ["1", "2", "3"]}]}
        )
    )  # fmt: skip
    code = main(
        ["release", str(tmp_path / "d.csv"), "--schema", str(tmp_path / "s.json"), "--mechanism", "datacube",
         "--epsilon", "1", "--method", "bmax", "--publish", "a,b;b,c", "--consistency", "l2", "--seed", "1",
         "--out", str(tmp_path / "out"), "--ledger-dir", str(tmp_path / "ledgers"), "--total-epsilon", "2"]
    )  # fmt: skip
    assert code == 0
    release = load_release(tmp_path / "out")
    assert isinstance(release, CuboidRelease) and release.published == [("a", "b"), ("b", "c")]
    assert main(["query", str(tmp_path / "out"), "--where", "a=x, b=p", "--json"]) == 0


# -- On the real data: DuckDB counting of Adult, and data independence of the errors ---------------
def test_adult_errors_do_not_depend_on_the_data(data_dir: Path) -> None:
    cards = json.loads((data_dir / "adult" / "adult-domain.json").read_text())
    dims = ADULT_DIMS[:5]
    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": n, "kind": "nominal", "categories": [str(i) for i in range(cards[n])]}
                for n in dims
            ]
        }
    )
    mech = DataCube(1.0, method="bmax", consistency="l2")
    real = mech.release(CubeSource(str(data_dir / "adult" / "adult.csv"), schema), random_state=21)
    zero = mech.release(zeros(schema), random_state=21)
    exact = mech.release(
        CubeSource(str(data_dir / "adult" / "adult.csv"), schema), random_state=NO_NOISE
    )
    assert exact.answer({}) == pytest.approx(48842)
    for attrs in real.published[::3]:
        np.testing.assert_allclose(
            real.cuboid(attrs) - exact.cuboid(attrs), zero.cuboid(attrs), atol=1e-6
        )
    assert bits(CubeGeometry(schema).mask(real.sources[0])) == list(range(5))


# -- the experiment driver (python -m experiments.datacube) ----------------------------------------
def test_bench_exp_v_cardinality_two(tmp_path: Path) -> None:
    """Exp-V at cardinality 2 (Ding et al., Sec. 6): BMax and PMost both measure only the base cuboid (= Base),
    and All's average cuboid error is E|Lap(128)| = 128 up to sampling: over the 3^7 cells the mean
    of |noise| (sd about 128) has s.e. 128 / sqrt(2187) < 3, so 5 s.e. is 15."""
    from experiments.datacube import main

    assert (
        main(
            [
                "--data-dir",
                str(tmp_path),
                "--out",
                str(tmp_path / "o"),
                "--exp",
                "V",
                "--cards",
                "2",
                "--seeds",
                "1",
            ]
        )
        == 0
    )
    rows = pd.read_csv(tmp_path / "o" / "V-summary.csv").set_index("method")
    assert rows.loc["BMax", "lpre"] == rows.loc["PMost", "lpre"] == rows.loc["Base", "lpre"] == 1
    assert rows.loc["BMax", "avg_error"] == rows.loc["Base", "avg_error"]
    assert abs(rows.loc["All", "avg_error"] - 128) < 15
    assert rows.loc["AllC", "avg_error"] < rows.loc["All", "avg_error"]
    assert (tmp_path / "o" / "V-avg_error.png").stat().st_size > 1000


@pytest.mark.parametrize("consistency", ["linf", "l1"])
def test_lp_error_bound(consistency: str) -> None:
    """Theorems 8-9: sum over E_pre of |ĉ - c| <= (|E_pre| |L_pre| / eps) * eta with probability
    >= 1 - delta; eta = 2 ln(|E_pre| / delta) with delta = 1e-4 (Theorem 8's form; Theorem 9's
    delta for the same eta is far smaller), so 20 seeded runs all satisfy it except with
    probability < 2e-3."""
    rng = np.random.default_rng(4)
    hist = Histogram(EX21, rng.integers(0, 6, size=EX21.shape))
    mech = DataCube(1.0, method="bmax", consistency=consistency)
    geo = CubeGeometry(EX21)
    for seed in range(20):
        release = mech.release(hist, random_state=seed)
        sources = [geo.mask(s) for s in release.sources]
        cells = sum(geo.lattice.cells(m) for m in sources)
        eta = 2 * np.log(cells / 1e-4)
        error = sum(
            np.abs(
                release.cuboid(geo.attributes(m)) - rollup(hist.counts, geo.lattice.base, m)
            ).sum()
            for m in sources
        )
        assert error <= cells * len(sources) / 1.0 * eta
        assert error > 0


def test_clip_policy_matches_the_histogram_engine() -> None:
    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "age", "kind": "ordinal", "range": [0, 9], "width": 5},
                {"name": "k", "kind": "nominal", "categories": ["a", "b"]},
            ]
        }
    )
    frame = pd.DataFrame({"age": [-3, 1, 7, 12, 4], "k": ["a", "b", "a", "b", "a"]})
    release = DataCube(1.0, method="all").release(
        CubeSource(frame, schema, "clip"), random_state=NO_NOISE
    )
    np.testing.assert_array_equal(
        release.cuboid(["age", "k"]), histogram(frame, schema, on_out_of_domain="clip").counts
    )
    assert release.curator_log["clipped"] == {"age": 2} and release.curator_log["counted"] == 5


def test_cube_source_out_of_domain_counts_every_cause_and_hides_values(tmp_path: Path) -> None:
    """On the GROUPING SETS path: every cause of every column is counted, the
    distinct rows concerned are totalled, and raw values appear only with show_values."""
    frame = pd.DataFrame({"age": [5, 200, 300, -4, 7, 8], "city": ["a", "a", "zz", "b", None, "b"]})
    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "age", "kind": "ordinal", "range": [0, 99], "width": 1},
                {"name": "city", "kind": "nominal", "categories": ["a", "b"]},
            ]
        }
    )
    path = tmp_path / "rows.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(DataError) as info:
        DataCube(1.0).release(CubeSource(str(path), schema), random_state=NO_NOISE)
    message = str(info.value)
    assert message.startswith("4 of 6 rows cannot be counted: ")  # rows 1-4; row 2 has two causes
    assert "3 rows are outside the domain (1 below the range, 2 above the range)" in message
    assert "2 rows are outside the domain or NULL (1 not a known category, 1 NULL)" in message
    assert not any(v in message for v in ("200", "300", "-4", "zz"))
    with pytest.raises(DataError, match=r"above the range: 200 \(1 rows\), 300 \(1 rows\)"):
        DataCube(1.0).release(
            CubeSource(str(path), schema, show_values=True), random_state=NO_NOISE
        )


def test_cube_intervals_are_exact_when_the_estimate_is_linear() -> None:
    """A data cube without clamping, rounding or L1/L-inf consistency is linear and unbiased in the
    noise: its interval is answer +- z * exact sd (it used to report no error estimate at all)."""
    from statistics import NormalDist

    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "nominal", "categories": ["x", "y"]},
                {"name": "b", "kind": "ordinal", "range": [0, 3], "width": 1},
            ]
        }
    )
    hist = Histogram(schema, np.arange(8).reshape(2, 4))
    z = NormalDist().inv_cdf(0.975)
    q = {"b": [1, 2]}
    for consistency in (None, "l2"):
        release = DataCube(1.0, publish=1, consistency=consistency).release(hist, random_state=3)
        lower, upper = release.interval(q)
        answer, sd = release.answer(q), release.stddev(q)
        assert sd > 0 and np.isclose(lower, answer - z * sd) and np.isclose(upper, answer + z * sd)
    clamped = DataCube(1.0, publish=1, nonnegative=True).release(hist, random_state=3)
    assert not clamped.linear_unbiased


# -- cuboids that were not published, derived online from the published ones (Sec. 7.4) ------------
def test_derive_cuboid_rolls_up_the_least_noisy_published_superset() -> None:
    """A cuboid not published is summed from a published superset, with its variance
    and the source named; noiseless it equals the exact marginal."""
    rng = np.random.default_rng(84)
    hist = Histogram(EX21, rng.integers(0, 9, size=EX21.shape))
    mech = DataCube(1.0, method="all", publish=[("sex", "age"), ("age", "salary")])
    exact = mech.release(hist, random_state=NO_NOISE, account=False)
    assert isinstance(exact, CuboidRelease)
    with pytest.raises(QueryError, match="was not published"):
        exact.cuboid(["age"])
    derived = exact.derive_cuboid(["age"])
    np.testing.assert_allclose(derived.values, hist.counts.sum(axis=(0, 2)))
    # age from (sex, age) sums 2 cells, from (age, salary) 5: the first is less noisy
    assert derived.computed_from == ("sex", "age")
    noisy = mech.release(hist, random_state=1, account=False)
    assert isinstance(noisy, CuboidRelease)
    d = noisy.derive_cuboid("age")
    assert d.cell_variance == pytest.approx(2 * noisy.cell_variance(("sex", "age")))
    assert noisy.derive_cuboid(("salary", "age")).values.shape == (5, 7)  # axes in the order asked
    assert noisy.derive_cuboid(("sex", "age")).computed_from == ("sex", "age")
    with pytest.raises(QueryError, match="cannot be derived"):
        noisy.derive_cuboid(("sex", "salary"))


def test_derived_cuboid_variance_matches_monte_carlo() -> None:
    """The derived cell variance is exact: over R = 400 seeded releases the sample variance of a
    derived cell has relative standard error sqrt(2 / (R - 1)) ~ 7 % (near-Gaussian sums of
    discrete Laplace); 4 standard errors (28 %) is the tolerance, also under L2 consistency."""
    hist = Histogram(EX21, np.full(EX21.shape, 3))
    for consistency in (None, "l2"):
        mech = DataCube(
            1.0, method="all", publish=[("sex", "age"), ("age", "salary")], consistency=consistency
        )
        draws = []
        predicted = 0.0
        for seed in range(400):
            release = mech.release(hist, random_state=seed, account=False)
            assert isinstance(release, CuboidRelease)
            derived = release.derive_cuboid("age")
            draws.append(derived.values[0])
            predicted = derived.cell_variance
        assert np.var(draws, ddof=1) == pytest.approx(predicted, rel=0.28)
