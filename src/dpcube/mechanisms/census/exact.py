"""The exact programs M_H (Model 1) and M_C (Model 2) as HiGHS mixed-integer programs (Fioretto,
Van Hentenryck, Zhu, Artificial Intelligence 296, 2021, Secs. 5 and 8).

The paper solves the quadratic integer programs with Gurobi for its Figure 7 only (they do not
scale). HiGHS has no integer QP, so the separable convex objective is linearised exactly on the
integers: for an integer x, (x - t)^2 equals the largest of the secants through consecutive
integers (v, v + 1),

    z >= (v - t)^2 + (2 v + 1 - 2 t) (x - v)        v = lo .. hi - 1,

and z = (x - t)^2 at the optimum for every integer x in [lo, hi]. Outside [lo, hi] the extreme
secants *under*-estimate the square, so the program is a relaxation there: its optimum is a lower
bound of the integer optimum, and a solution strictly inside every window has a true objective
equal to that bound, hence is optimal (``certified``). The window is [0, G] with
``half_width=None`` (exact, for small instances) or round(t) +- half_width clipped to [0, G].

A feasible solution is passed to HiGHS as a warm start (the TopDown release for Model 1, its
cumulative form for Model 2), so a run stopped by the time limit still returns an integral,
consistent, faithful table; ``status`` says whether HiGHS proved it optimal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpcube.mechanisms.census.baselines import consistency_rows, cumulative_rows, topdown
from dpcube.mechanisms.census.cumulative import gamma, gamma_inv
from dpcube.mechanisms.census.hierarchy import RegionHierarchy


@dataclass
class MIPResult:
    """An integer solution of Model 1 or 2 (flat, variable r * k + s) and how it was obtained.

    ``objective`` is sum (x - target)^2 at ``values``; ``bound`` HiGHS's lower bound of the
    linearised program (a lower bound of the integer optimum); ``certified`` whether the solution
    is proven optimal for the quadratic program (HiGHS optimal, to an absolute gap of 1e-7, and
    every value inside its window, where the linearisation is exact).
    """

    values: NDArray[np.int64]
    status: str
    seconds: float
    objective: float
    bound: float
    certified: bool


def secant_rows(
    target: NDArray[np.float64], lo: NDArray[np.int64], hi: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """The secant cuts of (x_i - t_i)^2 as rows ``z_i - slope * x_i >= intercept``.

    Returns (variable index i, slope, intercept) per row, for v = lo_i .. hi_i - 1.

    >>> i, slope, icpt = secant_rows(np.array([0.4]), np.array([0]), np.array([2]))
    >>> i.tolist(), np.round(slope, 2).tolist(), np.round(icpt, 2).tolist()
    ([0, 0], [0.2, 2.2], [0.16, -1.84])
    """
    counts = np.maximum(hi - lo, 0)
    idx = np.repeat(np.arange(target.size), counts)
    starts = np.cumsum(counts) - counts
    v = lo[idx] + (np.arange(idx.size) - starts[idx])
    t = target[idx]
    slope = 2.0 * v + 1.0 - 2.0 * t
    intercept = (v - t) ** 2 - slope * v
    return idx.astype(np.int64), slope, intercept


def _windows(
    target: NDArray[np.float64], groups: int, half_width: int | None
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    if half_width is None:
        return np.zeros(target.size, np.int64), np.full(target.size, groups, np.int64)
    centre = np.rint(target).astype(np.int64)
    lo = np.clip(centre - half_width, 0, groups)
    hi = np.clip(centre + half_width, 0, groups)
    return lo, np.maximum(hi, lo + (lo < groups))


def solve_mip(
    target: NDArray[np.float64],
    rows: NDArray[np.int64],
    cols: NDArray[np.int64],
    vals: NDArray[np.float64],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    groups: int,
    start: NDArray[np.int64],
    time_limit: float,
    half_width: int | None = None,
) -> MIPResult:
    """min sum (x - target)^2 s.t. lower <= A x <= upper, x integer in [0, G], by HiGHS MIP on
    the secant linearisation (module docstring), warm-started at the feasible ``start``."""
    import highspy
    import scipy.sparse as sp

    n = target.size
    lo, hi = _windows(target, groups, half_width)
    var, slope, intercept = secant_rows(target, lo, hi)
    m_lin, m_sec = int(lower.size), int(var.size)
    # columns: x_0..x_{n-1} (integer), z_0..z_{n-1} (continuous epigraph)
    A = sp.csc_matrix(
        (
            np.concatenate([vals, -slope, np.ones(m_sec)]),
            (
                np.concatenate([rows, m_lin + np.arange(m_sec), m_lin + np.arange(m_sec)]),
                np.concatenate([cols, var, n + var]),
            ),
        ),
        shape=(m_lin + m_sec, 2 * n),
    )
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = 2 * n, m_lin + m_sec
    lp.col_cost_ = np.concatenate([np.zeros(n), np.ones(n)])
    lp.col_lower_ = np.concatenate([np.zeros(n), np.full(n, -inf)])
    lp.col_upper_ = np.concatenate([np.full(n, float(groups)), np.full(n, inf)])
    lp.row_lower_ = np.concatenate([np.where(np.isneginf(lower), -inf, lower), intercept])
    lp.row_upper_ = np.concatenate([np.where(np.isposinf(upper), inf, upper), np.full(m_sec, inf)])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(np.float64)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n + [highspy.HighsVarType.kContinuous] * n
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("threads", 1)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-7)
    h.passModel(lp)
    warm = highspy.HighsSolution()
    x0 = np.asarray(start, np.float64)
    warm.col_value = list(np.concatenate([x0, (x0 - target) ** 2]))
    warm.value_valid = True
    h.setSolution(warm)
    t0 = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - t0
    status = h.modelStatusToString(h.getModelStatus())
    col = np.asarray(h.getSolution().col_value, dtype=np.float64)
    x = np.rint(col[:n]).astype(np.int64) if col.size == 2 * n else np.asarray(start, np.int64)
    objective = float(np.sum((x - target) ** 2))
    if objective > float(np.sum((start - target) ** 2)):
        x, objective = np.asarray(start, np.int64), float(np.sum((start - target) ** 2))
    bound = float(h.getInfo().mip_dual_bound)
    inside = np.all((x >= lo) & (x <= hi))
    return MIPResult(x, status, seconds, objective, bound, bool(status == "Optimal" and inside))


def exact_hierarchical(
    h: RegionHierarchy,
    noisy: NDArray[np.float64],
    groups: int,
    time_limit: float = 1800.0,
    half_width: int | None = None,
) -> tuple[NDArray[np.int64], MIPResult]:
    """M_H: Model 1 (H1-H4) with integer n-hat, warm-started at TopDown (Sec. 5).

    On the golden instance of :func:`dpcube.mechanisms.census.dp.solve_tree` the optimum is unique,
    objective 1.99:

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> y = np.array([[3.6, 0.4, 2.3], [1.2, 0.6, 1.4], [2.3, -0.8, 0.7]])
    >>> n, mip = exact_hierarchical(h, y, 6)
    >>> n.tolist(), round(mip.objective, 2), mip.certified
    ([[3, 1, 2], [1, 1, 1], [2, 0, 1]], 1.99, True)
    """
    noisy = np.asarray(noisy, np.float64)
    R, k = noisy.shape
    rows, cols, vals = consistency_rows(h, k)
    nrow = int(np.sum(h.level < h.levels)) * k
    rows.append(np.full(k, nrow))
    cols.append(np.arange(k))
    vals.append(np.ones(k))
    bounds = np.zeros(nrow + 1)
    bounds[-1] = groups
    start = topdown(h, noisy, groups).ravel()
    mip = solve_mip(
        noisy.ravel(),
        np.concatenate(rows),
        np.concatenate(cols),
        np.concatenate(vals),
        bounds,
        bounds.copy(),
        groups,
        start,
        time_limit,
        half_width,
    )
    return mip.values.reshape(R, k), mip


def exact_cumulative(
    h: RegionHierarchy,
    noisy_cumulative: NDArray[np.float64],
    groups: int,
    time_limit: float = 1800.0,
    half_width: int | None = None,
) -> tuple[NDArray[np.int64], MIPResult]:
    """M_C: Model 2 (C1-C5) with integer c-hat, then Gamma^-1 (Sec. 8); warm start: Gamma of
    TopDown run on the differences of the noisy cumulative values. Golden instance
    (worked by hand, objective 0.87):

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> c = np.array([[3.4, 4.3, 6.2], [1.7, 1.6, 3.2], [0.6, 1.8, 3.3]])
    >>> n, mip = exact_cumulative(h, c, 6)
    >>> n.tolist(), round(mip.objective, 2), mip.certified
    ([[3, 1, 2], [2, 0, 1], [1, 1, 1]], 0.87, True)
    """
    noisy_cumulative = np.asarray(noisy_cumulative, np.float64)
    R, k = noisy_cumulative.shape
    rows, cols, vals, lower, upper = cumulative_rows(h, k, groups)
    differences = np.diff(noisy_cumulative, axis=1, prepend=0.0)
    start = gamma(topdown(h, differences, groups)).ravel()
    mip = solve_mip(
        noisy_cumulative.ravel(),
        np.concatenate(rows),
        np.concatenate(cols),
        np.concatenate(vals),
        lower,
        upper,
        groups,
        start,
        time_limit,
        half_width,
    )
    return gamma_inv(mip.values.reshape(R, k)), mip
