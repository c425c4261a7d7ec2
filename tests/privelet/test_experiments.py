"""The experiment helpers of ``python -m experiments.privelet`` (the query workload and metrics of
Xiao, Wang and Gehrke, ICDE 2010, Sec. VII) and the command itself."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from dpcube import Histogram
from experiments.privelet import (
    accuracy_on_data,
    coverage,
    linear_fit,
    load_br2000,
    main,
    quintiles,
    random_boxes,
    summarise_timing,
    table3_schema,
    timing,
    timing_schema,
)


def test_random_boxes_follow_the_workload() -> None:
    schema = table3_schema("brazil")
    boxes = random_boxes(schema, 4000, np.random.default_rng(0))
    full = np.array(schema.shape) - 1
    constrained = (boxes[:, :, 0] != 0) | (boxes[:, :, 1] != full[None, :])
    assert constrained.sum(axis=1).max() <= 4
    assert np.all(boxes[:, :, 0] <= boxes[:, :, 1]) and np.all(boxes[:, :, 1] <= full[None, :])
    # a gender predicate is always one of the two genders (a non-root node of root -> {F, M})
    gender = boxes[:, 1]
    assert set(map(tuple, gender.tolist())) == {(0, 0), (1, 1), (0, 1)}
    # occupation predicates are nodes of the hierarchy: leaves or whole groups
    h = schema["occupation"].hierarchy
    nodes = {h.interval(n) for n in h.nodes}
    assert set(map(tuple, boxes[:, 2].tolist())) <= nodes
    cov = coverage(schema, boxes)
    assert np.all((cov > 0) & (cov <= 1))


def test_quintiles_are_equal_count_rank_groups() -> None:
    key = np.array([5.0, 1, 1, 1, 3, 2, 9, 0, 0, 7])
    groups = quintiles(key)
    assert [len(g) for g in groups] == [2] * 5
    assert sorted(np.concatenate(groups).tolist()) == list(range(10))
    assert key[groups[0]].max() <= key[groups[1]].min()


def test_accuracy_rows_on_synthetic_data() -> None:
    schema = timing_schema(2**8)
    hist = Histogram(schema, np.random.default_rng(1).poisson(5, size=schema.shape))
    square, relative = accuracy_on_data("tiny", schema, hist, queries=500, runs=2, seed=3)
    assert len(square) == len(relative) == 4 * 3 * 5  # epsilons x methods x quintiles
    basic = [r for r in square if r["method"] == "Basic" and r["epsilon"] == 1.0]
    # Basic's expected square error is the number of cells times the per-cell variance
    assert all(r["expected_square_error"] > 0 for r in basic)
    assert basic[-1]["avg_coverage"] > basic[0]["avg_coverage"]
    assert basic[-1]["expected_square_error"] > 10 * basic[0]["expected_square_error"]


def test_br2000_loader(data_dir: Path) -> None:
    schema, hist = load_br2000(data_dir)
    assert schema.shape == (22, 2, 10, 16)
    assert hist.total == 38_000
    assert schema["occupation"].hierarchy.height == 4


def test_command_writes_tables_and_plots(data_dir: Path, tmp_path: Path) -> None:
    code = main(
        ["--data-dir", str(data_dir), "--out", str(tmp_path), "--datasets", "br2000,table3-us",
         "--queries", "300", "--runs", "1", "--no-timing"]
    )  # fmt: skip
    assert code == 0
    for name in ("square_error.csv", "relative_error.csv", "summary.md", "square_error_br2000.png"):
        assert (tmp_path / name).stat().st_size > 0
    with (tmp_path / "square_error.csv").open() as f:
        rows = list(csv.DictReader(f))
    us = [r for r in rows if r["dataset"] == "table3-us" and r["method"] == "Privelet+"]
    assert {r["plain_attributes"] for r in us} == {"age,gender"}
    assert all(math.isfinite(float(r["expected_square_error"])) for r in us)
    with pytest.raises(Exception, match="unknown data set"):
        main(
            [
                "--data-dir",
                str(data_dir),
                "--out",
                str(tmp_path),
                "--datasets",
                "nope",
                "--no-timing",
            ]
        )


def test_timing_rows_and_linear_fit() -> None:
    rows = timing([2**4, 2**6, 2**8], [1000], 2**4, 2000, seed=0)
    assert [(r["sweep"], r["method"]) for r in rows[:2]] == [("n", "Basic"), ("n", "Privelet")]
    assert {r["m"] for r in rows if r["sweep"] == "m"} == {2**4, 3**4, 4**4}
    assert all(r["release_seconds"] > 0 and r["count_cpu_seconds"] >= 0 for r in rows)
    lines = summarise_timing(rows)
    assert any("release vs coefficients, Privelet" in line and "R^2" in line for line in lines)
    assert linear_fit([1, 2, 3, 4], [1, 3, 2, 4])[1] == pytest.approx(0.64)


def test_timing_sweeps_keep_their_shared_point_apart() -> None:
    """The m-sweep's point at m_fixed (n = n_fixed) was labelled as an n-sweep point
    when n_fixed was one of the n values (timing.csv had six n points and four m points)."""
    rows = timing([2**4, 2**8], [500, 1000], 2**4, 1000, seed=0)
    sweeps = [(r["sweep"], r["m"], r["n"]) for r in rows if r["method"] == "Basic"]
    assert sweeps == [("n", 2**4, 500), ("n", 2**4, 1000), ("m", 2**4, 1000), ("m", 4**4, 1000)]
