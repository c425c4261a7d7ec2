"""The inverse question: the epsilon a target error needs, checked by releasing at it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dpcube import Histogram, Schema
from dpcube.planning import plan_mechanisms
from dpcube.planning.inverse import (
    discrete_laplace_half_width,
    epsilon_needs,
    laplace_factor,
    laplace_mixture_tail,
    required_epsilon,
)


def line(n: int) -> Schema:
    return Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, n - 1], "width": 1}]}
    )


def test_laplace_factor_bounds_one_draw_and_a_sum_of_two() -> None:
    k = laplace_factor(0.95)
    # one Laplace draw of sd 1 (b = 1/sqrt 2): P(|L| > k) = exp(-k sqrt 2), exactly
    assert math.exp(-k * math.sqrt(2)) <= 0.05
    # equal sum of two draws, sd 1 (b = 1/2 each): density of L1 + L2 is
    # (1/(4b))(1 + |z|/b) e^{-|z|/b}, so P(|Z| > k) = (2 + k/b) e^{-k/b} / 2
    b = 0.5
    assert (2 + k / b) * math.exp(-k / b) / 2 <= 0.05
    # the bound is not loose: a normal 1.96 sd would break it for one draw
    assert math.exp(-1.96 * math.sqrt(2)) > 0.05
    assert 2.1 < k < 2.2
    # laplace_mixture_tail is a probability bound decreasing in kappa
    assert laplace_mixture_tail(1.0) > laplace_mixture_tail(2.0) > laplace_mixture_tail(3.0) > 0


def test_exact_discrete_laplace_tail_matches_simulation() -> None:
    # sum of 5 discrete Laplace draws of scale 2: exact tail vs 200,000 draws (sd of the
    # estimate sqrt(t(1-t)/2e5) < 0.0012; 5 sd = 0.006)
    from dpcube.planning.inverse import discrete_laplace_sum_tail
    from dpcube.privacy.random import resolve_random_state
    from dpcube.privacy.samplers import discrete_laplace

    draws = discrete_laplace(resolve_random_state(7), 2, 1, size=(200_000, 5)).sum(axis=1)
    exact = discrete_laplace_sum_tail(2.0, 5, 6.5)
    assert exact is not None
    assert abs(np.mean(np.abs(draws) > 6.5) - exact) < 0.006


def test_discrete_laplace_half_width_covers_single_draws_at_every_scale() -> None:
    # For one discrete Laplace draw of scale b the tail is exact: P(|X| >= m) = 2p^m/(1+p).
    for b in np.geomspace(0.05, 500, 400):
        p = math.exp(-1 / b)
        e = discrete_laplace_half_width(b * math.sqrt(2), 1.0, 0.95)
        m = math.floor(e) + 1
        assert 2 * p**m / (1 + p) <= 0.05


def _coverage(mech, schema, counts, boxes, target, reps, seed0=0):
    truth = np.array([counts[a : b + 1].sum() for (a, b) in boxes[:, 0]])
    inside = np.zeros(len(boxes))
    for seed in range(seed0, seed0 + reps):
        est = mech.release(Histogram(schema, counts), random_state=seed).counts
        answers = np.array([est[a : b + 1].sum() for (a, b) in boxes[:, 0]])
        inside += np.abs(answers - truth) <= target
    return inside / reps


@pytest.mark.parametrize(
    ("label", "delta"),
    [("identity(laplace)", None), ("privelet", None), ("matrix(hierarchical)", 1e-6)],
)
def test_releasing_at_the_required_epsilon_meets_the_target(
    label: str, delta: float | None, tmp_path: Path
) -> None:
    # Three queries given in a file; every query within +-12 at 95 %. 600 seeded releases at the
    # epsilon found: the coverage of each query must be at least 95 % up to sampling error
    # (binomial sd sqrt(.95 .05 / 600) = 0.0089; 3 sd = 0.027), and at half that epsilon the
    # largest query must miss it (so the epsilon is not more than twice what is needed).
    schema = line(16)
    queries = tmp_path / "q.json"
    queries.write_text(json.dumps([{"x": [0, 15]}, {"x": [3, 9]}, {"x": [5, 5]}]))
    strategies = ["hierarchical"]
    p = plan_mechanisms(schema, str(queries), 1.0, delta, strategies=strategies)
    cand = {c.label: c for c in p.candidates}[label]
    need = required_epsilon(cand, 12.0, 0.95, p.queries, "max")
    assert need.epsilon is not None
    counts = np.arange(16) * 3
    boxes = np.array([[[0, 15]], [[3, 9]], [[5, 5]]])
    at = plan_mechanisms(schema, str(queries), need.epsilon, delta, strategies=strategies)
    mech = {c.label: c for c in at.candidates}[label].build()
    cover = _coverage(mech, schema, counts, boxes, 12.0, 600)
    assert cover.min() >= 0.95 - 0.027
    half = plan_mechanisms(schema, str(queries), need.epsilon / 2, delta, strategies=strategies)
    loose = {c.label: c for c in half.candidates}[label].build()
    assert _coverage(loose, schema, counts, boxes, 12.0, 600, seed0=10_000).min() < 0.95


def test_inverse_lists_every_candidate_and_benchmark_figures() -> None:
    s = Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "loc",
                    "kind": "spatial",
                    "columns": ["lat", "lon"],
                    "bbox": [0, 0, 1, 1],
                    "resolution": [4, 4],
                }
            ]
        }
    )
    p = plan_mechanisms(s, "allrange", 1.0, strategies=["identity"])
    needs = {n.label: n for n in epsilon_needs(p, 50.0, 0.95, "max")}
    assert needs["identity(laplace)"].epsilon is not None
    assert needs["privtree"].epsilon is None and needs["privtree"].basis == "benchmark"
    assert "experiments/docs/location.md" in needs["privtree"].note
    # more precision needs more budget
    tight = {n.label: n for n in epsilon_needs(p, 25.0, 0.95, "max")}
    assert tight["identity(laplace)"].epsilon > needs["identity(laplace)"].epsilon


def test_data_cube_at_the_required_epsilon_meets_the_target() -> None:
    # 1-way marginals of three attributes by BMax without consistency (discrete Laplace sums,
    # exact tail): 400 seeded releases at the epsilon found; each marginal cell within +-6 in at
    # least 95 % of them up to sampling error (binomial sd sqrt(.95 .05 / 400) = 0.011; 3 sd).
    s = Schema.from_dict(
        {
            "attributes": [
                {"name": n, "kind": "nominal", "categories": ["0", "1", "2"]}
                for n in ("a", "b", "c")
            ]
        }
    )
    p = plan_mechanisms(s, "marginals:1", 1.0, mechanisms=["datacube"])
    cand = {c.label: c for c in p.candidates}["datacube(bmax)"]
    need = required_epsilon(cand, 6.0, 0.95, p.queries, "max")
    assert need.epsilon is not None
    at = plan_mechanisms(s, "marginals:1", need.epsilon, mechanisms=["datacube"])
    mech = {c.label: c for c in at.candidates}["datacube(bmax)"].build()
    counts = np.arange(27).reshape(3, 3, 3)
    queries = [{n: v} for n in "abc" for v in "012"]
    truth = np.array(
        [counts.take(int(q[n]), axis="abc".index(n)).sum() for q in queries for n in q]
    )
    inside = np.zeros(len(queries))
    for seed in range(400):
        answers = mech.release(Histogram(s, counts), random_state=seed).answer_many(queries)
        inside += np.abs(answers - truth) <= 6.0
    assert (inside / 400).min() >= 0.95 - 0.033
