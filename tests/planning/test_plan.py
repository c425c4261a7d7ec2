"""plan_mechanisms: exact errors checked against the mechanisms' own variance models and releases,
the recommendation, benchmark candidates, and that planning reads no data and spends no budget."""

from __future__ import annotations

import inspect
import itertools
import math
import os
from pathlib import Path

import numpy as np
import pytest

import dpcube
from dpcube import Histogram, Schema
from dpcube.mechanisms.privelet.mechanism import PriveletPlus, PriveletVariance
from dpcube.planning import Candidate, MechanismPlan, plan_mechanisms
from dpcube.planning.errors import privelet_coefficient_variance
from dpcube.privacy import NO_NOISE
from dpcube.workloads import all_intervals, attribute_queries, from_boxes


def line(n: int) -> Schema:
    return Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, n - 1], "width": 1}]}
    )


def mixed() -> Schema:
    return Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "ordinal", "range": [0, 3], "width": 1},
                {"name": "s", "kind": "nominal", "categories": ["F", "M", "X"]},
            ]
        }
    )


def by_label(p: MechanismPlan) -> dict[str, Candidate]:
    return {c.label: c for c in p.candidates}


def test_public_api_names_and_types() -> None:
    p = dpcube.plan(line(8), "allrange:8", 1.0)
    assert isinstance(p, MechanismPlan) and isinstance(p.recommended, Candidate)
    assert p.recommended in p.candidates and p.reason
    assert {"data", "histogram", "counts"}.isdisjoint(inspect.signature(plan_mechanisms).parameters)
    d = p.to_dict()
    assert d["data_read"] is False and d["budget_spent"] == 0.0
    assert d["recommended"] == p.recommended.label
    for c in p.candidates:
        assert c.basis in ("exact", "benchmark", "not-applicable")
        assert isinstance(c.params, dict) and isinstance(c.note, str)


def test_privelet_and_identity_errors_equal_the_sum_of_their_variance_models() -> None:
    # allrange:16 as explicit boxes: the sum of the release variance models over every query.
    s = line(16)
    boxes = all_intervals(16).reshape(-1, 1, 2)
    p = by_label(plan_mechanisms(s, "allrange:16", 0.7, mechanisms=["identity", "privelet"]))
    mech = PriveletPlus(0.7, plain_attributes=(), neighbour="add_remove")
    v = privelet_coefficient_variance(0.7, mech, s)
    brute = PriveletVariance(v, mech.plan(s).axes).variance_many(boxes).sum()
    assert p["privelet"].expected_error == pytest.approx(brute, rel=1e-12)
    # Identity: v * (total cells over all queries), v the released cell variance.
    release = dpcube.Identity(0.7).release(Histogram(s, np.zeros(16, int)), random_state=NO_NOISE)
    cells = float(np.sum(boxes[:, 0, 1] - boxes[:, 0, 0] + 1))
    assert p["identity(laplace)"].expected_error == pytest.approx(
        release.metadata.noise["cell_variance"] * cells, rel=1e-12
    )


def test_upto_workload_counts_every_query_once_and_privelet_matches_on_it() -> None:
    # upto:2 on (ordinal 4, nominal 3): every (range or all) x (category or all) box, once.
    s = mixed()
    ranges = [tuple(iv) for iv in all_intervals(4)]
    cats = [(i, i) for i in range(3)] + [(0, 2)]
    boxes = np.array([[r, c] for r, c in itertools.product(ranges, cats)])
    explicit = from_boxes(boxes, (4, 3))
    w = attribute_queries(2, "r4,c3")
    assert w.size == len(boxes) == 10 * 4
    assert np.allclose(w.gram.dense(), explicit.gram.dense())
    # and at most one attribute constrained: the full box appears once
    one = [b for b in boxes if tuple(b[0]) == (0, 3) or tuple(b[1]) == (0, 2)]
    w1 = attribute_queries(1, "r4,c3")
    assert w1.size == len(one) == 10 + 3
    assert np.allclose(w1.gram.dense(), from_boxes(np.array(one), (4, 3)).gram.dense())
    p = by_label(plan_mechanisms(s, "upto:2", 1.0, mechanisms=["privelet"]))
    mech = PriveletPlus(1.0, plain_attributes=(), neighbour="add_remove")
    v = privelet_coefficient_variance(1.0, mech, s)
    brute = PriveletVariance(v, mech.plan(s).axes).variance_many(boxes).sum()
    assert p["privelet"].expected_error == pytest.approx(brute, rel=1e-10)


def test_matrix_candidates_give_the_error_the_release_reports() -> None:
    s = line(16)
    p = plan_mechanisms(
        s, "prefix:16", 1.0, 1e-6, mechanisms=["matrix"], strategies=["hierarchical", "wavelet"]
    )
    for c in p.exact():
        release = c.build().release(Histogram(s, np.zeros(16, int)), random_state=0)
        assert c.expected_error == pytest.approx(
            release.metadata.noise["expected_total_squared_error"], rel=1e-12
        )
        assert c.error_at is not None and c.error_at(1.0) == pytest.approx(c.expected_error)


def test_datacube_error_equals_the_release_variances() -> None:
    s = Schema.from_dict(
        {
            "attributes": [
                {"name": n, "kind": "nominal", "categories": ["0", "1", "2"][:k]}
                for n, k in (("a", 2), ("b", 3), ("c", 2))
            ]
        }
    )
    p = plan_mechanisms(s, "marginals:2", 1.0, mechanisms=["datacube"])
    cands = p.exact()
    assert len(cands) == 4
    cats = {"a": ["0", "1"], "b": ["0", "1", "2"], "c": ["0", "1"]}
    queries = [
        {x: vx, y: vy}
        for x, y in itertools.combinations("abc", 2)
        for vx in cats[x]
        for vy in cats[y]
    ]
    for c in cands:
        release = c.build().release(Histogram(s, np.zeros((2, 3, 2), int)), random_state=0)
        assert c.expected_error == pytest.approx(float(release.variance_many(queries).sum()))


def test_simulated_total_error_matches_the_exact_expectation() -> None:
    # 400 seeded Privelet+ releases of a 2-D schema; the mean total squared error over upto:2
    # must match the planner's exact expectation. The per-release total T has a finite variance;
    # the mean of 400 has standard error sd(T)/20 (estimated from the sample): 5 standard errors
    # is a false-failure rate below 1e-6 (normal approximation of a mean of 400 i.i.d. totals).
    s = mixed()
    c = by_label(plan_mechanisms(s, "upto:2", 1.0, mechanisms=["privelet"]))["privelet"]
    ranges = [tuple(iv) for iv in all_intervals(4)]
    cats = [(i, i) for i in range(3)] + [(0, 2)]
    boxes = np.array([[r, q] for r, q in itertools.product(ranges, cats)])
    counts = np.arange(12).reshape(4, 3)
    truth = np.array([counts[a : b + 1, u : v + 1].sum() for (a, b), (u, v) in boxes])
    mech = c.build()
    totals = []
    for seed in range(400):
        r = mech.release(Histogram(s, counts), random_state=seed)
        cells = r.counts
        est = np.array([cells[a : b + 1, u : v + 1].sum() for (a, b), (u, v) in boxes])
        totals.append(float(np.sum((est - truth) ** 2)))
    t = np.array(totals)
    assert abs(t.mean() - c.expected_error) < 5 * t.std(ddof=1) / math.sqrt(len(t))


def test_benchmark_candidates_are_listed_and_never_recommended_as_exact() -> None:
    s = Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "loc",
                    "kind": "spatial",
                    "columns": ["lat", "lon"],
                    "bbox": [0, 0, 1, 1],
                    "resolution": [8, 8],
                }
            ]
        }
    )
    p = plan_mechanisms(s, "allrange", 1.0, strategies=["identity", "hierarchical"])
    bench = [c for c in p.candidates if c.basis == "benchmark"]
    assert {c.mechanism for c in bench} >= {"htf", "privtree", "quadtree", "kdtree", "ug", "ag"}
    for c in bench:
        if c.mechanism in ("dawa", "ahp", "mwem"):  # the DPBench figures, below
            continue
        assert math.isnan(c.expected_error) and c.benchmark is not None
        assert "experiments/docs/location.md" in c.benchmark["source"]
        assert c.benchmark["command"].startswith("python -m experiments.spatial")
    assert p.recommended.basis == "exact"
    assert "Not compared" in p.reason and "privtree" in p.reason


def test_group_sizes_recommend_from_benchmark_figures_and_say_so() -> None:
    p = plan_mechanisms(line(4), "group-sizes", 1.0)
    assert {c.basis for c in p.candidates} == {"benchmark"}
    assert p.recommended.mechanism == "census-hierarchy"
    assert p.recommended.params == {"method": "cdp_approx"}
    assert "benchmark figure only" in p.reason


def test_planning_reads_no_data_and_touches_no_ledger(tmp_path: Path) -> None:
    home = Path(os.environ["DPCUBE_HOME"])
    before = sorted(home.rglob("*")) if home.exists() else []
    plan_mechanisms(mixed(), "upto:1", 0.5, 1e-6)
    after = sorted(home.rglob("*")) if home.exists() else []
    assert before == after


def test_bad_requests_are_refused_clearly() -> None:
    with pytest.raises(dpcube.DPCubeError, match="unknown mechanism 'nope'"):
        plan_mechanisms(line(4), "allrange:4", 1.0, mechanisms=["nope"])
    with pytest.raises(dpcube.DPCubeError, match="has 8 cells but the schema's grid"):
        plan_mechanisms(line(4), "allrange:8", 1.0)
    with pytest.raises(dpcube.DPCubeError, match="epsilon"):
        plan_mechanisms(line(4), "allrange:4", -1.0)


def test_large_grid_path_equals_the_matrix_plan_on_a_small_one() -> None:
    # A sum-of-Kronecker workload: on a small grid the matrix plan makes it dense; the large-grid
    # path (never dense) must give the same error, trace and sensitivity.
    from dpcube.mechanisms.matrix.plan import plan as matrix_plan
    from dpcube.planning.candidates import kronecker_strategy_row
    from dpcube.planning.workload import resolve_planning_workload

    w = resolve_planning_workload("upto:1", mixed())
    for name in ("identity", "hierarchical"):
        dense = matrix_plan(w, 0.8, None, [name])["strategies"][name]
        kron = kronecker_strategy_row(name, w, 0.8, None, "add_remove")
        for key in ("error", "trace", "sensitivity", "support"):
            assert kron[key] == pytest.approx(dense[key], rel=1e-10)


def test_upto_boxes_list_exactly_the_upto_workload() -> None:
    from dpcube.planning.workload import upto_boxes

    for k in (0, 1, 2, 3):
        w = attribute_queries(k, "r3,t4@0-1.2-3,r2x2")
        boxes = upto_boxes(k, "r3,t4@0-1.2-3,r2x2")
        assert len(boxes) == w.size
        assert np.allclose(from_boxes(boxes, w.dims).gram.dense(), w.gram.dense())


def test_privelet_error_with_a_hierarchy_equals_its_variance_model() -> None:
    # A nominal hierarchy (mean subtraction in the inverse) and an ordinal axis, upto:2: the
    # Kronecker trace must equal the sum of PriveletVariance over the listed queries.
    from dpcube.planning.workload import resolve_planning_workload, workload_boxes

    s = Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "ordinal", "range": [0, 7], "width": 1},
                {
                    "name": "job",
                    "kind": "nominal",
                    "hierarchy": {
                        "P": {"E": None, "D": None},
                        "S": {"C": None, "R": None, "T": None},
                    },
                },
            ]
        }
    )
    w = resolve_planning_workload("upto:2", s)
    boxes = workload_boxes(w)
    assert boxes is not None and len(boxes) == w.size
    for name, plain in (("privelet", ()), ("privelet-plus", None)):
        c = by_label(plan_mechanisms(s, "upto:2", 0.9, mechanisms=[name]))[name]
        mech = PriveletPlus(0.9, plain_attributes=plain, neighbour="add_remove")
        v = privelet_coefficient_variance(0.9, mech, s)
        brute = PriveletVariance(v, mech.plan(s).axes).variance_many(boxes).sum()
        assert c.expected_error == pytest.approx(brute, rel=1e-10)


def test_marginal_workloads_are_listed_as_their_cells() -> None:
    from dpcube.planning.workload import workload_boxes
    from dpcube.workloads import parse_workload

    for spec in ("marginals:1:3x2x4", "marginals:2:3x2x4", "marginals:0:3x2"):
        w = parse_workload(spec)
        boxes = workload_boxes(w)
        assert boxes is not None and len(boxes) == w.size
        assert np.allclose(from_boxes(boxes, w.dims).gram.dense(), w.gram.dense())


def test_pure_dp_matrix_strategies_stay_candidates_under_delta() -> None:
    # Laplace noise is (epsilon, delta)-DP for every delta: with delta each strategy is listed
    # under both noises, the Laplace one charging no delta and erring exactly as without delta.
    s = line(16)
    with_delta = by_label(
        plan_mechanisms(
            s, "allrange:16", 1.0, 1e-6, mechanisms=["matrix"], strategies=["hierarchical"]
        )
    )
    without = by_label(
        plan_mechanisms(
            s, "allrange:16", 1.0, None, mechanisms=["matrix"], strategies=["hierarchical"]
        )
    )
    laplace, gaussian = (
        with_delta["matrix(hierarchical, laplace)"],
        with_delta["matrix(hierarchical)"],
    )
    assert laplace.delta is None and laplace.params["noise"] == "laplace"
    assert gaussian.delta == 1e-6 and gaussian.params["noise"] == "gaussian"
    assert laplace.expected_error == pytest.approx(without["matrix(hierarchical)"].expected_error)
    assert laplace.build().charged_delta is None


def test_plan_with_delta_recommends_laplace_where_it_wins() -> None:
    # AllRange(48) at epsilon 1, delta 1e-6: the optimised strategy under Laplace noise (30,636)
    # beats identity under Laplace (36,090) and every Gaussian strategy (gauss-opt 162,367).
    p = plan_mechanisms(line(48), "allrange:48", 1.0, 1e-6, mechanisms=["matrix", "identity"])
    assert p.recommended.label == "matrix(opt, laplace)"
    assert p.recommended.expected_error == pytest.approx(30636.1, rel=1e-4)
    assert by_label(p)["identity(laplace)"].expected_error > p.recommended.expected_error
