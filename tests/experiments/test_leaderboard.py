"""``python -m experiments.leaderboard``: structure of the table on tiny synthetic input (--quick), the
DPBench workload and error measure, and the refusals of bad flags."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from dpcube.errors import DataError, UsageError
from experiments import RUNNABLE
from experiments import leaderboard as lb


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("leaderboard")
    assert lb.main(["--quick", "--out", str(out)]) == 0
    return out


def test_listed_as_an_experiment() -> None:
    assert "leaderboard" in RUNNABLE


def test_quick_board_structure(quick_run: Path) -> None:
    board = _read(quick_run / "leaderboard.csv")
    results = _read(quick_run / "results.csv")
    # 2 synthetic 1-D sets x 2 workloads + 2 synthetic 2-D sets x 1 workload, at 2 epsilons.
    assert len(board) == (2 * 2 + 2) * 2
    for row in board:
        key = (row["dataset"], row["workload"], row["epsilon"])
        cands = [r for r in results if (r["dataset"], r["workload"], r["epsilon"]) == key]
        assert len(cands) == int(row["candidates"]) >= 2
        planner = [r for r in cands if r["is_planner"] == "True"]
        oracle = [r for r in cands if r["is_oracle"] == "True"]
        assert len(planner) == 1 and len(oracle) == 1
        errors = [float(r["mean_error"]) for r in cands]
        # The oracle is the least mean error in hindsight; the planner row is one of the candidates.
        assert float(oracle[0]["mean_error"]) == min(errors)
        assert planner[0]["mechanism"] == row["planner"]
        assert oracle[0]["mechanism"] == row["oracle"]
        ratio = float(row["ratio"])
        assert ratio >= 1.0
        assert ratio == pytest.approx(
            float(row["planner_error"]) / float(row["oracle_error"]), rel=1e-5
        )
        # Data-independent exactly when the oracle's error does not depend on the data.
        assert (row["data_independent"] == "True") == (oracle[0]["basis"] == "exact")
        if row["data_independent"] == "True":
            assert (row["goal_met"] == "True") == (ratio <= lb.GOAL_RATIO)
        else:
            assert row["goal_met"] == ""
        assert all(int(r["trials"]) == 2 for r in cands)
    md = (quick_run / "leaderboard.md").read_text()
    assert "**Goal**" in md and md.count("\n| synthetic-") == len(board)


def test_quick_touches_no_ledger(quick_run: Path) -> None:
    import os

    home = Path(os.environ["DPCUBE_HOME"])
    assert not (home / "ledgers").exists() or not any((home / "ledgers").iterdir())


def test_prefix_and_random_boxes() -> None:
    assert lb.prefix_boxes(4)[:, 0].tolist() == [[0, 0], [0, 1], [0, 2], [0, 3]]
    a = lb.dpbench_random_boxes((256, 256), 2000)
    assert a.shape == (2000, 2, 2)
    assert np.array_equal(a, lb.dpbench_random_boxes((256, 256), 2000))  # seeded (9001)
    # DPBench's order of draws: side lengths of the first query, then its corner, per axis.
    rng = np.random.RandomState(lb.DPBENCH_SEED)
    sides = [rng.randint(1, 257), rng.randint(1, 257)]
    lo = [rng.randint(0, 256 - s + 1) for s in sides]
    assert a[0].tolist() == [[lo[0], lo[0] + sides[0] - 1], [lo[1], lo[1] + sides[1] - 1]]
    # Side lengths are uniform in 1..d: their mean is (d + 1) / 2 = 128.5 within 5 standard
    # errors (sd of U{1..256} ~ 73.9, / sqrt(4000) = 1.17).
    sizes = a[:, :, 1] - a[:, :, 0] + 1
    assert abs(sizes.mean() - 128.5) < 5 * 1.17
    assert a.min() >= 0 and a.max() <= 255


def test_scaled_error_and_coarsen() -> None:
    assert lb.scaled_l2_error(np.array([3.0, 0.0]), np.array([0.0, 4.0]), 10.0) == 0.25
    assert lb.coarsen(np.arange(16).reshape(4, 4), (2, 2)).tolist() == [[10, 18], [42, 50]]
    with pytest.raises(DataError, match="not a multiple"):
        lb.coarsen(np.arange(6), (4,))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--quick", "--data-dir", "x"], "drop --data-dir"),
        (["--quick", "--size-1d", "64"], "drop --size-1d"),
        (["--quick", "--trials", "0"], "at least 1"),
        (["--quick", "--epsilons", "0.1,-1"], "positive"),
        (["--quick", "--workloads", "allrange"], "unknown workload"),
        (["--data-dir", "x", "--size-1d", "1000"], "must divide 4096"),
        (["--data-dir", "x", "--size-2d", "100"], "must divide 256"),
        (["--data-dir", "x", "--datasets", "NOPE"], "unknown NOPE"),
        (["--quick", "--no-1d", "--no-2d"], "nothing to run"),
        ([], "give --data-dir"),
    ],
)
def test_bad_flags_refused(argv: list[str], message: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=message):
        lb.main([*argv, "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_foreign_out_directory_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        lb.prepare_out(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert not (tmp_path / lb.MARKER).exists()


@pytest.mark.data
def test_dpbench_files_load(data_dir: Path) -> None:
    one = lb.load_dpbench(data_dir, {"HEPTH": lb.DPBENCH_1D["HEPTH"]}, "1D", (1024,))[0]
    raw = np.load(data_dir / "dpbench" / "1D" / lb.DPBENCH_1D["HEPTH"])
    assert one.counts.shape == (1024,) and one.counts.sum() == raw.sum()
    grid = lb.load_dpbench(data_dir, {"GOWALLA": lb.DPBENCH_2D["GOWALLA"]}, "2D", (256, 256))[0]
    assert grid.counts.shape == (256, 256)


def test_memoized_strategies_reuse_and_restore() -> None:
    from dpcube.mechanisms.matrix import mechanism as mm
    from dpcube.mechanisms.matrix import plan as mp

    original = mm.make_strategy
    task = lb.make_task("prefix", (16,))
    with lb.memoized_strategies():
        first = mm.make_strategy("hierarchical", (16,), task.workload)
        assert mp.make_strategy("hierarchical", (16,), task.workload) is first
        assert mm.make_strategy("wavelet", (16,), task.workload) is not first
    assert mm.make_strategy is original and mp.make_strategy is original


def test_pooled_exact_uses_unscaled_errors() -> None:
    def row(dataset: str, mech: str, err: float, records: int, mse: float, planner: bool) -> dict:
        return {
            "dims": "4", "workload": "prefix", "epsilon": 1.0, "dataset": dataset,
            "mechanism": mech, "basis": "exact", "mean_error": err, "records": records,
            "mean_squared_error": mse, "is_planner": planner,
        }  # fmt: skip

    # Unscaled L2 (error x records): a = (1 + 1) / 2 = 1, b = (0.5 + 0.5) / 2 = 0.5.
    rows = [
        row("D1", "a", 0.1, 10, 4.0, True),
        row("D1", "b", 0.05, 10, 1.0, False),
        row("D2", "a", 0.01, 100, 2.0, True),
        row("D2", "b", 0.005, 100, 1.0, False),
    ]
    (pooled,) = lb.pooled_exact(rows)
    assert pooled["best_l2"] == "b" and pooled["ratio_l2"] == pytest.approx(2.0)
    assert pooled["best_mse"] == "b" and pooled["ratio_mse"] == pytest.approx(3.0)


@pytest.mark.parametrize(
    "dims, kind, delta",
    [
        ((32,), "prefix", None),
        ((32,), "random-range", None),
        ((8, 8), "random-range", None),
        ((32,), "prefix", 1e-6),
    ],
)
def test_plan_at_another_epsilon_is_the_planners_plan_there(
    dims: tuple[int, ...], kind: str, delta: float | None
) -> None:
    from dpcube.planning import plan_mechanisms

    task = lb.make_task(kind, dims, queries=50)
    schema = lb.grid_schema(dims)
    with lb.memoized_strategies():
        first = plan_mechanisms(schema, task.workload, 0.1, delta)
        for eps in (0.01, 1.0, 3.0):
            moved = lb.plan_at(first, eps)
            direct = plan_mechanisms(schema, task.workload, eps, delta)
            assert moved is not None
            assert [c.label for c in moved.candidates] == [c.label for c in direct.candidates]
            for a, b in zip(moved.candidates, direct.candidates, strict=True):
                assert a.epsilon == b.epsilon == eps and a.basis == b.basis
                if a.basis == "exact":  # the same closed forms, evaluated at eps: equal to rounding
                    assert a.expected_error == pytest.approx(b.expected_error, rel=1e-9)
            assert moved.recommended.label == direct.recommended.label
            assert moved.recommended.build().epsilon == eps


def test_plan_at_refuses_a_candidate_without_error_at() -> None:
    import dataclasses

    from dpcube.planning import plan_mechanisms

    task = lb.make_task("prefix", (16,))
    plan = plan_mechanisms(lb.grid_schema((16,)), task.workload, 1.0)
    exact = [i for i, c in enumerate(plan.candidates) if c.basis == "exact"]
    broken = list(plan.candidates)
    broken[exact[0]] = dataclasses.replace(broken[exact[0]], error_at=None)
    assert lb.plan_at(dataclasses.replace(plan, candidates=broken), 0.5) is None
