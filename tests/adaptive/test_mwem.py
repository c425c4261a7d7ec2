"""MWEM (Hardt, Ligett, McSherry, NIPS 2012): the workload's boxes, sensitivity, budget, release."""

from __future__ import annotations

import numpy as np
import pytest

from dpcube import Histogram, Schema
from dpcube.errors import QueryError
from dpcube.linalg.operators import Identity
from dpcube.mechanisms.adaptive.mwem import MWEM, multiplicative_weights, total_of
from dpcube.mechanisms.adaptive.queries import workload_boxes
from dpcube.mechanisms.conformance import brute_force_sensitivity, tiny_histograms
from dpcube.privacy.ledger import BudgetLedger
from dpcube.privacy.random import NO_NOISE
from dpcube.release.base import load_release
from dpcube.release.uncertainty import answer_uncertainty
from dpcube.workloads import Workload, box_gram, parse_workload


def line(n: int) -> Schema:
    return Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, n - 1], "width": 1}]}
    )


@pytest.mark.parametrize(
    "spec",
    [
        "allrange:5x3",
        "prefix:4x2",
        "marginals:1:3x4",
        "marginals:2:3x4x2",
        "marginal-ranges:3x4",
        "upto:2:r3,c2,t4@0-1.2-3",
        "upto:1:r2x2,c3",
        "random-range:10:8x8",
    ],
)
def test_boxes_are_exactly_the_workload(spec: str) -> None:
    # The workload is known by its Gram W^T W; the boxes spelled out must give the same Gram
    # (every query, each once) and the same number of queries.
    w = parse_workload(spec)
    boxes = workload_boxes(w)
    assert len(boxes) == w.size
    np.testing.assert_allclose(box_gram(boxes, w.dims), w.gram.dense())


def test_predicate_and_oversized_workloads_are_refused_before_the_charge(tmp_path) -> None:
    hist = Histogram(line(6), np.arange(6))
    ledger = BudgetLedger(tmp_path / "l.ledger")
    ledger.set_total(5.0, 0.0)
    with pytest.raises(QueryError, match="not made of range"):
        MWEM(1.0, workload="allpredicate:6").release(hist, random_state=1, ledger=ledger)
    with pytest.raises(QueryError, match="grid"):
        MWEM(1.0, workload="allrange:8").release(hist, random_state=1, ledger=ledger)
    assert ledger.charges() == []
    # allrange:4096 has 8,390,656 queries (its Gram alone takes seconds to build: a stand-in)
    big = Workload(
        "AllRange(4096)", (4096,), Identity(4096), 4096 * 4097 // 2, spec="allrange:4096"
    )
    with pytest.raises(QueryError, match="at most"):
        workload_boxes(big)


@pytest.mark.parametrize("neighbour", ["add_remove", "replace"])
def test_every_score_moves_by_at_most_one(neighbour: str) -> None:
    # The "query answers" claim (L-infinity 1) by brute force on a 2 x 3 grid with every range.
    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "ordinal", "range": [0, 1], "width": 1},
                {"name": "b", "kind": "ordinal", "range": [0, 2], "width": 1},
            ]
        }
    )
    mech = MWEM(1.0, workload="allrange", neighbour=neighbour)
    claims = {c.name: c for c in mech.sensitivity_claims(schema)}
    bases = [h.counts for h in tiny_histograms(schema)]
    answers = claims["query answers"]
    assert answers.norm == "linf" and answers.declared == 1.0
    assert brute_force_sensitivity(answers.function, bases, neighbour, "linf") == 1.0
    total = claims["total"]
    found = brute_force_sensitivity(total.function, bases, neighbour, "l1")
    assert found == (1.0 if neighbour == "add_remove" else 0.0)
    assert "total" not in {c.name for c in MWEM(1.0, total=10).sensitivity_claims(schema)}


def test_multiplicative_weights_fit_consistent_measurements() -> None:
    # Exact measurements of [0,1] = 6 and [2,3] = 2 on 4 cells with total 8: MW converges to
    # (3, 3, 1, 1), the estimate of maximum entropy consistent with both.
    w = multiplicative_weights(
        np.zeros(4), 8.0, [((slice(0, 2),), 6.0), ((slice(2, 4),), 2.0)], 500
    )
    np.testing.assert_allclose(total_of(w, 8.0), [3, 3, 1, 1], atol=1e-6)


def test_noiseless_mwem_recovers_the_counts_when_every_query_is_measured() -> None:
    x = np.array([5, 1, 0, 2], dtype=np.int64)
    r = MWEM(100.0, workload="allrange", rounds=10, update_rounds=2000).release(
        Histogram(line(4), x), random_state=NO_NOISE
    )
    # the empty cell is approached as about 2N/k after k passes (N = 8): within 0.05
    np.testing.assert_allclose(r.counts, x, atol=0.05)


def test_total_public_or_measured_is_stated_and_charged_once(tmp_path) -> None:
    hist = Histogram(line(16), np.arange(16))
    ledger = BudgetLedger(tmp_path / "l.ledger")
    ledger.set_total(2.0, 0.0)
    measured = MWEM(1.0, workload="prefix", rounds=4).release(hist, random_state=1, ledger=ledger)
    public = MWEM(1.0, workload="prefix", rounds=4, total=120).release(
        hist, random_state=1, ledger=ledger
    )
    assert [c.epsilon for c in ledger.charges()] == [1.0, 1.0]
    assert measured.metadata.noise["total"] == "measured"
    assert measured.metadata.noise["epsilon_total"] == pytest.approx(0.05)
    assert measured.metadata.noise["epsilon_select"] == pytest.approx(0.95 / 4 / 2)
    assert public.metadata.noise["total"] == "public"
    assert public.metadata.noise["epsilon_select"] == pytest.approx(1.0 / 4 / 2)
    # the estimate keeps the public total exactly (MW renormalises to it)
    assert public.answer({}) == pytest.approx(120.0)


def test_mwem_learns_the_skew_of_the_data() -> None:
    # All mass in the first quarter of 64 cells (N = 6,400), epsilon 1, 10 rounds on prefix
    # queries: the uniform start answers the prefix [0, 15] with 1,600; the exponential
    # mechanism picks a badly answered prefix (error up to 4,800, selection epsilon 0.0475,
    # i.e. weights exp(0.024 * error)) and MW moves mass within a round or two. Over 5 seeds
    # the mean error of that prefix stays under 1,000 (it is 4,800 for the uniform start).
    x = np.zeros(64, dtype=np.int64)
    x[:16] = 400
    hist = Histogram(line(64), x)
    errors = [
        abs(
            MWEM(1.0, workload="prefix", rounds=10)
            .release(hist, random_state=s, account=False)
            .answer({"x": [0, 15]})
            - 6400
        )
        for s in range(5)
    ]
    assert np.mean(errors) < 1000


def test_save_load_and_model_intervals(tmp_path) -> None:
    hist = Histogram(line(16), np.arange(16))
    r = MWEM(1.0, workload=[{"x": [0, 3]}, {"x": [4, 15]}], rounds=2).release(
        hist, random_state=2, account=False
    )
    r.save(tmp_path / "rel")
    loaded = load_release(tmp_path / "rel")
    queries = [{"x": [0, 3]}, {"x": [2, 9]}]
    np.testing.assert_allclose(loaded.answer_many(queries), r.answer_many(queries))
    u = answer_uncertainty(loaded, queries, runs=20, seed=1)
    assert set(u.interval_kind) == {"model"}


def test_a_measurement_far_below_the_estimate_keeps_the_weights_finite() -> None:
    # Noise can put a measured count far below the estimate with a small total (N = 1): the
    # step -1000 / 2 on a box holding all the mass once made log1p(-1) fail.
    w = multiplicative_weights(np.zeros(4), 1.0, [((slice(0, 4),), -1000.0)], 3)
    assert np.all(np.isfinite(w))
    np.testing.assert_allclose(total_of(w, 1.0).sum(), 1.0)
    w = multiplicative_weights(
        np.zeros(4), 1.0, [((slice(0, 3),), -1000.0), ((slice(3, 4),), 5000.0)], 5
    )
    assert np.all(np.isfinite(w))
