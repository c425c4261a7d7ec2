"""The Level Selection Algorithm (LSA; Li, Miklau, "Efficient Batch Query Answering Under
Differential Privacy", 2011 preprint, Secs. 4.1-4.2, Program 4.1, App. D.2).

LSA builds a 0/1 strategy out of *levels*: partitions of the grid into axis-aligned boxes, each
grown top-down by recursive bisection of the whole grid. The strategy is the identity followed by
the accepted levels, so it is column-uniform with ``‖A‖₂² = s`` (number of levels, identity
included) and minimal among its equivalents (Thm 3.1).

Semantics (Program 4.1 with its typos resolved, ``mode="paper"``, the default, which reproduces
Example 4.1 exactly): the level under construction is evaluated *with* the level included; each
bisection pass examines every box individually against the current state, and all improving splits
are applied at once. A level is accepted when ``(s+1)·T_l ≤ s·T``; the run ends at the first
rejected level or when ``s ≥ k``. Ablation modes (other readings of Program 4.1's step 8):
``"best"`` (one best split per pass), ``"sequential"`` (apply each box's best split in turn),
``"all"`` (split every box each pass, improving or not).

Candidate evaluation is exact and fast (corrected here: the Woodbury identity printed in App. D.2
is wrong, with wrong shapes and sign): splitting box row v into v₁ + v₂ changes ``X = AᵀA`` by
``−v₁v₂ᵀ − v₂v₁ᵀ``, so with ``Xinv = X⁻¹`` and ``Z = Xinv G Xinv``::

    a = v₁ᵀXinv v₁,  b = v₁ᵀXinv v₂,  c = v₂ᵀXinv v₂,  za, zb, zc likewise with Z
    tr(G X_new⁻¹) = tr(G Xinv) − (c·za − 2(b−1)·zb + a·zc) / (a·c − (b−1)²)

and the box sums ``v₁ᵀ M v₂`` of every cut of a box B come from B's own sub-block ``M[B, B]``
reduced to an ``l x l`` profile per axis and prefix-summed (:func:`split_sums`; O(k·Σ|B|²) a pass,
never a matrix inversion per candidate). The simultaneous splits of a pass update ``X⁻¹`` and Z by
one rank-2r Woodbury step (:class:`_PendingSplit`, O(n²r)); ``X⁻¹`` is recomputed by Cholesky once
per accepted level to avoid drift.

>>> from dpcube.workloads import allrange_gram_1d
>>> r = lsa(allrange_gram_1d(4), (4,))
>>> r.levels_count, r.rows_count, r.distinct_count, round(r.error, 6)
(3, 9, 7, 16.909091)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg.blas as blas
import scipy.linalg.lapack as lapack
from numpy.typing import ArrayLike, NDArray

from dpcube.errors import QueryError
from dpcube.linalg.threads import single_blas_thread
from dpcube.mechanisms.matrix.strategies import Strategy
from dpcube.mechanisms.matrix.strategies import boxes as boxes_strategy

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

MODES = ("paper", "best", "sequential", "all")

#: Consecutive accepted levels that do not lower the error (ties of step 10's ``≤``) after which
#: the run stops: a tie can open the way to improvements (AllRange(2,2,2,2) shows it), but a
#: degenerate workload (e.g. a Gram of rank 1) would otherwise accept tied levels forever.
MAX_TIES = 2

#: With ``k=None`` a run stops after this many levels even if levels still help: on a rank-deficient
#: workload Gram the error can keep decreasing geometrically-slowly by repeating a level forever.
SAFETY_LEVELS = 256


def spd_inverse(x: FloatArray) -> FloatArray:
    """Inverse of a symmetric positive-definite matrix through its Cholesky factor (LAPACK
    potrf/potri), symmetrised.

    >>> spd_inverse(np.array([[2.0, 0.0], [0.0, 4.0]])).round(12).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    c, info = lapack.dpotrf(x, lower=1, clean=0)
    if info != 0:
        raise np.linalg.LinAlgError(f"matrix is not positive definite (potrf info {info})")
    inv, info = lapack.dpotri(c, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"potri failed (info {info})")
    lower = np.tril(inv)
    return np.asarray(lower + np.tril(inv, -1).T, dtype=np.float64)


def split_sums(matrices: Sequence[FloatArray], level: IntArray, dims: Sequence[int]) -> FloatArray:
    """For every bisection of every box of a level, in (box, axis, cut) order, the three box sums
    ``[v₁ᵀMv₁, v₁ᵀMv₂, v₂ᵀMv₂]`` of each symmetric-or-not matrix ``M`` (the box sums of the
    candidate evaluation).

    Boxes of one shape are handled together: the sub-blocks ``M[B, B]`` are gathered (Σ|B|² ≤ n²
    entries, so a pass costs O(k·Σ|B|²), which shrinks as the level's boxes do), reduced to each
    axis's ``l x l`` profile, and every cut's sums read off a 2-D prefix sum of the profile.
    Returns an array of shape (len(matrices), 3, #candidates).

    >>> m = np.arange(16.0).reshape(4, 4)
    >>> split_sums([m], np.array([[[0, 3]]]), (4,))[0, :, 1].tolist()  # cut at 2: {0,1} | {2,3}
    [10.0, 18.0, 50.0]
    """
    k = len(dims)
    extent = level[:, :, 1] - level[:, :, 0] + 1
    per_axis = extent - 1
    per_box = per_axis.sum(axis=1)
    box_start = np.cumsum(per_box) - per_box
    axis_offset = np.cumsum(per_axis, axis=1) - per_axis
    out = np.empty((len(matrices), 3, int(per_box.sum())))
    strides = np.array([math.prod(dims[a + 1 :]) for a in range(k)], dtype=np.int64)
    shapes, group = np.unique(extent, axis=0, return_inverse=True)
    group = group.ravel()
    for index, shape_row in enumerate(shapes):
        shape = tuple(int(v) for v in shape_row)
        if max(shape) == 1:
            continue
        members = np.flatnonzero(group == index)
        cells = level[members, :, 0] @ strides
        within = np.indices(shape).reshape(k, -1).T @ strides
        idx = cells[:, None] + within[None, :]
        for mi, m in enumerate(matrices):
            block = m[idx[:, :, None], idx[:, None, :]].reshape(len(members), *shape, *shape)
            for axis, length in enumerate(shape):
                if length == 1:
                    continue
                rest = tuple(1 + a for a in range(k) if a != axis)
                profile = block.sum(axis=rest + tuple(a + k for a in rest)) if rest else block
                q = np.zeros((len(members), length + 1, length + 1))
                q[:, 1:, 1:] = profile.cumsum(axis=1).cumsum(axis=2)
                t = np.arange(1, length)
                first, row, col = q[:, t, t], q[:, t, length], q[:, length, t]
                total = q[:, length, length][:, None]
                pos = (box_start[members] + axis_offset[members, axis])[:, None] + (t - 1)[None, :]
                out[mi, 0, pos] = first
                out[mi, 1, pos] = row - first
                out[mi, 2, pos] = total - row - col + first
    return out


@dataclass
class _State:
    """A level under construction: its boxes, ``X_l⁻¹``, ``Z = X_l⁻¹ G X_l⁻¹`` and ``T_l``."""

    boxes: IntArray
    xinv: FloatArray
    z: FloatArray
    t: float


def level_gram(level: IntArray, dims: Sequence[int]) -> FloatArray:
    """``Σ_{boxes v} v vᵀ`` for a partition (a 0/1 block matrix in cell order).

    >>> level_gram(np.array([[[0, 1]], [[2, 2]]]), (3,)).astype(int).tolist()
    [[1, 1, 0], [1, 1, 0], [0, 0, 1]]
    """
    label = np.empty(tuple(dims), dtype=np.int64)
    for i, box in enumerate(level):
        label[tuple(slice(lo, hi + 1) for lo, hi in box)] = i
    flat = label.ravel()
    return (flat[:, None] == flat[None, :]).astype(np.float64)


def _state(g: FloatArray, xinv: FloatArray, level: IntArray) -> _State:
    """State from an inverse computed afresh (the per-level recomputation)."""
    return _State(level, xinv, xinv @ g @ xinv, float(np.sum(g * xinv)))


def _indicators(boxes: IntArray, dims: Sequence[int]) -> FloatArray:
    """0/1 cell indicators of boxes as columns (n x q)."""
    u = np.zeros((len(boxes), *dims))
    for i, box in enumerate(boxes):
        index: tuple[int | slice, ...] = (i, *(slice(lo, hi + 1) for lo, hi in box))
        u[index] = 1.0
    return u.reshape(len(boxes), -1).T


class _PendingSplit:
    """r simultaneous splits ``v -> (v₁, v₂)`` by Woodbury (App. D.2, corrected), O(n²r): ``T``
    after them is known on construction; :meth:`apply` then updates the state in place.

    ``X_new = X + U C Uᵀ`` with ``U = [V₁ V₂]`` and ``C = [[0, −I], [−I, 0]]`` (= C⁻¹). With
    ``R = X⁻¹U``, ``N = (C + UᵀR)⁻¹`` and ``ZU = X⁻¹GX⁻¹U``::

        X_new⁻¹ = X⁻¹ − R N Rᵀ
        T_new   = T − tr(N · UᵀZU)
        Z_new   = Z − R W − (R W)ᵀ,   W = N (ZU)ᵀ − ½ N (UᵀZU) N Rᵀ

    (``RᵀGX⁻¹ = (ZU)ᵀ`` and ``RᵀGR = UᵀZU``, so G itself is not needed.)
    """

    def __init__(self, st: _State, first: IntArray, second: IntArray, dims: Sequence[int]) -> None:
        r = len(first)
        u = np.concatenate([_indicators(first, dims), _indicators(second, dims)], axis=1)
        c = np.zeros((2 * r, 2 * r))
        c[:r, r:] = c[r:, :r] = -np.eye(r)
        self.rr = st.xinv @ u
        self.zu = st.z @ u
        self.uzu = u.T @ self.zu
        self.inner = np.linalg.inv(c + u.T @ self.rr)
        self.t = st.t - float(np.sum(self.inner * self.uzu))

    def apply(self, st: _State, boxes: IntArray) -> _State:
        """Overwrite ``st`` with the state after the splits (two in-place BLAS updates; both
        matrices are symmetric, so their transposes are the Fortran-ordered views GEMM wants)."""
        nrt = self.inner @ self.rr.T
        w = self.inner @ self.zu.T - 0.5 * (self.inner @ self.uzu) @ nrt
        xinv = blas.dgemm(-1.0, self.rr, nrt, beta=1.0, c=st.xinv.T, overwrite_c=True).T
        left = np.concatenate([self.rr, w.T], axis=1)
        right = np.concatenate([w, self.rr.T], axis=0)
        z = blas.dgemm(-1.0, left, right, beta=1.0, c=st.z.T, overwrite_c=True).T
        return _State(boxes, xinv, z, self.t)


def _candidates(level: IntArray, dims: Sequence[int]) -> tuple[IntArray, IntArray, IntArray]:
    """Every bisection of every box: (box index, axis, cut) ordered by (box, axis, cut); the cut
    c puts coordinates ``< c`` in the first half."""
    box_ids, axes, cuts = [], [], []
    for axis in range(len(dims)):
        lo, hi = level[:, axis, 0], level[:, axis, 1]
        count = hi - lo
        total = int(count.sum())
        if total == 0:
            continue
        ids = np.repeat(np.arange(len(level)), count)
        start = np.cumsum(count) - count
        offset = np.arange(total) - np.repeat(start, count)
        box_ids.append(ids)
        axes.append(np.full(total, axis))
        cuts.append(lo[ids] + 1 + offset)
    if not box_ids:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    b, a, c = np.concatenate(box_ids), np.concatenate(axes), np.concatenate(cuts)
    order = np.lexsort((c, a, b))
    return b[order], a[order], c[order]


def _halves(
    level: IntArray, box_ids: IntArray, axes: IntArray, cuts: IntArray
) -> tuple[IntArray, IntArray]:
    first = level[box_ids].copy()
    second = level[box_ids].copy()
    rows = np.arange(len(box_ids))
    first[rows, axes, 1] = cuts - 1
    second[rows, axes, 0] = cuts
    return first, second


def _evaluate(st: _State, dims: Sequence[int]) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
    """``T`` after each single candidate split, by the rank-2 Woodbury formula (App. D.2,
    corrected)."""
    box_ids, axes, cuts = _candidates(st.boxes, dims)
    if len(box_ids) == 0:
        return box_ids, axes, cuts, np.zeros(0)
    (a, b, c), (za, zb, zc) = split_sums([st.xinv, st.z], st.boxes, dims)
    det = a * c - (b - 1.0) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t = st.t - (c * za - 2.0 * (b - 1.0) * zb + a * zc) / det
    t[~np.isfinite(t)] = np.inf
    return box_ids, axes, cuts, t


def _best_per_box(
    box_ids: IntArray, t: FloatArray, nboxes: int, tie: float
) -> tuple[IntArray, FloatArray]:
    """Index of each box's best candidate and its value; candidates within ``tie`` (relative) of
    the best are ties, broken towards the lowest (axis, cut) (the paper leaves ties open)."""
    best = np.full(nboxes, -1, dtype=np.int64)
    value = np.full(nboxes, np.inf)
    if len(box_ids) == 0:
        return best, value
    starts = np.flatnonzero(np.r_[True, box_ids[1:] != box_ids[:-1]])
    mins = np.minimum.reduceat(t, starts)
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(t)]))
    hit = np.flatnonzero(t <= mins[group] + tie * np.abs(mins[group]))
    _, first = np.unique(group[hit], return_index=True)
    chosen = hit[first]
    best[box_ids[starts]] = chosen
    value[box_ids[starts]] = mins
    return best, value


def _apply(level: IntArray, splits: dict[int, tuple[int, int]]) -> IntArray:
    """Replace every chosen box by its two halves, in place in the list (creation order)."""
    out: list[NDArray[np.int64]] = []
    for i, box in enumerate(level):
        if i in splits:
            axis, cut = splits[i]
            first, second = box.copy(), box.copy()
            first[axis, 1] = cut - 1
            second[axis, 0] = cut
            out.extend([first, second])
        else:
            out.append(box)
    return np.array(out, dtype=np.int64)


@dataclass
class LSAResult:
    """Output of :func:`lsa`: the accepted levels and the error trajectory (P = 1)."""

    dims: tuple[int, ...]
    #: Accepted levels after the starting strategy, each an array of boxes (q, k, 2).
    levels: list[IntArray]
    #: ``s·T`` after the start and after each accepted level (Fig 1).
    errors: list[float]
    #: Gram ``AᵀA`` of the final strategy (starting Gram plus the levels).
    gram: FloatArray = field(repr=False)
    #: Sensitivity² of the starting strategy (1 for the identity).
    start_levels: int = 1
    #: Whether the identity level is part of the strategy (False for phase-2 runs of generalization).
    identity: bool = True
    mode: str = "paper"
    #: The level built last and rejected (None when the run stopped at k or could not split).
    rejected: IntArray | None = None
    #: Why the run ended: "rejected" (a level did not lower the error, the paper's termination),
    #: "k" (the level bound) or "safety" (k=None and :data:`SAFETY_LEVELS` reached).
    stop_reason: str = ""

    @property
    def n(self) -> int:
        return math.prod(self.dims)

    @property
    def levels_count(self) -> int:
        """``‖A‖₂²``: the starting levels plus the accepted ones."""
        return self.start_levels + len(self.levels)

    @property
    def error(self) -> float:
        """``‖A‖₂²·tr(G(AᵀA)⁻¹)`` of the final strategy."""
        return self.errors[-1]

    def all_boxes(self) -> IntArray:
        """Every row of the strategy as a box: the identity's singletons, then the levels."""
        parts = []
        if self.identity:
            cells = np.stack(np.unravel_index(np.arange(self.n), self.dims), axis=1)
            parts.append(np.stack([cells, cells], axis=2))
        parts.extend(self.levels)
        return np.concatenate(parts, axis=0).astype(np.int64)

    @property
    def rows_count(self) -> int:
        return len(self.all_boxes())

    def distinct(self) -> tuple[IntArray, FloatArray]:
        """Distinct rows and their multiplicities (Thm 3.2: k copies ≡ one copy times sqrt k)."""
        b = self.all_boxes()
        uniq, counts = np.unique(b.reshape(len(b), -1), axis=0, return_counts=True)
        return uniq.reshape(-1, len(self.dims), 2), counts.astype(np.float64)

    @property
    def distinct_count(self) -> int:
        return len(self.distinct()[0])

    def strategy(self, name: str = "lsa") -> Strategy:
        """The compressed strategy: distinct boxes weighted by sqrt(multiplicity) (≡ under L2)."""
        uniq, counts = self.distinct()
        s = boxes_strategy(uniq, self.dims, np.sqrt(counts), name=name)
        s.info = self.summary()
        return s

    def summary(self) -> dict[str, Any]:
        return {
            "levels": self.levels_count,
            "rows": self.rows_count,
            "distinct_rows": self.distinct_count,
            "mode": self.mode,
            "stop_reason": self.stop_reason,
        }


@single_blas_thread
def lsa(
    gram: ArrayLike,
    dims: Sequence[int],
    k: int | None = None,
    mode: str = "paper",
    *,
    start_gram: ArrayLike | None = None,
    start_levels: int = 1,
    tol: float = 1e-12,
    tie: float | None = None,
) -> LSAResult:
    """Run LSA on a workload Gram ``G`` over the grid ``dims`` (Li & Miklau, Program 4.1).

    ``k`` bounds ``‖A‖₂²`` (levels including the identity: k = 1 returns I; None runs to natural
    termination, as in the paper's experiments). ``start_gram``/``start_levels`` replace the
    starting identity (Gram ``I``, one level), as phase 2 of workload generalization needs.
    ``tol`` (the paper has none; ours) is relative: a split must lower ``T`` by more than ``tol·T``
    to count. Candidates within ``tie`` (relative; default ``tol``) of a box's best are ties, taken
    at the lowest (axis, cut); ``tie=0`` leaves them to floating-point rounding.
    On symmetric multi-dimensional grids (mirror images, swapped square axes) exact ties are
    common and the level count reached before a level is rejected depends on how they are broken
    (experiments/docs/matrix-mechanism.md); this rule makes the outcome deterministic.
    """
    if mode not in MODES:
        raise QueryError(f"LSA mode must be one of {', '.join(MODES)}, got {mode!r}")
    dims = tuple(int(d) for d in dims)
    n = math.prod(dims)
    g = np.asarray(gram, dtype=np.float64)
    if g.shape != (n, n):
        raise QueryError(f"the workload Gram has shape {g.shape} but the grid {dims} has {n} cells")
    x = np.eye(n) if start_gram is None else np.array(start_gram, dtype=np.float64)
    s = int(start_levels)
    xinv = spd_inverse(x)
    t = float(np.sum(g * xinv))
    result = LSAResult(dims, [], [s * t], x, s, identity=start_gram is None, mode=mode)
    whole = np.array([[[0, d - 1] for d in dims]], dtype=np.int64)
    limit = SAFETY_LEVELS if k is None else k
    ties = 0
    while s < limit:
        ones = xinv.sum(axis=1)
        start = xinv - np.outer(ones, ones) / (1.0 + ones.sum())
        st = _build_level(_state(g, start, whole), dims, mode, tol, tol if tie is None else tie)
        # Step 10 on the level's exact error (fresh Cholesky), not the Woodbury-accumulated one:
        # levels that tie the current error are common (AllRange(2,...,2)) and the paper's "≤"
        # must see them as ties.
        x_new = x + level_gram(st.boxes, dims)
        xinv_new = spd_inverse(x_new)
        t_new = float(np.sum(g * xinv_new))
        new, old = (s + 1) * t_new, s * t
        ties = ties + 1 if new > old * (1.0 - tol) else 0
        if new <= old * (1.0 + tol) and ties <= MAX_TIES:
            result.levels.append(st.boxes)
            x, xinv, t, s = x_new, xinv_new, t_new, s + 1
            result.errors.append(s * t)
        else:
            result.rejected = st.boxes
            result.stop_reason = "rejected"
            break
    else:
        result.stop_reason = "k" if k is not None else "safety"
    result.gram = x
    return result


def _split(
    st: _State, splits: dict[int, tuple[int, int]], dims: Sequence[int]
) -> tuple[_PendingSplit, IntArray]:
    """The splits, applied simultaneously, as a pending Woodbury update and the new boxes."""
    ids = np.array(sorted(splits), dtype=np.int64)
    axes = np.array([splits[i][0] for i in ids], dtype=np.int64)
    cuts = np.array([splits[i][1] for i in ids], dtype=np.int64)
    first, second = _halves(st.boxes, ids, axes, cuts)
    return _PendingSplit(st, first, second, dims), _apply(st.boxes, splits)


def _build_level(st: _State, dims: Sequence[int], mode: str, tol: float, tie: float) -> _State:
    """Bisection passes of one level (Program 4.1 steps 3-9) in the given mode."""
    while True:
        box_ids, axes, cuts, t = _evaluate(st, dims)
        if len(t) == 0:
            return st
        best, value = _best_per_box(box_ids, t, len(st.boxes), tie)
        improving = np.flatnonzero((best >= 0) & (value < st.t * (1.0 - tol)))
        if mode == "all":
            chosen = np.flatnonzero(best >= 0)
        elif mode == "best":
            chosen = improving[np.argsort(value[improving], kind="stable")[:1]]
        else:
            chosen = improving
        if len(chosen) == 0:
            return st
        if mode == "sequential":
            st = _sequential(st, dims, tol, tie)
            continue
        splits = {int(i): (int(axes[best[i]]), int(cuts[best[i]])) for i in chosen}
        pending, boxes = _split(st, splits, dims)
        if not pending.t < st.t * (1.0 - tol):
            return st
        st = pending.apply(st, boxes)


def _sequential(st: _State, dims: Sequence[int], tol: float, tie: float) -> _State:
    """One pass of mode "sequential": each box, in order, takes its best split if it improves
    the current state (the state is updated after every applied split; the caller has checked
    that the first box to be examined improves, so the pass always makes progress)."""
    i = 0
    while i < len(st.boxes):
        single = _State(st.boxes[i : i + 1], st.xinv, st.z, st.t)
        _, axes, cuts, t = _evaluate(single, dims)
        if len(t) and t.min() < st.t * (1.0 - tol):
            j = int(np.flatnonzero(t <= t.min() + tie * abs(t.min()))[0])
            pending, boxes = _split(st, {i: (int(axes[j]), int(cuts[j]))}, dims)
            st = pending.apply(st, boxes)
            i += 2
        else:
            i += 1
    return st


__all__ = ["MODES", "LSAResult", "level_gram", "lsa", "spd_inverse", "split_sums"]
