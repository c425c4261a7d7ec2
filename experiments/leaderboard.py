"""``python -m experiments.leaderboard``: the planner's choice against every candidate on DPBench.

For each (data set, workload, epsilon) every candidate that
:func:`dpcube.planning.plan_mechanisms` lists as applicable is released ``--trials`` times on the
data, its error measured, and the planner's recommendation compared with the *oracle*, the
candidate with the least mean error in hindsight.

Data: the DPBench histograms (Hay et al., "Principled Evaluation of Differentially Private
Algorithms using DPBench", SIGMOD 2016; files of ``dpcomp_core/datafiles``): the 18 1-D count
vectors of 4096 bins and the 10 2-D grids of 256 x 256. Both are used at their native size by
default (``--size-1d`` and ``--size-2d`` coarsen them by summing adjacent bins; DPBench itself
varies the domain size, 256 to 4096 in 1-D). At 4,096 1-D cells ``opt`` (OPT_0) runs on the
workload's intervals without an n x n product (:class:`~dpcube.linalg.boxes.IntervalGram`), a
matrix mechanism factors its strategy's ``AᵀA`` once for all its releases, and a plan is made once
per workload and moved to the other epsilons (:func:`plan_at`). On the 2-D grids, above
4,096 cells, the planner keeps the box workload's Gram as its boxes
(:class:`~dpcube.linalg.boxes.BoxGram`) and plans the Kronecker strategies, Privelet and ``opt``
(OPT_⊗ on the boxes) per axis. Counts are the real counts, at their own scale (DPBench also
resamples them to other scales; we do not).

Workloads (DPBench's, seeded and reproducible):

- 1-D ``prefix``: all n prefix queries ``[0, c]`` (DPBench ``Prefix1D``);
- 1-D ``random-range`` and 2-D ``random-range``: 2000 random ranges drawn as DPBench's
  ``RandomRange(None, shape, 2000, seed=9001)`` draws them: ``numpy.random.RandomState(9001)``;
  for each query first a side length uniform in ``1..d`` per axis, then a lower corner uniform
  among the positions where the box fits, per axis.

Error (DPBench's ``TypeI.L2``, the scaled average per-query L2 error): for the true answers
``W x`` and the released ones ``W x̂`` of the |W| queries and the data's scale s (its number of
records), ``‖W x − W x̂‖₂ / (|W| · s)``. Each cell of the table is the mean over the trials with
its standard error (the sample standard deviation over the trials / √T: it covers the noise of
the releases only, the data and the queries being fixed).

Releases are seeded (``random_state``): never for publication, and no ledger is touched
(``account=False``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import io
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube import progress
from dpcube.errors import DataError, DPCubeError, UsageError
from dpcube.files import write_atomic
from dpcube.histogram import Histogram
from dpcube.release.cells import box_sums, prefix_sums
from dpcube.schema import Schema
from dpcube.workloads import Workload, from_boxes, prefix

IntArray = NDArray[np.int64]

#: DPBench 1-D data sets: name -> file under ``dpbench/1D`` (dpbench/README.md).
DPBENCH_1D: dict[str, str] = {
    "HEPTH": "HEPTH.n4096.npy",
    "ADULT": "ADULTFRANK.n4096.npy",
    "INCOME": "INCOME.n4096.npy",
    "MEDCOST": "MEDCOST.n4096.npy",
    "NETTRACE": "NETTRACE.n4096.npy",
    "PATENT": "PATENT.n4096.npy",
    "SEARCHLOGS": "SEARCHLOGS.n4096.npy",
    "BIDS-FJ": "bids_j.npy",
    "BIDS-FM": "bids_m.npy",
    "BIDS-ALL": "bids.npy",
    "MD-SAL": "GrossCompenMDSalary1.npy",
    "MD-SAL-FA": "GrossCompenMDSalary2_filtered.npy",
    "LC-REQ-F1": "RejectStats_0_4096_no_outliers_filter_7_1.npy",
    "LC-REQ-F2": "RejectStats_0_4096_no_outliers_filter_7_2.npy",
    "LC-REQ-ALL": "RejectStats_0_4096_no_outliers.npy",
    "LC-DTIR-F1": "RejectStats_4_4096_no_outliers_filter_7_1.npy",
    "LC-DTIR-F2": "RejectStats_4_4096_no_outliers_filter_7_2.npy",
    "LC-DTIR-ALL": "RejectStats_4_4096_no_outliers.npy",
}

#: DPBench 2-D data sets: name -> file under ``dpbench/2D``.
DPBENCH_2D: dict[str, str] = {
    "SF-CABS-E": "cabspottingE_256_256.npy",
    "SF-CABS-S": "cabspottingS_256_256.npy",
    "GOWALLA": "checkin_256_256.npy",
    "BJ-CABS-E": "BeijingTaxiE_256_256.npy",
    "BJ-CABS-S": "BeijingTaxiS_256_256.npy",
    "ADULT-2D": "Adult_2D_256_256.npy",
    "MD-SAL-2D": "MDSalary2D_256_256.npy",
    "LC-2D": "Loan_2D_256_256.npy",
    "STROKE": "Stroke_2D_256_256.npy",
    "TWITTER": "twitter_256_256.npy",
}

EPSILONS = (0.01, 0.1, 1.0)
#: DPBench's random-range workload: 2000 queries from RandomState(9001).
RANGE_QUERIES = 2000
DPBENCH_SEED = 9001
#: Planner/oracle ratio allowed on a data-independent row.
GOAL_RATIO = 1.1
#: Marks an output directory as written by this command (the only non-empty one it writes into).
MARKER = ".dpcube-leaderboard"
#: Grid sizes of the synthetic --quick input.
QUICK_1D, QUICK_2D = 32, 8
OUTPUTS = ("results.csv", "leaderboard.csv", "leaderboard.md")


# ------------------------------------------------------------------------------------------------
# Data, workloads, error
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataSet:
    """One histogram of the benchmark: its DPBench name and its (possibly coarsened) counts."""

    name: str
    counts: IntArray


def coarsen(counts: NDArray[Any], shape: Sequence[int]) -> IntArray:
    """Sum blocks of adjacent cells so that ``counts`` gets ``shape`` (each axis must divide).

    >>> coarsen(np.arange(8), (4,)).tolist()
    [1, 5, 9, 13]
    >>> coarsen(np.ones((4, 4)), (2, 2)).tolist()
    [[4, 4], [4, 4]]
    """
    c = np.asarray(counts)
    if len(shape) != c.ndim:
        raise DataError(f"cannot coarsen a grid of shape {c.shape} to {tuple(shape)}")
    for axis, target in enumerate(shape):
        if target < 1 or c.shape[axis] % target:
            raise DataError(
                f"axis {axis} of size {c.shape[axis]} is not a multiple of {target}; "
                "choose a size that divides it (a power of two up to it)"
            )
        factor = c.shape[axis] // target
        c = c.reshape(*c.shape[:axis], target, factor, *c.shape[axis + 1 :]).sum(axis=axis + 1)
    return np.asarray(c, dtype=np.int64)


def load_dpbench(
    data_dir: Path, files: dict[str, str], folder: str, shape: Sequence[int]
) -> list[DataSet]:
    """Read the DPBench ``.npy`` files of one folder (``1D`` or ``2D``), coarsened to ``shape``.

    The 2-D grids are stored as float64 with whole values; they are rounded (checked whole).
    """
    out = []
    for name, file in files.items():
        path = data_dir / "dpbench" / folder / file
        try:
            raw = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise DataError(
                f"cannot read the DPBench file {str(path)!r}: {exc}; "
                "give --data-dir the folder that holds dpbench/ (e.g. ../shared/data)"
            ) from None
        values = np.asarray(raw, dtype=np.float64)
        if values.ndim != len(shape) or np.any(values < 0) or np.any(values != np.rint(values)):
            raise DataError(
                f"{str(path)!r} is not a {len(shape)}-D array of whole non-negative counts"
            )
        out.append(DataSet(name, coarsen(np.rint(values).astype(np.int64), shape)))
    return out


def prefix_boxes(n: int) -> IntArray:
    """DPBench ``Prefix1D``: the n queries ``[0, c]``, as boxes (n, 1, 2).

    >>> prefix_boxes(3)[:, 0].tolist()
    [[0, 0], [0, 1], [0, 2]]
    """
    ends = np.arange(n, dtype=np.int64)
    return np.stack([np.zeros(n, dtype=np.int64), ends], axis=1).reshape(n, 1, 2)


def dpbench_random_boxes(dims: Sequence[int], count: int, seed: int = DPBENCH_SEED) -> IntArray:
    """DPBench's ``RandomRange(None, dims, count, seed)`` queries, as boxes (count, d, 2).

    With ``numpy.random.RandomState(seed)``, each query draws a side length uniform in
    ``1..d`` on every axis, then a lower corner uniform in ``0..d - side`` on every axis (the
    order of DPBench's ``randomQueryShapes`` and ``placeRandomly``).

    >>> b = dpbench_random_boxes((8, 8), 500, seed=1)
    >>> bool(np.all(b[:, :, 0] >= 0) and np.all(b[:, :, 1] <= 7) and np.all(b[:, :, 0] <= b[:, :, 1]))
    True
    """
    rng = np.random.RandomState(seed)
    boxes = np.zeros((count, len(dims), 2), dtype=np.int64)
    for q in range(count):
        sides = [int(rng.randint(1, d + 1)) for d in dims]
        for axis, (d, side) in enumerate(zip(dims, sides, strict=True)):
            lo = int(rng.randint(0, d - side + 1))
            boxes[q, axis] = (lo, lo + side - 1)
    return boxes


def scaled_l2_error(truth: NDArray[Any], answers: NDArray[Any], scale: float) -> float:
    """DPBench's scaled average per-query L2 error ``‖truth − answers‖₂ / (|W| · scale)``.

    >>> scaled_l2_error(np.array([10.0, 20.0]), np.array([13.0, 24.0]), 100.0)
    0.025
    """
    diff = np.asarray(truth, dtype=np.float64) - np.asarray(answers, dtype=np.float64)
    return float(np.linalg.norm(diff) / (diff.size * scale))


def box_answers(release: Any, boxes: IntArray) -> NDArray[np.float64]:
    """Answers of a release to box queries: from its cells, or its own box path (leaf releases)."""
    answer_boxes = getattr(release, "answer_boxes", None)
    if callable(answer_boxes):
        return np.asarray(answer_boxes(boxes), dtype=np.float64)
    counts = np.asarray(release.counts, dtype=np.float64)
    return np.asarray(box_sums(prefix_sums(counts), boxes), dtype=np.float64)


def grid_schema(dims: Sequence[int]) -> Schema:
    """The schema of a DPBench grid: one ordinal axis of bins ``0..n-1`` (1-D), or one spatial
    attribute of ``rows x cols`` unit cells (2-D), so that the spatial mechanisms apply."""
    if len(dims) == 1:
        attribute = {"name": "x", "kind": "ordinal", "range": [0, dims[0] - 1], "width": 1}
    else:
        rows, cols = dims
        attribute = {
            "name": "loc",
            "kind": "spatial",
            "columns": ["lat", "lon"],
            "bbox": [0.0, 0.0, float(rows), float(cols)],
            "resolution": [rows, cols],
        }
    return Schema.from_dict({"attributes": [attribute]})


@dataclass(frozen=True)
class Task:
    """One workload on one grid: its name, the queries as boxes, and the planner's workload."""

    name: str
    dims: tuple[int, ...]
    boxes: IntArray
    workload: Workload


def make_task(kind: str, dims: tuple[int, ...], queries: int = RANGE_QUERIES) -> Task:
    """``prefix`` (1-D) or ``random-range`` on the grid ``dims``."""
    if kind == "prefix":
        if len(dims) != 1:
            raise DataError("the prefix workload is 1-D only (DPBench Prefix1D)")
        return Task(kind, dims, prefix_boxes(dims[0]), prefix(dims))
    if kind == "random-range":
        boxes = dpbench_random_boxes(dims, queries)
        name = f"DPBench random-range({queries}, {'x'.join(map(str, dims))}, seed={DPBENCH_SEED})"
        return Task(kind, dims, boxes, from_boxes(boxes, dims, name=name))
    raise DataError(f"unknown workload {kind!r}; use prefix or random-range")


# ------------------------------------------------------------------------------------------------
# Candidates and measurement
# ------------------------------------------------------------------------------------------------


def candidate_label(candidate: Any) -> str:
    """A short name of a planner candidate: the mechanism and its scalar parameters.

    >>> from types import SimpleNamespace
    >>> candidate_label(SimpleNamespace(mechanism="matrix", params={"strategy": "wavelet", "workload": object()}))
    'matrix(strategy=wavelet)'
    >>> candidate_label(SimpleNamespace(mechanism="identity", params={}))
    'identity'
    """
    shown = [
        f"{k}={v}"
        for k, v in sorted((candidate.params or {}).items())
        if isinstance(v, str | int | float | bool)
        and k not in ("epsilon", "delta")
        and len(str(v)) <= 40
    ]
    return f"{candidate.mechanism}({', '.join(shown)})" if shown else str(candidate.mechanism)


@dataclass
class Measured:
    """Errors of one candidate over the trials on one row."""

    label: str
    basis: str
    errors: list[float]
    cpu_seconds: float
    #: Per trial, the squared error per query ``‖W x − W x̂‖₂² / |W|`` (unscaled): the planner's
    #: objective (its expected total squared error / |W|).
    squared: list[float] = dataclasses.field(default_factory=list)

    @property
    def mean(self) -> float:
        return float(np.mean(self.errors))

    @property
    def mean_squared(self) -> float:
        return float(np.mean(self.squared)) if self.squared else math.nan

    @property
    def stderr(self) -> float:
        """Standard error of the mean over the trials (0 with one trial: unknown, not zero noise)."""
        if len(self.errors) < 2:
            return math.nan
        return float(np.std(self.errors, ddof=1) / math.sqrt(len(self.errors)))


def measure(
    mechanism: Any,
    hist: Histogram,
    boxes: IntArray,
    truth: NDArray[np.float64],
    trials: int,
    seed: int,
) -> tuple[list[float], list[float], float]:
    """Release ``trials`` times (seeds ``seed, seed + 1, ...``; seeded, unaccounted, never for
    publication) and return the DPBench error of each release, its squared error per query
    (unscaled) and the CPU seconds the releases took."""
    scale = float(hist.total) or 1.0
    errors, squared = [], []
    start = time.process_time()
    for t in range(trials):
        release = mechanism.release(hist, random_state=seed + t, account=False)
        answers = box_answers(release, boxes)
        errors.append(scaled_l2_error(truth, answers, scale))
        squared.append(float(np.mean((answers - truth) ** 2)))
    return errors, squared, time.process_time() - start


def label_of(candidate: Any) -> str:
    """The planner's label of a candidate, or :func:`candidate_label` when it has none."""
    return str(getattr(candidate, "label", "") or candidate_label(candidate))


def _recommended_index(plan: Any) -> int:
    """Position of the plan's recommendation among its candidates (a Candidate, index or label)."""
    rec = plan.recommended
    if isinstance(rec, int):
        return rec
    for i, c in enumerate(plan.candidates):
        if c is rec:
            return i
    labels = [label_of(c) for c in plan.candidates]
    for i, c in enumerate(plan.candidates):
        if c == rec or (isinstance(rec, str) and rec in (labels[i], c.mechanism)):
            return i
    raise DataError(f"the plan's recommendation {rec!r} is not one of its candidates {labels}")


class StrategyCache:
    """Matrix-mechanism strategies built once per (grid, workload, strategy name) and reused at
    every epsilon: a strategy does not depend on epsilon (the noise is scaled to it), and the
    optimised ones (``opt``, ``lsa``, ``eigen``) take seconds to minutes to build.

    The mechanism released is the candidate's, with its built strategy in place of the name and
    without the workload: once the strategy is built, the workload only adds its expected error
    and svdb to the release's metadata (``MatrixMechanism._release``), an eigendecomposition of
    the workload's Gram per release (30 s at 64 x 64 cells) that changes no released value.
    """

    def __init__(self) -> None:
        self.built: dict[tuple[Any, ...], Any] = {}

    def build(self, candidate: Any, key: tuple[Any, ...], schema: Schema) -> Any:
        """The candidate's mechanism, with the strategy built before for the same key."""
        params = getattr(candidate, "params", None) or {}
        name = params.get("strategy") if candidate.mechanism == "matrix" else None
        if not isinstance(name, str):
            return candidate.build()
        cache_key = (*key, name)
        if cache_key not in self.built:
            self.built[cache_key] = candidate.build().resolve(schema)[0]
        bare = {k: v for k, v in params.items() if k != "workload"}
        return dataclasses.replace(
            candidate, params={**bare, "strategy": self.built[cache_key]}
        ).build()


def plan_at(plan: Any, epsilon: float) -> Any | None:
    """The plan ``plan_mechanisms`` makes at ``epsilon``, from its plan at another epsilon, or None.

    Every exact candidate carries ``error_at``, the planner's own error at any epsilon (same
    delta, strategy and workload: the matrix strategies, Privelet's and identity's errors are
    their noise variance at epsilon times an epsilon-free trace), so the candidates at ``epsilon``
    are the same ones with ``expected_error = error_at(epsilon)``, ordered and recommended as
    ``plan_mechanisms`` does (:func:`dpcube.planning.plan.recommend`). This saves the
    epsilon-free work of each plan (at 4,096 cells the svdb eigendecomposition, the strategies'
    traces and Privelet's covariance: about a CPU minute). None (plan again) when an exact
    candidate has no ``error_at`` or a candidate fixes epsilon in its parameters.
    """
    from dpcube.planning.plan import _order, recommend

    moved = []
    for c in plan.candidates:
        if "epsilon" in (c.params or {}) or (c.basis == "exact" and c.error_at is None):
            return None
        error = float(c.error_at(epsilon)) if c.basis == "exact" else c.expected_error
        moved.append(dataclasses.replace(c, epsilon=float(epsilon), expected_error=error))
    moved.sort(key=_order)
    best, reason = recommend(moved)
    return dataclasses.replace(
        plan, epsilon=float(epsilon), candidates=moved, recommended=best, reason=reason
    )


@contextlib.contextmanager
def memoized_strategies() -> Iterator[None]:
    """Within the block, ``make_strategy`` returns the strategy it built before for the same name,
    grid, workload object and options, wherever it is called from (the planner at each epsilon,
    the planner's per-query variances, ``MatrixMechanism.resolve``).

    A strategy is a pure function of those arguments (the optimised ones are seeded), so this
    changes no figure; it saves rebuilding ``opt``, ``lsa`` and ``eigen`` for every epsilon.
    """
    from dpcube.mechanisms.matrix import mechanism as matrix_mechanism
    from dpcube.mechanisms.matrix import plan as matrix_plan

    original = matrix_mechanism.make_strategy
    built: dict[tuple[Any, ...], tuple[Any, Any]] = {}

    def make_strategy(name: str, dims: Any, workload: Any = None, **options: Any) -> Any:
        key = (name, tuple(dims), id(workload), tuple(sorted(options.items())))
        if key not in built:
            # The workload is kept with the strategy so that its id is not reused while cached.
            built[key] = (original(name, tuple(dims), workload, **options), workload)
        return built[key][0]

    matrix_mechanism.make_strategy = make_strategy
    matrix_plan.make_strategy = make_strategy
    try:
        yield
    finally:
        matrix_mechanism.make_strategy = original
        matrix_plan.make_strategy = original


def leaderboard(
    datasets: Sequence[DataSet],
    tasks: Sequence[Task],
    epsilons: Sequence[float],
    trials: int,
    seed: int = 0,
    planner: Callable[..., Any] | None = None,
    on_progress: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run every applicable candidate and the planner's choice on every (data set, task, epsilon).

    Returns ``results`` (one row per data set, workload, epsilon and candidate) and ``board`` (one
    row per data set, workload and epsilon: the planner's choice, the oracle, their ratio, and
    whether the row is data-independent). A plan is made once per task at its first epsilon and moved to the others (:func:`plan_at`); planning
    never reads the data. Each candidate's mechanism is built once per (task, epsilon) and reused
    across the data sets; matrix strategies once per task (:class:`StrategyCache`). A candidate
    whose build or release fails is reported (``notes`` on its board rows), not dropped silently.
    ``on_progress(results, board)`` is called after each (task, epsilon), for partial outputs.
    """
    if planner is None:
        from dpcube.planning import plan_mechanisms

        planner = plan_mechanisms
    results: list[dict[str, Any]] = []
    board: list[dict[str, Any]] = []
    strategies = StrategyCache()
    for task in tasks:
        schema = grid_schema(task.dims)
        sets = [d for d in datasets if d.counts.shape == task.dims]
        if not sets:
            continue
        truths = {
            d.name: box_sums(prefix_sums(d.counts), task.boxes).astype(np.float64) for d in sets
        }
        hists = {d.name: Histogram(schema, d.counts) for d in sets}
        first_plan = None
        for eps in epsilons:
            with progress.step(f"planning {task.name} {'x'.join(map(str, task.dims))} eps={eps}"):
                start = time.process_time()
                plan = None if first_plan is None else plan_at(first_plan, eps)
                if plan is None:
                    plan = first_plan = planner(schema, task.workload, eps)
                plan_seconds = time.process_time() - start
            recommended = _recommended_index(plan)
            runnable = [
                (i, c) for i, c in enumerate(plan.candidates) if c.basis != "not-applicable"
            ]
            notes = [
                f"{label_of(c)}: not applicable ({c.note})"
                for c in plan.candidates
                if c.basis == "not-applicable"
            ]
            built: dict[int, Any] = {}
            for i, c in runnable:
                try:
                    built[i] = strategies.build(c, (task.name, task.dims), schema)
                except (DPCubeError, MemoryError) as exc:
                    notes.append(f"{label_of(c)}: failed to build ({exc})")
            for row_index, d in enumerate(
                progress.track(sets, f"{task.name} {'x'.join(map(str, task.dims))} eps={eps}")
            ):
                row_seed = seed + 1000 * row_index
                measured: dict[int, Measured] = {}
                failed = list(notes)
                for i, c in runnable:
                    if i not in built:
                        continue
                    try:
                        errors, squared, cpu = measure(
                            built[i], hists[d.name], task.boxes, truths[d.name], trials, row_seed
                        )
                    except (DPCubeError, MemoryError) as exc:
                        failed.append(f"{label_of(c)}: release failed ({exc})")
                        continue
                    measured[i] = Measured(label_of(c), c.basis, errors, cpu, squared)
                board_row, rows = score_row(
                    d.name,
                    task,
                    eps,
                    measured,
                    recommended,
                    int(d.counts.sum()),
                    label_of(plan.candidates[recommended]),
                )
                board_row["plan_cpu_seconds"] = round(plan_seconds, 3)
                board_row["notes"] = "; ".join(failed)
                board.append(board_row)
                results.extend(rows)
            print(
                f"{task.name} {'x'.join(map(str, task.dims))} eps={eps}: {len(sets)} data sets, "
                f"{len(runnable)} candidates, plan {plan_seconds:.1f} s CPU, "
                f"{time.process_time() - start:.1f} s CPU in all",
                flush=True,
            )
            if on_progress is not None:
                on_progress(results, board)
    return results, board


def score_row(
    dataset: str,
    task: Task,
    eps: float,
    measured: dict[int, Measured],
    recommended: int,
    records: int,
    recommended_label: str = "",
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The board row (planner vs oracle) and the per-candidate rows of one (data set, task, eps).

    A row is *data-independent* when its oracle is a candidate whose error does not depend on the
    data (basis ``exact``): the planner, which knows those errors exactly, could have picked it
    without the data. Otherwise a data-dependent candidate won, which no data-free plan can know.
    If the planner's choice could not be released, its error is NaN and the goal fails.

    >>> m = {0: Measured("a", "exact", [2.0, 2.0], 0.0, [4.0, 4.0]),
    ...      1: Measured("b", "benchmark", [1.0, 1.0], 0.0, [1.0, 1.0])}
    >>> row, _ = score_row("D", Task("prefix", (4,), prefix_boxes(4), prefix((4,))), 1.0, m, 0, 10)
    >>> row["oracle"], row["ratio"], row["data_independent"], row["ratio_to_best_exact"], row["ratio_mse"]
    ('b', 2.0, False, 1.0, 4.0)
    """
    if not measured:
        raise DataError(f"no candidate could be released on {dataset} ({task.name}, eps={eps})")
    oracle = min(measured, key=lambda i: measured[i].mean)
    oracle_sq = min(measured, key=lambda i: measured[i].mean_squared)
    exact = [i for i in measured if measured[i].basis == "exact"]
    best_exact = min(exact, key=lambda i: measured[i].mean) if exact else None
    o = measured[oracle]
    p = measured.get(recommended, Measured(recommended_label or "?", "exact", [math.nan], 0.0))
    if math.isnan(p.mean):
        ratio = math.inf
    elif o.mean > 0:
        ratio = p.mean / o.mean
    else:
        ratio = 1.0 if p.mean == 0 else math.inf
    # Standard error of the ratio by the delta method, treating the two means as independent
    # (they use the same seeds, so this is conservative when their errors are correlated).
    if recommended == oracle:
        ratio_se = 0.0
    elif p.mean > 0 and o.mean > 0:
        ratio_se = ratio * math.hypot(p.stderr / p.mean, o.stderr / o.mean)
    else:
        ratio_se = math.nan
    independent = o.basis == "exact"
    to_exact = math.nan
    if best_exact is not None and measured[best_exact].mean > 0:
        to_exact = p.mean / measured[best_exact].mean
    board_row: dict[str, Any] = {
        "dataset": dataset,
        "dims": "x".join(map(str, task.dims)),
        "records": records,
        "workload": task.name,
        "epsilon": eps,
        "planner": p.label,
        "planner_basis": p.basis,
        "planner_error": p.mean,
        "planner_stderr": p.stderr,
        "oracle": o.label,
        "oracle_basis": o.basis,
        "oracle_error": o.mean,
        "oracle_stderr": o.stderr,
        "ratio": ratio,
        "ratio_se": ratio_se,
        "data_independent": independent,
        "best_exact": measured[best_exact].label if best_exact is not None else "",
        "ratio_to_best_exact": to_exact,
        "goal_met": (ratio <= GOAL_RATIO) if independent else None,
        # The planner's own objective, measured: its mean squared error per query over the least
        # one among the candidates (the oracle in that metric).
        "planner_mse": p.mean_squared,
        "oracle_mse": measured[oracle_sq].label,
        "ratio_mse": p.mean_squared / measured[oracle_sq].mean_squared
        if measured[oracle_sq].mean_squared > 0
        else math.nan,
        # The excess over the goal is more than two standard errors of the ratio: not trial noise.
        "excess_significant": bool(ratio > GOAL_RATIO and not ratio - GOAL_RATIO <= 2 * ratio_se),
        "candidates": len(measured),
    }
    rows = [
        {
            "dataset": dataset,
            "dims": board_row["dims"],
            "records": records,
            "workload": task.name,
            "epsilon": eps,
            "mechanism": m.label,
            "basis": m.basis,
            "mean_error": m.mean,
            "stderr": m.stderr,
            "mean_squared_error": m.mean_squared,
            "trials": len(m.errors),
            "cpu_seconds": round(m.cpu_seconds, 4),
            "is_planner": i == recommended,
            "is_oracle": i == oracle,
        }
        for i, m in measured.items()
    ]
    return board_row, rows


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    if value is None:
        return ""
    return str(value)


def _short(mean: float, stderr: float) -> str:
    """``mean ± stderr`` in 3 significant digits (``?`` for an unknown standard error).

    >>> _short(0.000123456, 1.2e-05)
    '0.000123 ± 1.2e-05'
    """
    return f"{mean:.3g} ± " + ("?" if math.isnan(stderr) else f"{stderr:.2g}")


def csv_text(rows: Sequence[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [])
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _fmt(v) for k, v in row.items()})
    return buffer.getvalue()


def summary_lines(board: Sequence[dict[str, Any]]) -> list[str]:
    """The goal check and the markdown table of the board."""
    independent = [r for r in board if r["data_independent"]]
    failed = [r for r in independent if not r["goal_met"]]
    dependent = [r for r in board if not r["data_independent"]]
    lines = [
        f"Rows: {len(board)}; data-independent (the oracle's error does not depend on the data): "
        f"{len(independent)}; data-dependent (a data-dependent mechanism won): {len(dependent)}.",
        "",
        f"**Goal** (planner within {GOAL_RATIO}x of the oracle on every data-independent row): "
        + ("**met**" if not failed and independent else "**not met**" if failed else "no such row")
        + f": within {GOAL_RATIO}x on {len(independent) - len(failed)} of {len(independent)} "
        "data-independent rows"
        + (
            f"; {sum(not r['excess_significant'] for r in failed)} of the {len(failed)} failures "
            "are within two standard errors of the goal (possibly trial noise)."
            if failed
            else "."
        ),
    ]
    if independent:
        within = sum(r["ratio_mse"] <= GOAL_RATIO for r in independent)
        lines.append(
            f"In the planner's own metric (mean squared error per query, measured), the planner is "
            f"within {GOAL_RATIO}x of the least measured one on {within} of {len(independent)} "
            "data-independent rows."
        )
        worst = max(independent, key=lambda r: r["ratio"])
        lines.append(
            f"Largest ratio on a data-independent row: {worst['ratio']:.3f} "
            f"({worst['dataset']}, {worst['workload']}, eps={worst['epsilon']})."
        )
    if dependent:
        ratios = [r["ratio"] for r in dependent]
        lines.append(
            f"On the data-dependent rows the planner/oracle ratio ranges "
            f"{min(ratios):.3f}..{max(ratios):.3f} (median {float(np.median(ratios)):.3f}); "
            "oracles there: "
            + ", ".join(
                f"{name} x{sum(r['oracle'] == name for r in dependent)}"
                for name in dict.fromkeys(r["oracle"] for r in dependent)
            )
            + "."
        )
    if failed:
        lines += ["", "Data-independent rows where the goal fails:", ""]
        lines += [
            f"- {r['dataset']} / {r['workload']} / eps={r['epsilon']}: planner {r['planner']} "
            f"{r['planner_error']:.4g} vs oracle {r['oracle']} {r['oracle_error']:.4g} "
            f"(ratio {r['ratio']:.3f} ± {r['ratio_se']:.3f}"
            + ("" if r["excess_significant"] else "; within 2 standard errors of the goal")
            + ")"
            for r in failed
        ]
    lines += [
        "",
        "| data set | workload | eps | planner | planner error | oracle | oracle error | ratio | "
        "data-indep. | best exact | planner / best exact | goal | ratio in squared error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in board:
        goal = "" if r["goal_met"] is None else ("yes" if r["goal_met"] else "**NO**")
        lines.append(
            f"| {r['dataset']} | {r['workload']} {r['dims']} | {r['epsilon']:g} | {r['planner']} | "
            f"{_short(r['planner_error'], r['planner_stderr'])} | {r['oracle']} | "
            f"{_short(r['oracle_error'], r['oracle_stderr'])} | {r['ratio']:.3f} | "
            f"{'yes' if r['data_independent'] else 'no'} | {r['best_exact']} | "
            f"{r['ratio_to_best_exact']:.3f} | {goal} | {r['ratio_mse']:.3f} |"
        )
    return lines


def pooled_exact(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The exact (data-independent) candidates pooled over the data sets of each (grid, workload,
    epsilon): their error does not depend on the data, so the unscaled errors of every data set
    are draws of one distribution, and pooling gives the ranking the planner should match with
    (data sets x trials) releases instead of one row's trials.

    Per candidate: ``l2`` = mean over the data sets of (DPBench error x records), i.e. the mean
    of ``‖W x − W x̂‖₂ / |W|``, and ``mse`` = mean squared error per query. The planner's choice is
    the same on every data set of a (grid, workload, epsilon) (a plan never reads the data).
    """
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in results:
        if r["basis"] == "exact":
            groups.setdefault((r["dims"], r["workload"], r["epsilon"]), []).append(r)
    out = []
    for (dims, workload, eps), rows in groups.items():
        by: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            by.setdefault(r["mechanism"], []).append(r)
        l2 = {
            m: float(np.mean([r["mean_error"] * r["records"] for r in rs])) for m, rs in by.items()
        }
        mse = {m: float(np.mean([r["mean_squared_error"] for r in rs])) for m, rs in by.items()}
        planner = next((r["mechanism"] for r in rows if r["is_planner"]), None)
        if planner is None:
            continue
        best_l2, best_mse = min(l2, key=l2.__getitem__), min(mse, key=mse.__getitem__)
        out.append(
            {
                "dims": dims,
                "workload": workload,
                "epsilon": eps,
                "data_sets": len(by[planner]),
                "planner": planner,
                "best_l2": best_l2,
                "ratio_l2": l2[planner] / l2[best_l2],
                "best_mse": best_mse,
                "ratio_mse": mse[planner] / mse[best_mse],
            }
        )
    return out


def pooled_lines(results: Sequence[dict[str, Any]]) -> list[str]:
    """Markdown table of :func:`pooled_exact`."""
    rows = pooled_exact(results)
    if not rows:
        return []
    lines = [
        "",
        "Exact candidates pooled over the data sets (their error does not depend on the data):",
        "",
        "| grid | workload | eps | data sets | planner | best in mean L2 | planner / best (L2) | "
        "best in mean squared error | planner / best (squared) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['dims']} | {r['workload']} | {r['epsilon']:g} | {r['data_sets']} | {r['planner']} | "
        f"{r['best_l2']} | {r['ratio_l2']:.3f} | {r['best_mse']} | {r['ratio_mse']:.3f} |"
        for r in rows
    ]
    return lines


def prepare_out(out: Path) -> None:
    """Create ``out``, or reuse it if it is empty or was written by this command (its marker);
    never write into a directory of someone else's files."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a file; give a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UsageError(
            f"--out {str(out)!r} is not empty and was not written by python -m experiments.leaderboard; "
            "give a new or empty directory"
        )
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / MARKER, b"written by python -m experiments.leaderboard\n")


def write_outputs(
    out: Path, results: Sequence[dict[str, Any]], board: Sequence[dict[str, Any]], header: str
) -> None:
    write_atomic(out / "results.csv", csv_text(results).encode())
    write_atomic(out / "leaderboard.csv", csv_text(board).encode())
    lines = summary_lines(board) + pooled_lines(results)
    write_atomic(out / "leaderboard.md", (header + "\n\n" + "\n".join(lines) + "\n").encode())


# ------------------------------------------------------------------------------------------------
# Synthetic input for --quick
# ------------------------------------------------------------------------------------------------


def synthetic_datasets(n: int, side: int, seed: int = 0) -> list[DataSet]:
    """Two small 1-D histograms (spiky and smooth) and two 2-D grids (a cluster, uniform)."""
    rng = np.random.default_rng(seed)
    spiky = rng.multinomial(20_000, rng.dirichlet(np.full(n, 0.05)))
    smooth = rng.multinomial(20_000, np.full(n, 1.0 / n))
    rows, cols = np.indices((side, side))
    bump = np.exp(-((rows - side / 3) ** 2 + (cols - side / 2) ** 2) / (2 * (side / 8) ** 2))
    cluster = rng.multinomial(50_000, (bump / bump.sum()).ravel()).reshape(side, side)
    uniform = rng.multinomial(50_000, np.full(side * side, 1.0 / side**2)).reshape(side, side)
    return [
        DataSet("synthetic-spiky", spiky.astype(np.int64)),
        DataSet("synthetic-smooth", smooth.astype(np.int64)),
        DataSet("synthetic-cluster", cluster.astype(np.int64)),
        DataSet("synthetic-uniform", uniform.astype(np.int64)),
    ]


# ------------------------------------------------------------------------------------------------
# Command
# ------------------------------------------------------------------------------------------------


def _epsilons(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--epsilons must be numbers separated by commas, got {text!r}") from None
    if not values or any(not (math.isfinite(v) and v > 0) for v in values):
        raise UsageError(f"--epsilons must be positive finite numbers, got {text!r}")
    return values


def _positive(text: str, flag: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{flag} must be a whole number, got {text!r}") from None
    if value < 1:
        raise UsageError(f"{flag} must be at least 1, got {value}")
    return value


def _divisor(text: str, full: int, flag: str) -> int:
    value = _positive(text, flag)
    if full % value:
        raise UsageError(
            f"{flag} must divide {full} (bins are summed in equal blocks), got {value}"
        )
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.leaderboard",
        description="The planner's choice against every candidate on the DPBench data sets.",
    )
    parser.add_argument("--data-dir", type=Path, default=None, help="folder holding dpbench/")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny synthetic input (1-D 32 bins, 2-D 8x8), eps 0.1 and 1, 2 trials; no --data-dir",
    )
    parser.add_argument("--epsilons", default=None, help="comma-separated (default 0.01,0.1,1)")
    parser.add_argument("--trials", default=None, help="releases per candidate and row (default 5)")
    parser.add_argument("--out", type=Path, default=Path("dpcube-leaderboard"))
    parser.add_argument(
        "--size-1d",
        default=None,
        help="1-D bins after coarsening, dividing 4096 (default 4096, DPBench's native size)",
    )
    parser.add_argument(
        "--size-2d", default=None, help="2-D side after coarsening, dividing 256 (default 256)"
    )
    parser.add_argument(
        "--datasets", default=None, help="comma-separated subset of the DPBench names"
    )
    parser.add_argument(
        "--workloads",
        default="prefix,random-range",
        help="1-D workloads (comma-separated: prefix, random-range); 2-D is random-range",
    )
    parser.add_argument("--no-2d", action="store_true", help="skip the 2-D data sets")
    parser.add_argument("--no-1d", action="store_true", help="skip the 1-D data sets")
    parser.add_argument("--seed", type=int, default=0, help="first seed of the releases")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``python -m experiments.leaderboard``; bad flags and data raise a :class:`~dpcube.errors.DPCubeError`
    that the CLI prints as one line (exit code 2)."""
    return run(parse_args(argv))


def run(args: argparse.Namespace) -> int:
    trials = _positive(args.trials, "--trials") if args.trials is not None else None
    epsilons = _epsilons(args.epsilons) if args.epsilons is not None else None
    kinds_1d = [k.strip() for k in args.workloads.split(",") if k.strip()]
    for kind in kinds_1d:
        if kind not in ("prefix", "random-range"):
            raise UsageError(f"--workloads: unknown workload {kind!r}; use prefix, random-range")
    if args.no_1d and args.no_2d:
        raise UsageError("--no-1d and --no-2d leave nothing to run")
    if args.quick:
        given = [
            flag
            for flag, value in (
                ("--data-dir", args.data_dir),
                ("--datasets", args.datasets),
                ("--size-1d", args.size_1d),
                ("--size-2d", args.size_2d),
            )
            if value is not None
        ]
        if given:
            raise UsageError(
                f"--quick runs on tiny synthetic data: drop {', '.join(given)}, or drop --quick"
            )
        n, side = QUICK_1D, QUICK_2D
        datasets = synthetic_datasets(n, side)
        epsilons = epsilons or (0.1, 1.0)
        trials = trials or 2
        source = f"synthetic (--quick): 1-D {n} bins, 2-D {side}x{side}"
    else:
        if args.data_dir is None:
            raise UsageError("give --data-dir (the folder holding dpbench/), or --quick")
        n = _divisor(args.size_1d or "4096", 4096, "--size-1d")
        side = _divisor(args.size_2d or "256", 256, "--size-2d")
        wanted = None if args.datasets is None else {s.strip() for s in args.datasets.split(",")}
        if wanted is not None:
            unknown = wanted - set(DPBENCH_1D) - set(DPBENCH_2D)
            if unknown:
                raise UsageError(
                    f"--datasets: unknown {', '.join(sorted(unknown))}; known: "
                    f"{', '.join([*DPBENCH_1D, *DPBENCH_2D])}"
                )
        pick = lambda files: {k: v for k, v in files.items() if wanted is None or k in wanted}  # noqa: E731
        datasets = []
        if not args.no_1d:
            datasets += load_dpbench(args.data_dir, pick(DPBENCH_1D), "1D", (n,))
        if not args.no_2d:
            datasets += load_dpbench(args.data_dir, pick(DPBENCH_2D), "2D", (side, side))
        epsilons = epsilons or EPSILONS
        trials = trials or 5
        source = f"DPBench ({args.data_dir}): 1-D at {n} bins, 2-D at {side}x{side}"
    tasks: list[Task] = []
    if not args.no_1d and any(d.counts.ndim == 1 for d in datasets):
        tasks += [make_task(k, (n,)) for k in kinds_1d]
    if not args.no_2d and any(d.counts.ndim == 2 for d in datasets):
        tasks.append(make_task("random-range", (side, side)))
    prepare_out(args.out)
    start_wall, start_cpu = time.perf_counter(), time.process_time()

    def header(done: bool) -> str:
        return (
            f"# Leaderboard\n\nData: {source}. Epsilons {', '.join(f'{e:g}' for e in epsilons)}; "
            f"{trials} seeded trials per candidate and row. Error: DPBench scaled average per-query "
            "L2 error (mean ± standard error over the trials). "
            + ("Run took" if done else "PARTIAL (still running) after")
            + f" {time.perf_counter() - start_wall:.0f} s wall, "
            f"{time.process_time() - start_cpu:.0f} s CPU (this process)."
        )

    def partial(results: list[dict[str, Any]], board: list[dict[str, Any]]) -> None:
        write_outputs(args.out, results, board, header(done=False))

    with memoized_strategies():
        results, board = leaderboard(
            datasets, tasks, epsilons, trials, args.seed, on_progress=partial
        )
    write_outputs(args.out, results, board, header(done=True))
    print(header(done=True))
    print("\n".join(summary_lines(board)[:8]))
    print(f"wrote {', '.join(str(args.out / f) for f in OUTPUTS)}")
    return 0


__all__ = [
    "DPBENCH_1D",
    "DPBENCH_2D",
    "DataSet",
    "Task",
    "box_answers",
    "coarsen",
    "dpbench_random_boxes",
    "grid_schema",
    "leaderboard",
    "load_dpbench",
    "main",
    "make_task",
    "prefix_boxes",
    "scaled_l2_error",
    "score_row",
    "summary_lines",
]


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
