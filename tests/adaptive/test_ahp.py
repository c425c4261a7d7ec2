"""AHP (Zhang et al., SDM 2014): clustering rule, sensitivity by brute force, end to end."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpcube import Histogram, Schema
from dpcube.errors import BudgetError, ParameterError
from dpcube.mechanisms.adaptive.ahp import AHP, ahp_groups, greedy_clusters
from dpcube.mechanisms.conformance import brute_force_sensitivity, tiny_histograms
from dpcube.privacy.ledger import BudgetLedger
from dpcube.privacy.random import NO_NOISE
from dpcube.release.base import load_release
from dpcube.release.uncertainty import answer_uncertainty


def line(n: int) -> Schema:
    return Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, n - 1], "width": 1}]}
    )


def scalar_clusters(x: list[float], eps: float) -> list[tuple[int, int]]:
    """The paper's greedy rule, one value at a time (the slow, obvious transcription)."""
    n = len(x)

    def err(i: int, j: int) -> float:
        part = x[i : j + 1]
        mean = sum(part) / len(part)
        return sum((v - mean) ** 2 for v in part) + 2 / (len(part) * eps**2)

    def err_star(j: int) -> float:
        best, last1, last2 = math.inf, 0.0, 0.0
        for end in range(j, n):
            length = end - j + 1
            e1 = (x[j] - sum(x[j : end + 1]) / length) ** 2
            e2 = 2 / (length**2 * eps**2)
            if end != j and e1 - last1 >= last2 - 2 / ((n - j + 1) ** 2 * eps**2):
                break
            best = min(best, e1 + e2)
            last1, last2 = e1, e2
        return best

    groups, i = [], 0
    for j in range(1, n):
        if err(i, j) >= err(i, j - 1) + err_star(j):
            groups.append((i, j))
            i = j
    groups.append((i, n))
    return groups


@pytest.mark.parametrize("seed", range(16))
def test_vectorised_clustering_equals_the_scalar_rule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 200))
    x = np.sort(np.where(rng.random(n) < 0.5, 0.0, rng.gamma(1.0, 30.0, n)))
    if seed % 2:  # whole numbers: runs of equal counts (as AHP's discrete noise gives)
        x = np.round(x / 10.0)
    eps = float(rng.choice([0.05, 0.3, 2.0]))
    assert greedy_clusters(x, eps) == scalar_clusters(list(x), eps)


def test_groups_cover_every_cell_once_and_small_counts_share_a_group() -> None:
    noisy = np.array([0.2, 50.0, -3.0, 49.0, 0.1, 500.0])
    labels = ahp_groups(noisy, 1.0, 1.0, 0.35)
    assert labels.shape == (6,)
    # below the threshold 0.35 ln 6 = 0.63 (and the negative one): one group of zeros
    assert labels[0] == labels[2] == labels[4]
    assert labels[5] not in (labels[0], labels[1])


@pytest.mark.parametrize("neighbour", ["add_remove", "replace"])
def test_group_sums_have_the_declared_sensitivity_on_every_partition(neighbour: str) -> None:
    # The grouping is chosen from noise, so the claim must hold for every partition of the
    # cells: all 15 partitions of 4 cells (Bell number), by brute force on three bases.
    schema = line(4)
    declared = {
        c.name: c.declared for c in AHP(1.0, neighbour=neighbour).sensitivity_claims(schema)
    }
    bases = [h.counts for h in tiny_histograms(schema)]
    for labels in _partitions(4):
        lab = np.array(labels)

        def sums(x: np.ndarray, lab: np.ndarray = lab) -> np.ndarray:
            return np.bincount(lab, weights=np.asarray(x, dtype=float).ravel())

        found = brute_force_sensitivity(sums, bases, neighbour, "l1")
        assert found <= declared["group sums"] + 1e-12
        if len(set(labels)) > 1:  # a record can leave one group for another, or be added
            assert found == declared["group sums"]


def _partitions(n: int) -> list[tuple[int, ...]]:
    out = []
    for labels in itertools.product(range(n), repeat=n):
        # restricted growth strings: each partition once
        if all(labels[i] <= max(labels[:i], default=-1) + 1 for i in range(n)):
            out.append(labels)
    return out


def test_partitions_enumeration_is_the_bell_number() -> None:
    assert len(_partitions(4)) == 15


def test_on_sparse_data_ahp_beats_identity_noise() -> None:
    # 256 cells, two spikes of 5,000, epsilon 0.1. Identity's expected squared error over the
    # cells is 256 * 2 b^2 with b = 10: 51,200. AHP spends 0.085 finding the zeros (an empty
    # cell passes the threshold 0.35 ln 256 / 0.085 = 22.8 with probability e^-2.28 / 2 = 5 %)
    # and 0.015 on group sums: ~13 groups cost about 2 / 0.015^2 = 8,900 each in total
    # squared error, and a spike is its own group. Its mean over 10 seeds stays far below
    # Identity's: we assert half, a margin of several standard errors.
    x = np.zeros(256, dtype=np.int64)
    x[[40, 200]] = 5000
    hist = Histogram(line(256), x)
    errors = [
        float(np.sum((AHP(0.1).release(hist, random_state=s, account=False).counts - x) ** 2))
        for s in range(10)
    ]
    assert np.mean(errors) < 0.5 * 51_200


def test_noiseless_release_is_exact_at_a_large_budget_and_saved_with_no_model_variance(
    tmp_path,
) -> None:
    x = np.array([0, 0, 7, 7, 7, 30, 0, 2], dtype=np.int64)
    hist = Histogram(line(8), x)
    r = AHP(50.0, ratio=0.5).release(hist, random_state=NO_NOISE)
    np.testing.assert_allclose(r.counts, x)
    r2 = AHP(1.0).release(hist, random_state=3, account=False)
    r2.save(tmp_path / "rel")
    loaded = load_release(tmp_path / "rel")
    queries = [{"x": [0, 3]}, {"x": [2, 5]}, {}]
    np.testing.assert_allclose(loaded.answer_many(queries), r2.answer_many(queries))
    assert np.all(np.isnan(loaded.variance_many(queries)))
    u = answer_uncertainty(loaded, queries, runs=20, seed=1)
    assert set(u.interval_kind) == {"model"}  # biased: never a trusted interval


def test_one_charge_and_refusals_before_it(tmp_path) -> None:
    hist = Histogram(line(8), np.arange(8))
    ledger = BudgetLedger(tmp_path / "l.ledger")
    ledger.set_total(1.0, 0.0)
    AHP(0.6).release(hist, random_state=1, ledger=ledger)
    assert len(ledger.charges()) == 1
    with pytest.raises(BudgetError):
        AHP(0.6).release(hist, random_state=1, ledger=ledger)
    assert len(ledger.charges()) == 1
    with pytest.raises(ParameterError):
        AHP(1.0, ratio=1.0)
    with pytest.raises(ParameterError):
        AHP(1.0, eta=-1)
    # epsilon 2e-12 alone is representable (scale 5e11 < 2^40), but a ratio of 0.1 leaves the
    # noisy counts 2e-13 (scale 5e12): refused before the charge
    fresh = BudgetLedger(tmp_path / "m.ledger")
    fresh.set_total(1.0, 0.0)
    with pytest.raises(BudgetError, match=r"ratio=0\.1"):
        AHP(2e-12, ratio=0.1).release(hist, random_state=1, ledger=fresh)
    assert fresh.charges() == []


def test_two_dimensional_grid_flattened() -> None:
    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "ordinal", "range": [0, 15], "width": 1},
                {"name": "b", "kind": "ordinal", "range": [0, 15], "width": 1},
            ]
        }
    )
    x = np.zeros((16, 16), dtype=np.int64)
    x[2:5, 3:6] = 400
    r = AHP(1.0).release(Histogram(schema, x), random_state=0, account=False)
    assert r.counts.shape == (16, 16)
    assert abs(r.answer({"a": [2, 4], "b": [3, 5]}) - 3600) < 200  # 9 cells, noise ~ b/9


@pytest.mark.parametrize("eps", [0.05, 0.5, 5.0])
def test_long_runs_of_equal_counts_take_the_shortcut_and_agree(eps: float) -> None:
    # Runs longer than the 16 lengths scanned one at a time: the run shortcut of err* is used.
    x = np.sort(np.array([0.0] * 60 + [5.0] * 40 + [7.0] * 30 + list(range(20, 40)), dtype=float))
    assert greedy_clusters(x, eps) == scalar_clusters(list(x), eps)
