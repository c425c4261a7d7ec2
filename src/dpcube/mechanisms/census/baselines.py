"""Baselines: the relaxed quadratic programs M-bar_H / M-bar_C with rounding, and TopDown.

Fioretto, Van Hentenryck, Zhu, Artificial Intelligence 296 (2021), Secs. 5, 8 and 11. The
relaxed programs are convex QPs (the paper used Gurobi). They
are solved by Clarabel (a sparse interior-point solver; the default, our substitute for Gurobi) or
by HiGHS (an active-set QP solver, kept as a cross-check: it reaches its time limit from k = 10 on
the census tree). Clarabel stops when the relative duality gap and the primal and dual residuals are
below ``tolerance`` (its ``tol_gap_rel`` / ``tol_feas``, reported in :class:`QPResult`). The
programs are NOT exact: rounding each value independently breaks consistency and faithfulness (the
#CV column of Table 7).

TopDown (our reconstruction; the paper describes it only in prose, Sec. 11): root projected onto the
simplex {x >= 0, sum x = G} and rounded by largest remainder; then level by level each region's
children, per size, projected onto {x >= 0, sum x = parent} and rounded by largest remainder.
Closed-form projections (no QP solver); the paper ran Gurobi per two-level problem, so its TopDown
is slower than this one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpcube.mechanisms.census.cumulative import gamma_inv
from dpcube.mechanisms.census.hierarchy import RegionHierarchy

#: The solvers of the relaxed programs: ``clarabel`` (interior point) and ``highs`` (active set).
QP_SOLVERS = ("clarabel", "highs")

#: Clarabel's stopping tolerance (relative gap and feasibility) unless one is given.
DEFAULT_QP_TOLERANCE = 1e-8


@dataclass
class QPResult:
    """The continuous solution of a relaxed program, before rounding.

    ``objective`` is sum (x - target)^2 at the returned x (the program's objective H1 / C1);
    ``tolerance`` the solver's stopping tolerance (``nan`` for HiGHS, whose QP solver has none
    to set); ``status`` the solver's own word ("Solved", "Optimal", "MaxTime", "Time limit
    reached", ...).
    """

    values: NDArray[np.float64]
    status: str
    seconds: float
    solver: str = "highs"
    objective: float = float("nan")
    tolerance: float = float("nan")


def consistency_rows(
    h: RegionHierarchy, k: int
) -> tuple[list[NDArray[np.int64]], list[NDArray[np.int64]], list[NDArray[np.float64]]]:
    """Rows x[r, s] - sum_{c in ch(r)} x[c, s] = 0 in COO form (variable index r * k + s)."""
    rows, cols, vals = [], [], []
    internal = np.flatnonzero(h.level < h.levels)
    row_of = -np.ones(h.size, dtype=np.int64)
    row_of[internal] = np.arange(internal.size)
    for s in range(k):
        base = np.arange(internal.size) * k + s
        rows.append(base)
        cols.append(internal * k + s)
        vals.append(np.ones(internal.size))
        kids = np.flatnonzero(h.parent >= 0)
        rows.append(row_of[h.parent[kids]] * k + s)
        cols.append(kids * k + s)
        vals.append(-np.ones(kids.size))
    return rows, cols, vals


def cumulative_rows(
    h: RegionHierarchy, k: int, groups: int
) -> tuple[
    list[NDArray[np.int64]],
    list[NDArray[np.int64]],
    list[NDArray[np.float64]],
    NDArray[np.float64],
    NDArray[np.float64],
]:
    """Model 2's rows on the cumulative counts ``c[r, s]`` (variable ``r * k + s``) in COO form,
    with each row's lower and upper bound: the hierarchy's consistency (= 0, as
    :func:`consistency_rows`), monotonicity ``c[r, s-1] - c[r, s] <= 0`` and the root's
    ``c[0, k-1] = groups``."""
    R = h.size
    rows, cols, vals = consistency_rows(h, k)
    nrow = int(np.sum(h.level < h.levels)) * k
    mono = np.arange(R * (k - 1))
    rr = np.repeat(np.arange(R), k - 1)
    ss = np.tile(np.arange(1, k), R)
    rows += [nrow + mono, nrow + mono]
    cols += [rr * k + ss - 1, rr * k + ss]
    vals += [np.ones(mono.size), -np.ones(mono.size)]
    rows.append(np.array([nrow + mono.size]))
    cols.append(np.array([k - 1]))
    vals.append(np.ones(1))
    lower = np.concatenate([np.zeros(nrow), np.full(mono.size, -np.inf), [groups]])
    upper = np.concatenate([np.zeros(nrow), np.zeros(mono.size), [groups]])
    return rows, cols, vals, lower, upper


def _solve_qp(
    target: NDArray[np.float64],
    rows: NDArray[np.int64],
    cols: NDArray[np.int64],
    vals: NDArray[np.float64],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    time_limit: float,
    solver: str = "clarabel",
    tolerance: float = DEFAULT_QP_TOLERANCE,
    nonnegative: NDArray[np.int64] | None = None,
) -> QPResult:
    """min sum (x - target)^2 s.t. lower <= A x <= upper, x >= 0, with the named solver.

    ``nonnegative``: the variables whose bound x >= 0 Clarabel is given (default all); pass a
    subset only when the rows imply the other bounds (M-bar_C: monotone rows and c[r, 0] >= 0
    imply c >= 0), so the feasible set is unchanged and the interior-point system smaller.
    """
    if solver == "clarabel":
        qp = _solve_qp_clarabel(
            target, rows, cols, vals, lower, upper, time_limit, tolerance, nonnegative
        )
    elif solver == "highs":
        qp = _solve_qp_highs(target, rows, cols, vals, lower, upper, time_limit)
    else:
        raise ValueError(f"qp solver must be one of {', '.join(QP_SOLVERS)}; got {solver!r}")
    qp.objective = float(np.sum((qp.values - target) ** 2))
    return qp


def _solve_qp_clarabel(
    target: NDArray[np.float64],
    rows: NDArray[np.int64],
    cols: NDArray[np.int64],
    vals: NDArray[np.float64],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    time_limit: float,
    tolerance: float,
    nonnegative: NDArray[np.int64] | None = None,
) -> QPResult:
    """The same program for Clarabel in the shifted variable y = x - target:
    min 1/2 y'(2I)y s.t. A_eq y = b - A_eq target (zero cone), A_le y <= u - A_le target (rows
    with lower = -inf), -y <= target on the ``nonnegative`` variables (non-negative cone).

    The shift matters: Clarabel's relative gap is measured on the objective it is given. In x the
    objective x'x - 2 target'x drops the constant target'target (about 1e13 for census cumulative
    counts), so a relative gap of 1e-8 allowed an absolute error of about 1e5 in
    sum (x - target)^2 (M-bar_C at k = 10 stopped "Solved" 4.5 % above the optimum). In y the
    objective is sum (x - target)^2 itself and the tolerance means what it says.
    """
    import clarabel
    import scipy.sparse as sp

    n = target.size
    A = sp.csr_matrix((vals, (rows, cols)), shape=(int(lower.size), n))
    eq = np.flatnonzero(lower == upper)
    le = np.flatnonzero((lower != upper) & np.isneginf(lower))
    if eq.size + le.size != lower.size:
        raise ValueError("clarabel path supports rows lower == upper or lower = -inf only")
    bounded = np.arange(n) if nonnegative is None else np.asarray(nonnegative, dtype=np.int64)
    minus_identity = sp.csr_matrix(
        (-np.ones(bounded.size), (np.arange(bounded.size), bounded)), shape=(bounded.size, n)
    )
    M = sp.vstack([A[eq], A[le], minus_identity], format="csc")
    b = np.concatenate([upper[eq], upper[le], np.zeros(bounded.size)]) - M @ target
    cones = [clarabel.ZeroConeT(int(eq.size))]
    if le.size:
        cones.append(clarabel.NonnegativeConeT(int(le.size)))
    cones.append(clarabel.NonnegativeConeT(int(bounded.size)))
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.time_limit = float(time_limit)
    settings.tol_gap_rel = settings.tol_gap_abs = settings.tol_feas = float(tolerance)
    settings.max_threads = 1
    t0 = time.perf_counter()
    sol = clarabel.DefaultSolver(
        sp.identity(n, format="csc") * 2.0, np.zeros(n), M, b, cones, settings
    ).solve()
    seconds = time.perf_counter() - t0
    y = np.asarray(sol.x, dtype=np.float64)
    x = y + target if y.size == n else np.zeros(n)
    return QPResult(x, str(sol.status), seconds, "clarabel", tolerance=float(tolerance))


def _solve_qp_highs(
    target: NDArray[np.float64],
    rows: NDArray[np.int64],
    cols: NDArray[np.int64],
    vals: NDArray[np.float64],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    time_limit: float,
) -> QPResult:
    """min sum (x - target)^2 s.t. lower <= A x <= upper, x >= 0, with HiGHS."""
    import highspy
    import scipy.sparse as sp

    n = target.size
    A = sp.csc_matrix((vals, (rows, cols)), shape=(int(lower.size), n))
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = int(lower.size)
    lp.col_cost_ = -2.0 * target
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.full(n, highspy.kHighsInf)
    lp.row_lower_ = lower
    lp.row_upper_ = upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(np.float64)
    model = highspy.HighsModel()
    model.lp_ = lp
    hess = highspy.HighsHessian()
    hess.dim_ = n
    hess.format_ = highspy.HessianFormat.kTriangular
    hess.start_ = np.arange(n + 1, dtype=np.int32)
    hess.index_ = np.arange(n, dtype=np.int32)
    hess.value_ = np.full(n, 2.0)
    model.hessian_ = hess
    t0 = time.perf_counter()
    h.passModel(model)
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    x = np.asarray(h.getSolution().col_value, dtype=np.float64)
    if x.size != n:
        x = np.zeros(n)
    return QPResult(x, status, time.perf_counter() - t0)


def relaxed_hierarchical(
    h: RegionHierarchy,
    noisy: NDArray[np.float64],
    groups: int,
    time_limit: float = 1800.0,
    solver: str = "clarabel",
    tolerance: float = DEFAULT_QP_TOLERANCE,
) -> tuple[NDArray[np.int64], QPResult]:
    """M-bar_H: the convex relaxation of Model 1 (H1-H3, x >= 0), then np.rint per value (Sec. 5).

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> n, qp = relaxed_hierarchical(h, np.array([[3.6, 0.4, 2.3], [1.2, 0.6, 1.4], [2.3, -0.8, 0.7]]), 6)
    >>> int(n[0].sum())
    5
    """
    R, k = noisy.shape
    rows, cols, vals = consistency_rows(h, k)
    nrow = int(np.sum(h.level < h.levels)) * k
    rows.append(np.full(k, nrow))
    cols.append(np.arange(k))
    vals.append(np.ones(k))
    lower = np.zeros(nrow + 1)
    lower[-1] = groups
    qp = _solve_qp(
        np.asarray(noisy, np.float64).ravel(),
        np.concatenate(rows),
        np.concatenate(cols),
        np.concatenate(vals),
        lower,
        lower.copy(),
        time_limit,
        solver,
        tolerance,
    )
    return np.maximum(np.rint(qp.values), 0).astype(np.int64).reshape(R, k), qp


def relaxed_cumulative(
    h: RegionHierarchy,
    noisy_cumulative: NDArray[np.float64],
    groups: int,
    time_limit: float = 1800.0,
    solver: str = "clarabel",
    tolerance: float = DEFAULT_QP_TOLERANCE,
) -> tuple[NDArray[np.int64], QPResult]:
    """M-bar_C: the relaxation of Model 2 (C1-C4, c >= 0); round c (monotone), then Gamma^-1."""
    R, k = noisy_cumulative.shape
    rows, cols, vals, lower, upper = cumulative_rows(h, k, groups)
    qp = _solve_qp(
        np.asarray(noisy_cumulative, np.float64).ravel(),
        np.concatenate(rows),
        np.concatenate(cols),
        np.concatenate(vals),
        lower,
        upper,
        time_limit,
        solver,
        tolerance,
        nonnegative=np.arange(R) * k,  # c[r, 0] >= 0; the monotone rows give the rest (C4)
    )
    c = np.maximum(np.rint(qp.values), 0).astype(np.int64).reshape(R, k)
    return gamma_inv(c), qp


def project_simplex(
    y: NDArray[np.float64], total: NDArray[np.float64], segments: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Per segment, the Euclidean projection of y onto {x >= 0, sum x = total[segment]}.

    >>> project_simplex(np.array([0.5, 2.0, -1.0]), np.array([2.0]), np.array([0, 0, 0])).tolist()
    [0.25, 1.75, 0.0]
    """
    order = np.lexsort((-y, segments))
    ys, seg = y[order], segments[order]
    nseg = total.size
    start = np.searchsorted(seg, np.arange(nseg))
    csum = np.cumsum(ys)
    before = np.where(start > 0, csum[np.maximum(start - 1, 0)], 0.0)
    within = csum - before[seg]
    rank = np.arange(ys.size) - start[seg] + 1
    theta_all = (within - total[seg]) / rank
    ok = ys - theta_all > 0
    last = np.zeros(nseg, dtype=np.int64)
    np.maximum.at(last, seg[ok], rank[ok])
    idx = start + np.maximum(last, 1) - 1
    theta = np.where(last > 0, theta_all[np.minimum(idx, ys.size - 1)], np.inf)
    out = np.empty_like(y)
    out[order] = np.maximum(ys - theta[seg], 0.0)
    return out


def largest_remainder(
    x: NDArray[np.float64], total: NDArray[np.int64], segments: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Round x down, then give +1 to the largest fractional parts (ties: lower index) so each
    segment sums to its integer total.

    >>> largest_remainder(np.array([0.25, 1.75, 0.0]), np.array([2]), np.array([0, 0, 0])).tolist()
    [0, 2, 0]
    """
    base = np.floor(x).astype(np.int64)
    frac = x - base
    short = np.maximum(
        total - np.bincount(segments, weights=base, minlength=total.size).astype(np.int64), 0
    )
    order = np.lexsort((np.arange(x.size), -frac, segments))
    seg = segments[order]
    start = np.searchsorted(seg, np.arange(total.size))
    rank = np.arange(x.size) - start[seg]
    out = base.copy()
    out[order] += (rank < short[seg]).astype(np.int64)
    return out


def topdown(h: RegionHierarchy, noisy: NDArray[np.float64], groups: int) -> NDArray[np.int64]:
    """TopDown as reconstructed here from the prose of Sec. 11: integral, consistent and faithful.

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> topdown(h, np.array([[3.0, 1, 2], [2, 0, 1], [1, 1, 1]]), 6).tolist()
    [[3, 1, 2], [2, 0, 1], [1, 1, 1]]
    """
    noisy = np.asarray(noisy, dtype=np.float64)
    R, k = noisy.shape
    out = np.zeros((R, k), dtype=np.int64)
    root = project_simplex(noisy[0], np.array([float(groups)]), np.zeros(k, np.int64))
    out[0] = largest_remainder(root, np.array([groups]), np.zeros(k, np.int64))
    for level in range(1, h.levels):
        psl, csl = h.level_slice(level), h.level_slice(level + 1)
        par = h.children_of_level(level)
        seg = (par[:, None] * k + np.arange(k)[None, :]).ravel()
        totals = out[psl].ravel()
        x = project_simplex(noisy[csl].ravel(), totals.astype(np.float64), seg)
        out[csl] = largest_remainder(x, totals, seg).reshape(-1, k)
    return out
