"""DAWA: the private dyadic L1 partition, its dynamic program, the release end to end."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from dpcube import Histogram, Schema
from dpcube.cli.main import main
from dpcube.errors import DPCubeError, QueryError
from dpcube.mechanisms.conformance import neighbouring_pairs
from dpcube.mechanisms.identity import Identity
from dpcube.mechanisms.matrix import dawa as dawa_module
from dpcube.mechanisms.matrix.dawa import (
    DAWA,
    best_partition,
    deviation_sensitivity,
    deviations,
    dyadic_levels,
    line_order,
    noisy_deviations,
)
from dpcube.privacy.ledger import BudgetLedger
from dpcube.privacy.random import NO_NOISE, resolve_random_state
from dpcube.release.base import load_release
from dpcube.release.uncertainty import answer_uncertainty


def one_axis(n: int) -> Schema:
    return Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, n - 1], "width": 1}]}
    )


def grid(rows: int, cols: int) -> Schema:
    return Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "ordinal", "range": [0, rows - 1], "width": 1},
                {"name": "b", "kind": "ordinal", "range": [0, cols - 1], "width": 1},
            ]
        }
    )


# -- stage 1: sensitivity of the deviations, by brute force ------------------------------------
@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_deviation_sensitivity_is_the_largest_change_over_every_small_histogram(n: int) -> None:
    """Every histogram with cells in 0..2 and every neighbour of it: the declared L1 sensitivity
    is attained (add_remove) and never exceeded (replace)."""
    worst = {"add_remove": 0.0, "replace": 0.0}
    for cells in itertools.product(range(3), repeat=n):
        x = np.array(cells, dtype=np.int64)
        base = deviations(x)
        for neighbour in worst:
            for y in neighbouring_pairs(x, neighbour):
                change = float(np.abs(deviations(y) - base).sum())
                worst[neighbour] = max(worst[neighbour], change)
    assert worst["add_remove"] == pytest.approx(deviation_sensitivity(n))
    assert worst["replace"] <= deviation_sensitivity(n, "replace") + 1e-12
    assert deviation_sensitivity(n) > 0


def test_deviation_sensitivity_grows_as_twice_log_n() -> None:
    # sum_{k=1}^{K} 2 (1 - 2^-k) = 2K - 2 (1 - 2^-K) with K = floor(log2 n)
    for n in (2, 7, 8, 4096, 5000):
        k = math.floor(math.log2(n))
        assert deviation_sensitivity(n) == pytest.approx(2 * k - 2 * (1 - 2.0**-k))


def test_stage_one_noise_is_calibrated_to_the_whole_vector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each level's integers ``m dev`` get discrete Laplace of scale ``m Delta_1 / epsilon_1``,
    so every deviation's noise has scale Delta_1 / epsilon_1 and the privacy loss of the vector
    is at most sum_B |change of dev_B| epsilon_1 / Delta_1 <= epsilon_1."""
    seen: list[tuple[int, float]] = []
    real = dawa_module.add_discrete_laplace

    def spy(values, scale, source):  # type: ignore[no-untyped-def]
        seen.append((len(values), scale))
        return real(values, scale, source)

    monkeypatch.setattr(dawa_module, "add_discrete_laplace", spy)
    n, eps1 = 16, 0.3
    whole = deviation_sensitivity(n)
    noisy_deviations(np.arange(n), eps1, whole, resolve_random_state(0))
    assert [count for count, _ in seen] == [n // m for m in dyadic_levels(n)]
    for (_, scale), m in zip(seen, dyadic_levels(n), strict=True):
        assert scale == pytest.approx(m * whole / eps1)


def test_merge_probability_ratio_is_within_epsilon_one() -> None:
    """The partition of two cells is 'merge' iff max(2 dev + z, 0) / 2 <= 1/epsilon_2, z a
    discrete Laplace of the realised scale; the exact probabilities of both outcomes on two
    neighbours differ by at most a factor e^epsilon_1 (the sampler rounds the scale up)."""
    from dpcube.privacy.samplers import laplace_scale_rational

    eps1, eps2 = 0.5, 1.5
    t, s = laplace_scale_rational(2 * deviation_sensitivity(2) / eps1)
    p = math.exp(-s / t)

    def cdf(k: int) -> float:  # P[z <= k] for P(z) = (1-p)/(1+p) p^|z|
        if k < 0:
            return p ** (-k) / (1 + p)
        return 1 - p ** (k + 1) / (1 + p)

    worst = 0.0
    for a in range(6):
        for b in range(6):
            x = np.array([a, b])
            for y in neighbouring_pairs(x, "add_remove"):
                limit = math.floor(2 / eps2)  # merge iff 2 dev + z <= 2/eps2 (dev >= 0 clipped)
                px = cdf(limit - round(2 * deviations(x)[0]))
                py = cdf(limit - round(2 * deviations(y)[0]))
                worst = max(worst, abs(math.log(px / py)), abs(math.log((1 - px) / (1 - py))))
    assert 0 < worst <= eps1 + 1e-12


# -- stage 1: the dynamic program against exhaustive search -----------------------------------
def dyadic_partitions(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Every partition of [lo, hi) into aligned dyadic intervals."""
    if lo == hi:
        return [[]]
    out = []
    m = 1
    while lo + m <= hi and lo % m == 0:
        for rest in dyadic_partitions(lo + m, hi):
            out.append([(lo, m), *rest])
        m *= 2
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 11, 12])
def test_dynamic_program_finds_the_least_cost_dyadic_partition(n: int) -> None:
    rng = np.random.default_rng(n)
    for trial in range(20):
        levels = dyadic_levels(n)
        costs = [rng.uniform(0, 3, size=n // m) for m in levels]
        if trial % 4 == 0:  # ties
            costs = [np.round(c) for c in costs]
        bucket = float(rng.uniform(0.1, 2))

        def total(
            partition: list[tuple[int, int]],
            costs: list[np.ndarray] = costs,
            bucket: float = bucket,
            levels: list[int] = levels,
        ) -> float:
            cost = 0.0
            for start, m in partition:
                cost += bucket + (0.0 if m == 1 else costs[levels.index(m)][start // m])
            return cost

        exhaustive = min(total(p) for p in dyadic_partitions(0, n))
        starts = best_partition(n, costs, bucket)
        sizes = np.diff(np.append(starts, n))
        chosen = list(zip(starts.tolist(), sizes.tolist(), strict=True))
        assert starts[0] == 0 and sizes.sum() == n
        assert all(start % m == 0 and m & (m - 1) == 0 for start, m in chosen)
        assert total(chosen) == pytest.approx(exhaustive)


# -- the line ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(8, 8), (16, 16), (3, 5), (1, 6)])
def test_hilbert_line_visits_every_cell_once_and_steps_to_neighbours(
    shape: tuple[int, int],
) -> None:
    order = line_order(shape)
    assert sorted(order.tolist()) == list(range(shape[0] * shape[1]))
    if shape[0] == shape[1]:  # a full Hilbert curve: each step moves to an adjacent cell
        r, c = np.divmod(order, shape[1])
        assert np.all(np.abs(np.diff(r)) + np.abs(np.diff(c)) == 1)


def test_more_than_two_axes_is_refused_before_the_charge(tmp_path: Path) -> None:
    schema = Schema.from_dict(
        {"attributes": [{"name": k, "kind": "ordinal", "range": [0, 1], "width": 1} for k in "abc"]}
    )
    ledger = BudgetLedger(tmp_path / "l")
    ledger.set_total(5.0, 0.0)
    with pytest.raises(QueryError, match="1-D and 2-D"):
        DAWA(1.0).release(Histogram(schema, np.ones((2, 2, 2), dtype=np.int64)), ledger=ledger)
    assert ledger.charges() == []


# -- releases ----------------------------------------------------------------------------------
def prefix_mse(estimate: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean((np.cumsum(estimate.ravel()) - np.cumsum(truth.ravel())) ** 2))


def test_dawa_beats_identity_on_piecewise_constant_data() -> None:
    """Four flat pieces of 64 cells, 10,000 records, epsilon 0.1: Identity's prefix error grows
    with the prefix length (about 2 (i+1) / 0.1^2 per prefix, ~2.6e4 on average), DAWA's with the
    few buckets only; over 5 seeds DAWA's mean error must be under a tenth of Identity's (in our
    runs it is below a hundredth, so the factor 10 leaves room for the noise)."""
    schema = one_axis(256)
    truth = np.repeat(np.array([60, 0, 20, 76]), 64).astype(np.int64)
    d, i = [], []
    for seed in range(5):
        hist = Histogram(schema, truth)
        d.append(
            prefix_mse(
                DAWA(0.1, workload="prefix:256").release(hist, seed, account=False).counts, truth
            )
        )
        i.append(prefix_mse(Identity(0.1).release(hist, seed, account=False).counts, truth))
    assert np.mean(d) < np.mean(i) / 10


def test_noiseless_release_keeps_flat_pieces_exact_in_two_dimensions() -> None:
    schema = grid(8, 8)
    counts = np.zeros((8, 8), dtype=np.int64)
    counts[:4, :4] = 7
    counts[6, 1] = 30
    r = DAWA(1.0, workload="allrange").release(Histogram(schema, counts), random_state=NO_NOISE)
    np.testing.assert_allclose(r.counts, counts, atol=1e-9)
    assert r.metadata.noise["line"] == "hilbert"
    assert r.metadata.noise["buckets"] < 64


def test_release_answers_many_and_saves_and_loads(tmp_path: Path) -> None:
    schema = one_axis(64)
    counts = np.random.default_rng(1).integers(0, 50, 64)
    r = DAWA(1.0, workload=[{"x": [0, 9]}, {"x": [10, 63]}]).release(
        Histogram(schema, counts), random_state=3, account=False
    )
    queries = [{}, {"x": [3, 40]}, {"x": [63, 63]}]
    r.save(tmp_path / "r")
    loaded = load_release(tmp_path / "r")
    np.testing.assert_allclose(loaded.answer_many(queries), r.answer_many(queries))
    assert loaded.metadata.mechanism == "dawa"
    assert loaded.metadata.params["partition_share"] == 0.25
    # the sensitivities are declared in the manifest: stage 1's vector and stage 2's strategy
    assert set(loaded.metadata.sensitivity) == {
        c.name for c in DAWA(1.0).sensitivity_claims(schema)
    }


def test_intervals_are_model_based_never_trusted() -> None:
    schema = one_axis(16)
    r = DAWA(1.0).release(Histogram(schema, np.arange(16)), random_state=0, account=False)
    u = answer_uncertainty(r, [{"x": [0, 7]}], runs=20, seed=1)
    assert u.kind == "bootstrap"
    assert u.interval_kind is not None and u.interval_kind.tolist() == ["model"]
    assert not u.trusted(0)
    assert np.isnan(r.variance_many([{"x": [0, 7]}])).all()


@pytest.mark.parametrize(
    "kwargs", [{"partition_share": 0.0}, {"partition_share": 1.0}, {"strategy": "lsa"}]
)
def test_parameters_outside_their_domain_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(DPCubeError):
        DAWA(1.0, **kwargs)  # type: ignore[arg-type]


def test_a_workload_of_another_grid_is_refused_before_the_charge(tmp_path: Path) -> None:
    ledger = BudgetLedger(tmp_path / "l")
    ledger.set_total(5.0, 0.0)
    with pytest.raises(QueryError, match="cells"):
        DAWA(1.0, workload="allrange:8").release(
            Histogram(one_axis(16), np.ones(16, dtype=np.int64)), ledger=ledger
        )
    assert ledger.charges() == []


def test_cli_release_with_a_workload_then_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    schema = tmp_path / "schema.yaml"
    schema.write_text(
        yaml.safe_dump(
            {"attributes": [{"name": "age", "kind": "ordinal", "range": [0, 15], "width": 1}]}
        )
    )
    data = tmp_path / "people.csv"
    ages = np.random.default_rng(0).integers(0, 16, 300)
    data.write_text("age\n" + "\n".join(map(str, ages)) + "\n")
    out = tmp_path / "rel"
    code = main(
        [
            "release", str(data), "--schema", str(schema), "--mechanism", "dawa",
            "--workload", "allrange", "--epsilon", "1", "--total-epsilon", "2",
            "--out", str(out), "--param", "partition_share=0.3",
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    loaded = load_release(out)
    assert loaded.metadata.mechanism == "dawa"
    assert loaded.metadata.params["workload"] == "allrange"
    assert loaded.metadata.epsilon == 1.0
    assert loaded.answer_many([{}]).shape == (1,)
    code = main(
        [
            "release", str(data), "--schema", str(schema), "--mechanism", "dawa",
            "--workload", "nosuch:3", "--epsilon", "0.5", "--out", str(tmp_path / "bad"),
        ]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "nosuch" in err and "Traceback" not in err
    assert not (tmp_path / "bad").exists()


def test_noise_scales_follow_the_declared_claims() -> None:
    """Stage 1's scale is the declared deviation sensitivity over epsilon_1, twice as large under
    replace; stage 2's is the strategy's column norm times the declared factor over epsilon_2."""
    schema = one_axis(32)
    hist = Histogram(schema, np.arange(32))
    scales = {}
    for neighbour in ("add_remove", "replace"):
        mech = DAWA(1.0, neighbour=neighbour, strategy="identity")
        r = mech.release(hist, random_state=0, account=False)
        declared = {c.name: c.declared for c in mech.sensitivity_claims(schema)}
        assert r.metadata.sensitivity == declared
        first = next(iter(declared.values()))
        assert r.metadata.noise["deviation_scale"] == pytest.approx(first / 0.25)
        scales[neighbour] = (r.metadata.noise["deviation_scale"], r.metadata.noise["scale"])
    assert scales["replace"][0] == pytest.approx(2 * scales["add_remove"][0])
    # identity on the buckets: column norm 1; the snapped sampler enlarges the scale slightly
    assert scales["add_remove"][1] == pytest.approx(1 / 0.75, rel=1e-3)
    assert scales["replace"][1] == pytest.approx(2 / 0.75, rel=1e-3)
