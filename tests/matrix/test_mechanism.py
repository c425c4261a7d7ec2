"""The MatrixMechanism end to end: Monte-Carlo check of the error formulas (Li and Miklau,
2011 preprint, Prop. 2.4) for Laplace
and Gaussian noise, exact variances, save/load, workload files, Kronecker inference, reports."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import dpcube
from dpcube.errors import QueryError
from dpcube.histogram import Histogram
from dpcube.linalg import Explicit, least_squares
from dpcube.mechanisms.matrix.bound import P, gaussian_error, laplace_error, svdb
from dpcube.mechanisms.matrix.mechanism import MatrixMechanism, make_strategy
from dpcube.mechanisms.matrix.strategies import hierarchical
from dpcube.privacy.random import NO_NOISE, resolve_random_state
from dpcube.privacy.samplers import snapped_gaussian, snapped_laplace
from dpcube.release.base import load_release
from dpcube.schema import Schema
from dpcube.workloads import allrange, allrange_rows_1d, load_workload_file

DRAWS = 20_000


def _schema(*sizes: int) -> Schema:
    names = "abcdefgh"
    return Schema.from_dict(
        {
            "attributes": [
                {"name": names[i], "kind": "ordinal", "range": [0, d - 1], "width": 1}
                for i, d in enumerate(sizes)
            ]
        }
    )


def _monte_carlo(noisy_fn, a: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray]:
    """Total squared workload error averaged over DRAWS least-squares estimates."""
    y = np.tile(a @ x, DRAWS)
    noisy = noisy_fn(y).reshape(DRAWS, -1).T
    xhat = least_squares(Explicit(a), noisy)
    err = w @ xhat - (w @ x)[:, None]
    return float(np.mean(np.sum(err**2, axis=0))), xhat


def test_monte_carlo_gaussian_and_laplace() -> None:
    a = hierarchical(8).operator.dense()
    w = allrange_rows_1d(8)
    g = Explicit(w.T @ w)
    x = np.array([3.0, 0.0, 7.0, 1.0, 2.0, 9.0, 4.0, 4.0])
    eps, delta = 1.0, 1e-4
    sens2 = math.sqrt(4.0)
    sigma = sens2 * math.sqrt(2 * math.log(2 / delta)) / eps
    source = resolve_random_state(2024)
    draw_var: list[float] = []

    def gauss(y: np.ndarray) -> np.ndarray:
        out, draw = snapped_gaussian(y, sigma, l2_sensitivity=sens2, support=4, source=source)
        draw_var.append(float(draw.variance))
        return out

    mse, xhat = _monte_carlo(gauss, a, x, w)
    expected = P(eps, delta) * 352 / 3
    assert gaussian_error(g, Explicit(a), P(eps, delta)) == pytest.approx(expected, rel=1e-9)
    # The mean of 20,000 totals of 36 correlated squared Gaussians has relative standard deviation
    # below sqrt(2/20000) = 1%; 3% is a 3-sigma tolerance (the snapping grid inflates sigma by
    # less than 0.5%, covered by the exact realised variance as well).
    assert mse == pytest.approx(expected, rel=0.03)
    assert mse == pytest.approx(draw_var[0] / sens2**2 * gaussian_error(g, Explicit(a)), rel=0.03)
    np.testing.assert_allclose(
        xhat[0:4].sum(axis=0), xhat[0:2].sum(axis=0) + xhat[2:4].sum(axis=0), atol=1e-9
    )

    scale = Explicit(a).l1_sensitivity() / eps

    def laplace(y: np.ndarray) -> np.ndarray:
        out, _ = snapped_laplace(y, scale, epsilon=eps, support=4, source=source)
        return out

    mse_l, _ = _monte_carlo(laplace, a, x, w)
    # Laplace squares have relative sd sqrt(5) per term; the totals mix 15 noise terms, and
    # 20,000 draws bring the relative sd of the mean under 1.6%: 3% is about 2 sigma at worst
    # and 3 sigma for the mixed totals here; the snapping grid changes b by < 1e-6.
    assert mse_l == pytest.approx(laplace_error(g, Explicit(a), epsilon=eps), rel=0.03)


def test_release_reports_error_bound_and_exact_variance() -> None:
    schema = _schema(8)
    hist = Histogram(schema, [3, 0, 7, 1, 2, 9, 4, 4])
    mech = MatrixMechanism(1.0, delta=1e-6, strategy="hierarchical", workload="allrange:8")
    r = mech.release(hist, random_state=NO_NOISE)
    np.testing.assert_allclose(r.counts, hist.counts, atol=1e-9)
    noise = r.metadata.noise
    v = noise["noise_variance"]
    assert noise["expected_total_squared_error"] == pytest.approx(v * 352 / 3 / 4, rel=1e-9)
    assert noise["ratio"] == pytest.approx(1.4820, rel=1e-3)
    assert noise["svdb"] == pytest.approx(v / 4 * svdb(allrange((8,)).gram), rel=1e-9)
    a = hierarchical(8).operator.dense()
    inv = np.linalg.inv(a.T @ a)
    for lo, hi in ((0, 7), (2, 5), (3, 3)):
        q = np.zeros(8)
        q[lo : hi + 1] = 1
        assert r.variance({"a": [lo, hi]}) == pytest.approx(v * q @ inv @ q, rel=1e-9)


def test_release_monte_carlo_variance_of_one_query() -> None:
    schema = _schema(4)
    hist = Histogram(schema, [5, 1, 0, 2])
    mech = MatrixMechanism(1.0, strategy="wavelet")
    answers = [mech.release(hist, random_state=seed).answer({"a": [1, 2]}) for seed in range(600)]
    var = mech.release(hist, random_state=0).variance({"a": [1, 2]})
    # The answer is a weighted sum of 4 Laplace variables (kurtosis at most 6), so the sample
    # variance of 600 draws has relative sd at most sqrt(5/599) = 9.1%; 30% is 3.3 sd.
    assert np.var(answers, ddof=1) == pytest.approx(var, rel=0.3)
    assert np.mean(answers) == pytest.approx(1.0, abs=4 * math.sqrt(var / 600))


def test_save_load_keeps_variances(tmp_path: Path) -> None:
    schema = _schema(4, 4)
    hist = Histogram(schema, np.arange(16).reshape(4, 4))
    for strategy in ("lsa", "eigen", "wavelet"):
        mech = MatrixMechanism(0.8, strategy=strategy, workload="allrange:4x4")
        r = mech.release(hist, random_state=11)
        r.save(tmp_path / strategy)
        loaded = load_release(tmp_path / strategy)
        queries = [{"a": [0, 2], "b": [1, 3]}, {"b": [2, 2]}, {}]
        np.testing.assert_allclose(loaded.answer_many(queries), r.answer_many(queries))
        np.testing.assert_allclose(
            loaded.variance_many(queries), r.variance_many(queries), rtol=1e-9
        )


def test_kronecker_inference_on_a_256x256_grid() -> None:
    schema = _schema(256, 256)
    counts = np.random.default_rng(0).integers(0, 3, size=(256, 256))
    r = MatrixMechanism(1.0, strategy="hierarchical").release(
        Histogram(schema, counts), random_state=NO_NOISE
    )
    np.testing.assert_allclose(r.counts, counts, atol=1e-6)
    h = hierarchical(256).operator.dense()
    inv = np.linalg.inv(h.T @ h)
    q = np.zeros(256)
    q[10:100] = 1
    v = r.metadata.noise["noise_variance"]
    want = v * (q @ inv @ q) * (np.ones(256) @ inv @ np.ones(256))
    assert r.variance({"a": [10, 99]}) == pytest.approx(want, rel=1e-9)


def test_workload_files_and_errors(tmp_path: Path) -> None:
    schema = _schema(4, 3)
    jpath = tmp_path / "w.json"
    jpath.write_text(json.dumps([{"a": [0, 1]}, {"a": [2, 3], "b": [1, 2]}]))
    w = load_workload_file(jpath, schema)
    assert w.size == 2 and w.dims == (4, 3)
    cpath = tmp_path / "w.csv"
    cpath.write_text("a_lo,a_hi,b_lo,b_hi\n0,1,,\n2,3,1,2\n")
    w2 = load_workload_file(cpath, schema)
    np.testing.assert_array_equal(w.boxes, w2.boxes)
    hist = Histogram(schema, np.ones((4, 3), dtype=int))
    r = MatrixMechanism(1.0, strategy="lsa", workload=str(jpath)).release(
        hist, random_state=NO_NOISE
    )
    assert r.metadata.noise["workload_queries"] == 2
    assert r.metadata.noise["ratio"] >= 1 - 1e-9
    bad = tmp_path / "bad.csv"
    bad.write_text("a_lo,a_hi\n0,9\n")
    with pytest.raises(dpcube.DPCubeError, match="not inside"):
        load_workload_file(bad, schema)
    with pytest.raises(QueryError, match="power-of-two"):
        make_strategy("wavelet", (6,))
    with pytest.raises(QueryError, match="unknown workload"):
        MatrixMechanism(1.0, workload="nonsense:3").release(Histogram(_schema(3), [1, 1, 1]))


def test_replace_neighbour_sensitivity_bounds_brute_force() -> None:
    from dpcube.mechanisms.conformance import brute_force_sensitivity, tiny_histograms

    schema = _schema(4)
    for strategy, noise, delta in (
        ("wavelet", "gaussian", 1e-5),
        ("eigen", "gaussian", 1e-5),
        ("hierarchical", "laplace", None),
    ):
        mech = MatrixMechanism(
            1.0, delta=delta, noise=noise, strategy=strategy, neighbour="replace"
        )
        (claim,) = mech.sensitivity_claims(schema)
        found = brute_force_sensitivity(
            claim.function, [h.counts for h in tiny_histograms(schema)], "replace", claim.norm
        )
        assert found <= claim.declared * (1 + 1e-9)


def test_marginal_workload_grams_match_explicit_rows() -> None:
    import itertools

    from dpcube.workloads import marginal_ranges, marginals, parse_workload

    dims = (3, 4)
    ones = [np.ones((1, d)) for d in dims]
    predicates = [np.array(list(itertools.product((0.0, 1.0), repeat=d))) for d in dims]
    rows = np.vstack([np.kron(predicates[0], ones[1]), np.kron(ones[0], predicates[1])])
    w = parse_workload("marginal-predicates:3x4")
    np.testing.assert_allclose(w.gram.dense(), rows.T @ rows)
    assert w.size == len(rows)
    ranges = [allrange_rows_1d(d) for d in dims]
    rows = np.vstack([np.kron(ranges[0], ones[1]), np.kron(ones[0], ranges[1])])
    np.testing.assert_allclose(marginal_ranges(dims).gram.dense(), rows.T @ rows)
    one_way = np.vstack([np.kron(np.eye(3), ones[1]), np.kron(ones[0], np.eye(4))])
    np.testing.assert_allclose(marginals(1, dims).gram.dense(), one_way.T @ one_way)
    assert marginals(2, dims).size == 12 and marginals(1, dims).size == 7


@pytest.mark.parametrize("strategy", ["hierarchical", "opt"])
def test_repeated_releases_factor_the_strategy_once(strategy: str) -> None:
    # A mechanism released again with the same strategy reuses its factored A^T A (a dense
    # 4,096-cell Cholesky is ~2 CPU s): the releases are those of a fresh mechanism, seed for seed.
    schema = _schema(32)
    hist = Histogram(schema, np.arange(32))
    mech = MatrixMechanism(1.0, strategy=strategy, workload="prefix:32")
    first = mech.release(hist, random_state=1, account=False)
    assert mech._solver is not None
    solver = mech._solver[1]
    second = mech.release(hist, random_state=2, account=False)
    assert mech._solver[1] is solver
    fresh = MatrixMechanism(1.0, strategy=strategy, workload="prefix:32")
    assert np.array_equal(fresh.release(hist, random_state=2, account=False).counts, second.counts)
    assert not np.array_equal(first.counts, second.counts)  # different seeds, different noise


@pytest.mark.parametrize(
    "spec", ["upto:1", "upto:2", "queries:2", "marginals:1", "allrange", "prefix"]
)
def test_release_accepts_every_schema_workload_spec_plan_accepts(spec: str) -> None:
    # one parser: the specs that take their grid from the schema work for the release as for plan
    from dpcube.planning.workload import resolve_planning_workload

    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "ordinal", "range": [0, 3], "width": 1},
                {"name": "s", "kind": "nominal", "categories": ["F", "M", "X"]},
            ]
        }
    )
    planned = resolve_planning_workload(spec, schema)
    release = MatrixMechanism(1.0, workload=spec).release(
        Histogram(schema, np.arange(12).reshape(4, 3)), random_state=0
    )
    assert release.metadata.noise["workload"] == planned.name
    assert release.metadata.noise["workload_queries"] == planned.size


def test_schema_workload_spec_without_a_schema_is_refused_clearly() -> None:
    from dpcube.workloads import resolve_workload

    with pytest.raises(QueryError, match="takes its grid from the schema"):
        resolve_workload("upto:2")
