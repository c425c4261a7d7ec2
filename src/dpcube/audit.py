"""Empirical privacy audit: a statistical lower bound on the epsilon a mechanism really spends.

The conformance suite (:mod:`dpcube.mechanisms.conformance`) checks declared sensitivities by brute
force; it cannot see a mechanism that adds the right noise to the wrong thing (a data-dependent
choice made without noise, a noise scale that is not what the claim needs). This module tests the
released output itself, in the style of DP-Sniper (Bichsel, Steffen, Bogunovic, Vechev, S&P 2021,
Alg. 1-2), StatDP (Ding, Wang, Wang, Zhang, Kifer, CCS 2018, Sec. 4) and Google's stochastic
tester:

1. **Neighbouring pairs are searched** (:func:`candidate_pairs`): from the conformance bases
   (empty, all ones, random) every neighbour under the notion is a candidate; they are ranked by
   how much the *noiseless* release changes (a record at a tree's split point or one that changes
   a selection moves the whole output, a record elsewhere moves one count), the empty-versus-one
   record pairs first among ties.
2. **Selection half**: each of the top pairs is released ``selection_runs`` times on both sides;
   events ``{projection(y) >= t}`` (and complements) over scalar projections of the released
   vector (each coordinate, the difference-of-means direction, and the minimum over the most
   shifted coordinates, the product event that attains a Laplace vector's full loss) are scored by
   the same Clopper-Pearson bound as below, and the best (pair, event, direction) is kept.
3. **Measurement half**: ``runs`` fresh releases on each side of the chosen pair give counts
   k0, k1 of the chosen event; with one-sided Clopper-Pearson bounds p0_lo, p1_hi, each at
   confidence 1 - (1 - c) / 2 (Bonferroni over the two), the bound

       epsilon_lb = ln((p0_lo - delta) / p1_hi)

   holds with probability at least c for an (epsilon, delta)-DP mechanism: P0(E) <= e^eps P1(E) +
   delta for every event E, and E was fixed before the measurement runs were drawn (no multiple
   testing correction is needed for the events or pairs tried in the selection half).

A **violation** is ``epsilon_lb > claimed epsilon``: a mechanism that keeps its claim is flagged
with probability at most 1 - c. The audit can only find loss that some scalar threshold event on
the released vector shows; passing is evidence, not proof.

With a privacy unit (``unit``: K rows, optionally C cells of R rows), the neighbouring pairs are
unit-level: one whole unit of every extreme shape (its rows packed from each cell on) or of a
random bounded shape is added, removed or replaced (:func:`dpcube.mechanisms.conformance.unit_neighbours`),
and the mechanism releases with that unit's sensitivities.

Releases run here are seeded (never for publication), unaccounted (``account=False``) and on
synthetic neighbouring inputs only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import beta

from dpcube.histogram import Histogram
from dpcube.mechanisms.conformance import (
    Case,
    case_neighbours,
    neighbouring_pairs,
    tiny_histograms,
    unit_neighbours,
)
from dpcube.privacy.random import NO_NOISE
from dpcube.privacy.unit import ROW, PrivacyUnit
from dpcube.release.base import Release
from dpcube.schema import Schema

#: Default confidence of a reported lower bound.
DEFAULT_CONFIDENCE = 0.95
#: Order of magnitude of the events scored in a selection half (the Bonferroni factor of its
#: scoring confidence).
_SELECTION_EVENTS = 1000
#: Consecutive-coordinate equality indicators tried as projections (the released structure).
_MAX_EQUALITY_PROJECTIONS = 64


# -- statistics -------------------------------------------------------------------------------
def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds on a binomial p from k successes in n trials: ``lo`` is
    a lower bound and ``hi`` an upper bound, each holding with probability ``confidence``.

    >>> lo, hi = clopper_pearson(50, 100, 0.95)
    >>> round(lo, 3), round(hi, 3)
    (0.414, 0.586)
    >>> clopper_pearson(0, 100, 0.95)[0], round(clopper_pearson(0, 100, 0.95)[1], 4)
    (0.0, 0.0295)
    """
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    alpha = 1.0 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1.0 - alpha, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(
    k0: int, n0: int, k1: int, n1: int, delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE
) -> float:
    """``ln((p0_lo - delta) / p1_hi)`` from k0 of n0 runs on one input and k1 of n1 on its
    neighbour showing the event; each one-sided bound at ``1 - (1 - confidence) / 2`` so both hold
    together with probability ``confidence``. Returns 0.0 when nothing can be concluded.

    >>> round(epsilon_lower_bound(880, 1000, 120, 1000), 3)
    1.801
    >>> epsilon_lower_bound(500, 1000, 480, 1000)
    0.0
    """
    each = 1.0 - (1.0 - confidence) / 2.0
    p0_lo, _ = clopper_pearson(k0, n0, each)
    _, p1_hi = clopper_pearson(k1, n1, each)
    if p0_lo - delta <= p1_hi:
        return 0.0
    return math.log((p0_lo - delta) / p1_hi)


def _bounds_many(
    k0: NDArray[np.int64], n0: int, k1: NDArray[np.int64], n1: int, delta: float, confidence: float
) -> NDArray[np.float64]:
    """Vectorised :func:`epsilon_lower_bound` (selection-half scoring)."""
    alpha = (1.0 - confidence) / 2.0
    k0f, k1f = k0.astype(np.float64), k1.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p0_lo = np.where(k0 > 0, beta.ppf(alpha, k0f, n0 - k0f + 1), 0.0)
        p1_hi = np.where(k1 < n1, beta.ppf(1.0 - alpha, k1f + 1, n1 - k1f), 1.0)
        out = np.log(np.maximum(p0_lo - delta, 0.0) / p1_hi)
    return np.where(np.isfinite(out) & (out > 0), out, 0.0)


# -- what a release shows ---------------------------------------------------------------------
def release_vector(release: Release, queries: Sequence[Any]) -> NDArray[np.float64]:
    """The released output as one float vector: the answers to ``queries`` and every released
    cell estimate the release exposes (cell counts, a spatial release's per-cell density, census
    group-size counts, every published cuboid). All of it is post-processing of the release."""
    parts: list[NDArray[Any]] = []
    if queries:
        parts.append(release.answer_many(list(queries)))
    for attr in ("counts", "density", "values"):
        value = getattr(release, attr, None)
        if isinstance(value, np.ndarray):
            parts.append(value.ravel())
    cuboid = getattr(release, "cuboid", None)
    if callable(cuboid):
        for attrs in getattr(release, "published", []):
            parts.append(np.asarray(cuboid(attrs)).ravel())
    if not parts:
        raise ValueError(f"{type(release).__name__}: nothing to audit (no queries, no cells)")
    return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])


# -- neighbouring pairs -----------------------------------------------------------------------
@dataclass(frozen=True)
class Pair:
    """Two neighbouring inputs (histogram counts) and how they were found."""

    x0: NDArray[np.int64]
    x1: NDArray[np.int64]
    label: str
    #: Noiseless release of x0 minus that of x1 (filled in by :func:`candidate_pairs`).
    noiseless_shift: NDArray[np.float64] | None = None


def _label(base: str, x0: NDArray[np.int64], x1: NDArray[np.int64]) -> str:
    diff = (x1 - x0).ravel()
    plus = [int(i) for i in np.flatnonzero(diff > 0)]
    minus = [int(i) for i in np.flatnonzero(diff < 0)]
    if plus and minus:
        return f"{base}: one record moved from cell {minus[0]} to cell {plus[0]}"
    if plus:
        return f"{base}: plus one record in cell {plus[0]}"
    return f"{base}: minus one record in cell {minus[0]}"


def _neighbours_of(
    counts: NDArray[np.int64], neighbour: str, cap: int, rng: np.random.Generator
) -> list[NDArray[np.int64]]:
    """Every neighbour of ``counts`` (:func:`neighbouring_pairs`) on a small domain; on a larger
    one (more than ``4 cap`` neighbours) a seeded sample of ``cap`` of them, in cell order."""
    cells = counts.size
    if (2 * cells if neighbour == "add_remove" else cells * cells) <= 4 * cap:
        return neighbouring_pairs(counts, neighbour)
    flat = counts.ravel()
    out = []
    if neighbour == "add_remove":
        for i in np.sort(rng.choice(cells, size=min(cap, cells), replace=False)):
            y = flat.copy()
            y[i] += 1
            out.append(y.reshape(counts.shape))
        return out
    occupied = np.flatnonzero(flat > 0)
    if occupied.size == 0:
        return out
    for _ in range(cap):
        i = int(rng.choice(occupied))
        j = int((i + 1 + rng.integers(cells - 1)) % cells)
        y = flat.copy()
        y[i] -= 1
        y[j] += 1
        out.append(y.reshape(counts.shape))
    return out


def candidate_pairs(
    case: Case,
    mechanism: Any,
    neighbour: str,
    *,
    limit: int = 3,
    max_screened: int = 48,
    seed: int = 0,
    unit: PrivacyUnit = ROW,
) -> list[Pair]:
    """The ``limit`` neighbouring pairs whose noiseless releases differ most (in the most
    coordinates, then in L1: a moved split or selection changes many), from the conformance bases; at most ``max_screened`` pairs are screened (all from the empty and all-ones
    bases first, then a seeded sample of the rest). Ties keep the screening order, so the
    empty-versus-one-record pairs come first."""
    names = ("empty", "ones", "random")
    rng = np.random.default_rng(seed)
    screened: list[Pair] = []
    for name, hist in zip(names, tiny_histograms(case.schema), strict=True):
        if not unit.is_row:
            for x0, x1 in unit_neighbours(hist.counts, unit, neighbour, rng):
                screened.append(Pair(x0, x1, _unit_label(name, x0, x1)))
            continue
        for y in _neighbours_of(hist.counts, neighbour, max_screened, rng):
            screened.append(Pair(hist.counts, y, _label(name, hist.counts, y)))
    if len(screened) > max_screened:
        order = rng.permutation(len(screened))
        screened = [screened[i] for i in sorted(order[:max_screened])]
    moves: list[tuple[float, float]] = []
    for i, pair in enumerate(screened):
        v0 = _view(case, mechanism, pair.x0, NO_NOISE, unit)
        v1 = _view(case, mechanism, pair.x1, NO_NOISE, unit)
        same = v0.shape == v1.shape
        change = v0 - v1 if same else None
        moves.append(
            (float(np.count_nonzero(change)), float(np.abs(change).sum()))
            if change is not None
            else (math.inf, math.inf)
        )
        screened[i] = replace(pair, noiseless_shift=change)
    ranked = sorted(range(len(screened)), key=lambda i: (-moves[i][0], -moves[i][1]))
    return [screened[i] for i in ranked[:limit]]


def _unit_label(base: str, x0: NDArray[np.int64], x1: NDArray[np.int64]) -> str:
    diff = (x1 - x0).ravel()
    added = {int(i): int(diff[i]) for i in np.flatnonzero(diff > 0)}
    removed = {int(i): int(-diff[i]) for i in np.flatnonzero(diff < 0)}
    if removed:
        return f"{base}: one unit's rows {removed} replaced by {added} (cell: rows)"
    return f"{base}: plus one unit of rows {added} (cell: rows)"


def _view(
    case: Case,
    mechanism: Any,
    counts: NDArray[np.int64],
    random_state: Any,
    unit: PrivacyUnit = ROW,
) -> Any:
    data = case.prepare(Histogram(case.schema, counts, privacy_unit=unit))
    release = mechanism.release(data, random_state=random_state, account=False)
    return release_vector(release, case.queries)


def sample_outputs(
    case: Case,
    mechanism: Any,
    counts: NDArray[np.int64],
    runs: int,
    rng: np.random.Generator,
    min_width: int = 0,
    unit: PrivacyUnit = ROW,
) -> NDArray[np.float64]:
    """``runs`` releases of ``counts`` (seeded from ``rng``, unaccounted), one vector a row
    (padded with NaN to the longest, and to at least ``min_width``)."""
    rows = [_view(case, mechanism, counts, rng, unit) for _ in range(runs)]
    width = max([min_width, *(r.size for r in rows)])
    out = np.full((runs, width), np.nan)
    for i, r in enumerate(rows):
        out[i, : r.size] = r
    return out


# -- events -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    """``{projection(y) >= threshold}``, or its complement when ``upper`` is False; ``swap`` says
    the second input of the pair is the one more likely to show it."""

    projection: str
    apply: Callable[[NDArray[np.float64]], NDArray[np.float64]]
    threshold: float
    upper: bool
    swap: bool

    def hits(self, outputs: NDArray[np.float64]) -> NDArray[np.bool_]:
        p = self.apply(outputs)
        return (p >= self.threshold) if self.upper else ~(p >= self.threshold)

    def describe(self) -> str:
        op = ">=" if self.upper else "<"
        return f"{self.projection} {op} {self.threshold:.6g}"


def projections(
    y0: NDArray[np.float64],
    y1: NDArray[np.float64],
    noiseless_shift: NDArray[np.float64] | None = None,
) -> list[tuple[str, Callable[[NDArray[np.float64]], NDArray[np.float64]]]]:
    """Scalar projections of the released vector chosen from the selection samples: every
    coordinate, the binary digits of each fractional coordinate (:func:`fraction_digits`), the
    number of equal consecutive coordinates (the released structure), the
    standardised difference-of-means direction, and the minimum (and maximum) of the standardised
    coordinates that move most (product events of a shifted noise vector). The difference of the
    noiseless releases, where given, is a second (noise-free) direction."""
    width = y0.shape[1]
    out: list[tuple[str, Projection]] = [(f"y[{j}]", _coordinate(j)) for j in range(width)]
    fractional = np.flatnonzero(
        np.any(np.isfinite(y0) & (y0 != np.round(y0)), axis=0)
        | np.any(np.isfinite(y1) & (y1 != np.round(y1)), axis=0)
    )
    out.extend((f"binary digits of y[{j}]", _binary_digits(int(j))) for j in fractional)
    if width > 1:
        out.append(("equal neighbouring coordinates", _equal_neighbours))
        for j in range(min(width - 1, _MAX_EQUALITY_PROJECTIONS)):
            out.append((f"y[{j}] == y[{j + 1}]", _equal_pair(j)))
    pooled = np.concatenate([y0, y1])
    m0, m1 = np.nanmean(y0, axis=0), np.nanmean(y1, axis=0)
    sd = np.nan_to_num(np.nanstd(pooled, axis=0), nan=0.0)
    sd = np.where(sd > 0, sd, 1.0)
    directions = [("difference", np.nan_to_num((m0 - m1) / sd))]
    if noiseless_shift is not None and noiseless_shift.shape == (width,):
        directions.append(("noiseless difference", noiseless_shift / sd))
    for label, shift in directions:
        out.extend(_directional(label, shift, m0, m1, sd))
    return out


Projection = Callable[[NDArray[np.float64]], NDArray[np.float64]]


def _coordinate(j: int) -> Projection:
    def project(y: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.nan_to_num(y[:, j], nan=-np.inf)

    return project


def fraction_digits(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """How many binary digits after the point a float has (its lowest set bit is 2**-digits):
    the low-order bits by which textbook floating-point Laplace noise leaks the input (Mironov,
    CCS 2012, Sec. 3): ``x + noise`` rounds to a coarser grid than ``noise`` alone near 0.

    >>> fraction_digits(np.array([0.75, 3.0, 2.0**-60, 1.0 + 2.0**-52, 0.0]))
    array([ 2.,  0., 60., 52., nan])
    """
    y = np.asarray(y, dtype=np.float64)
    out = np.full(y.shape, np.nan)
    ok = np.isfinite(y) & (y != 0)
    mantissa, exponent = np.frexp(np.abs(y[ok]))
    integer = (mantissa * 2.0**53).astype(np.int64)
    lowest = integer & -integer
    out[ok] = 53 - exponent - (np.frexp(lowest.astype(np.float64))[1] - 1)
    return out


def _binary_digits(j: int) -> Projection:
    def project(y: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.nan_to_num(fraction_digits(y[:, j]), nan=-np.inf)

    return project


def _equal_pair(j: int) -> Projection:
    def project(y: NDArray[np.float64]) -> NDArray[np.float64]:
        return _equal_neighbours(y[:, j : j + 2])

    return project


def _equal_neighbours(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """How many consecutive coordinates are equal: the shape of a released structure (cells spread
    evenly over a tree's leaf or a grid's block are equal), which a data-dependent split moves.

    >>> _equal_neighbours(np.array([[1.0, 1.0, 2.0], [1.0, 2.0, 3.0]]))
    array([1., 0.])
    """
    same = np.isclose(y[:, 1:], y[:, :-1], rtol=1e-12, atol=1e-12)
    return np.asarray(same.sum(axis=1), dtype=np.float64)


def _directional(
    label: str,
    shift: NDArray[np.float64],
    m0: NDArray[np.float64],
    m1: NDArray[np.float64],
    sd: NDArray[np.float64],
) -> list[tuple[str, Callable[[NDArray[np.float64]], NDArray[np.float64]]]]:
    out: list[tuple[str, Callable[[NDArray[np.float64]], NDArray[np.float64]]]] = []
    if np.any(shift != 0):
        mid = np.nan_to_num((m0 + m1) / 2)
        out.append((f"{label} direction", lambda y: np.nan_to_num((y - mid) / sd) @ shift))
        top = np.flatnonzero(np.abs(shift) >= 0.5 * np.abs(shift).max())
        sign = np.sign(shift[top])
        if top.size > 1:

            def lowest(y: NDArray[np.float64]) -> NDArray[np.float64]:
                z = np.nan_to_num((y[:, top] - mid[top]) / sd[top] * sign, nan=-np.inf)
                return np.asarray(z.min(axis=1))

            def highest(y: NDArray[np.float64]) -> NDArray[np.float64]:
                z = np.nan_to_num((y[:, top] - mid[top]) / sd[top] * sign, nan=np.inf)
                return np.asarray(z.max(axis=1))

            out.append((f"min of {top.size} {label}-shifted coordinates", lowest))
            out.append((f"max of {top.size} {label}-shifted coordinates", highest))
    return out


def select_event(
    y0: NDArray[np.float64],
    y1: NDArray[np.float64],
    delta: float,
    confidence: float,
    noiseless_shift: NDArray[np.float64] | None = None,
) -> tuple[Event, float]:
    """The event that separates the two selection samples best, with its selection-half bound."""
    n0, n1 = len(y0), len(y1)
    best: tuple[float, Event] | None = None
    # Scored at a Bonferroni-strict confidence over the events tried: the plain maximum over
    # thousands of events picks small-count tails that the selection noise inflated (and the
    # measurement half then refutes); the strict bound prefers events with stable counts.
    strict = 1.0 - (1.0 - confidence) / _SELECTION_EVENTS
    levels = np.concatenate([np.linspace(0.0, 1.0, 41), [0.005, 0.01, 0.02, 0.98, 0.99, 0.995]])
    for name, apply in projections(y0, y1, noiseless_shift):
        p0, p1 = apply(y0), apply(y1)
        pooled = np.concatenate([p0, p1])
        finite = pooled[np.isfinite(pooled)]
        if finite.size == 0:
            continue
        thresholds = np.unique(
            np.concatenate([np.quantile(finite, levels), np.unique(finite)[:64]])
        )
        thresholds = np.unique(np.concatenate([thresholds, np.unique(finite)[-64:]]))
        k0 = (p0[None, :] >= thresholds[:, None]).sum(axis=1)
        k1 = (p1[None, :] >= thresholds[:, None]).sum(axis=1)
        for upper, a0, a1 in ((True, k0, k1), (False, n0 - k0, n1 - k1)):
            for swap, b0, c0, b1, c1 in ((False, a0, n0, a1, n1), (True, a1, n1, a0, n0)):
                # Lexicographic: the strict bound, then the plain one, then the smoothed point
                # estimate of the log ratio (so that an uninformative selection still picks
                # the most promising event rather than the first).
                estimate = np.log((b0 + 0.5) / (c0 + 1.0)) - np.log((b1 + 0.5) / (c1 + 1.0))
                scores = (
                    _bounds_many(b0, c0, b1, c1, delta, strict)
                    + 1e-3 * _bounds_many(b0, c0, b1, c1, delta, confidence)
                    + 1e-6 * np.clip(estimate, -100.0, 100.0)
                )
                i = int(np.argmax(scores))
                if best is None or scores[i] > best[0]:
                    best = (
                        float(scores[i]),
                        Event(name, apply, float(thresholds[i]), upper, swap),
                    )
    if best is None:
        raise ValueError("no finite output to audit")
    return best[1], best[0]


# -- the audit --------------------------------------------------------------------------------
@dataclass
class AuditResult:
    """One audit: the claim, the lower bound at its confidence, and what found it."""

    mechanism: str
    case: str
    neighbour: str
    claimed: float
    delta: float
    lower_bound: float
    confidence: float
    violation: bool
    runs: int
    pair: str
    event: str
    selection_bound: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        verdict = "VIOLATION" if self.violation else "ok"
        return (
            f"{self.case} [{self.neighbour}]: epsilon lower bound {self.lower_bound:.4g} "
            f"({self.confidence:.0%} confidence) vs claimed {self.claimed:g}"
            + (f" (delta {self.delta:g})" if self.delta else "")
            + f": {verdict}; {self.runs} runs a side; pair {self.pair}; event {self.event}"
        )


def audit(
    case: Case,
    neighbour: str,
    *,
    mechanism: Any = None,
    runs: int = 1000,
    selection_runs: int | None = None,
    pairs: int = 3,
    screened: int = 48,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    unit: PrivacyUnit = ROW,
) -> AuditResult:
    """Audit ``mechanism`` (default ``case.make(neighbour)``) on neighbouring inputs of ``case``'s
    schema: search pairs, select an event on ``selection_runs`` releases a side of each of the top
    ``pairs`` pairs (default ``runs // 2``) of the ``screened`` pairs ranked by
    :func:`candidate_pairs`, then measure it on ``runs`` fresh releases a side. With ``unit``
    the pairs differ in one unit and the mechanism protects that unit."""
    if runs < 10:
        raise ValueError(f"runs must be at least 10, got {runs}")
    mech = case.make(neighbour) if mechanism is None else mechanism
    if not unit.is_row:
        mech = mech.with_unit(unit)
    claimed = float(mech.epsilon)
    delta = float(mech.charged_delta or 0.0)
    rng = np.random.default_rng(seed)
    sel = max(10, runs // 2) if selection_runs is None else selection_runs
    best: tuple[float, Pair, Event, int] | None = None
    for pair in candidate_pairs(
        case, mech, neighbour, limit=pairs, max_screened=screened, seed=seed, unit=unit
    ):
        y0 = sample_outputs(case, mech, pair.x0, sel, rng, unit=unit)
        y1 = sample_outputs(case, mech, pair.x1, sel, rng, min_width=y0.shape[1], unit=unit)
        if y0.shape[1] < y1.shape[1]:
            y0 = np.pad(y0, ((0, 0), (0, y1.shape[1] - y0.shape[1])), constant_values=np.nan)
        event, score = select_event(y0, y1, delta, confidence, pair.noiseless_shift)
        if best is None or score > best[0]:
            best = (score, pair, event, y1.shape[1])
    assert best is not None, "a neighbour notion always has neighbouring pairs"
    score, pair, event, width = best
    first, second = (pair.x1, pair.x0) if event.swap else (pair.x0, pair.x1)
    # The event reads the first ``width`` coordinates (the selection samples' width).
    k0 = int(event.hits(sample_outputs(case, mech, first, runs, rng, width, unit)[:, :width]).sum())
    k1 = int(
        event.hits(sample_outputs(case, mech, second, runs, rng, width, unit)[:, :width]).sum()
    )
    bound = epsilon_lower_bound(k0, runs, k1, runs, delta, confidence)
    return AuditResult(
        mechanism=str(getattr(mech, "name", type(mech).__name__)),
        case=case.id,
        neighbour=neighbour if unit.is_row else f"{neighbour}, unit {unit.manifest()}",
        claimed=claimed,
        delta=delta,
        lower_bound=bound,
        confidence=confidence,
        violation=bound > claimed,
        runs=runs,
        pair=pair.label + (" (sides swapped)" if event.swap else ""),
        event=f"{event.describe()}: {k0}/{runs} vs {k1}/{runs}",
        selection_bound=score,
    )


# -- registered mechanisms --------------------------------------------------------------------
def registered_cases(name: str) -> list[Case]:
    """The conformance cases of the mechanism registered as ``name``."""
    from dpcube import registry

    cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
    return list(cls.conformance_cases())


def audit_cases(
    name: str,
    *,
    runs: int = 1000,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    first_only: bool = False,
    pairs: int = 3,
    screened: int = 48,
    selection_runs: int | None = None,
) -> list[AuditResult]:
    """Audit the registered mechanism ``name`` on its conformance cases (or the first only),
    under every neighbour notion each case supports."""
    results = []
    cases = registered_cases(name)
    for case in cases[:1] if first_only else cases:
        for neighbour in case_neighbours(case):
            results.append(
                audit(
                    case,
                    neighbour,
                    runs=runs,
                    selection_runs=selection_runs,
                    pairs=pairs,
                    screened=screened,
                    confidence=confidence,
                    seed=seed,
                )
            )
    return results


def parameter_sweep(name: str, base: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The configurations a sweep audits: ``base`` (default: the defaults) with one parameter
    set to each value inside its declared domain that its declaration lists
    (:meth:`dpcube.mechanisms.params.ParamSpec.examples`: the bounds, a middle value, every
    choice), one parameter at a time; ``base`` itself first.

    >>> [c for c in parameter_sweep("privtree") if "tree_share" in c]
    [{'tree_share': 0.5}]
    """
    from dpcube import registry

    cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
    base = dict(base or {})
    configurations: list[dict[str, Any]] = [base]
    for spec in cls.parameters():
        if spec.name in base:
            continue
        for value in spec.examples()[0]:
            configuration = {**base, spec.name: value}
            if configuration not in configurations:
                configurations.append(configuration)
    return configurations


def audit_configuration(
    name: str,
    params: dict[str, Any],
    epsilon: float,
    *,
    delta: float | None = None,
    neighbours: Sequence[str] | None = None,
    schema: Schema | None = None,
    runs: int = 1000,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    unit: PrivacyUnit = ROW,
) -> list[AuditResult]:
    """Audit the mechanism ``name`` built with ``params`` (as ``dpcube release --param``) at
    ``epsilon`` (and ``delta``), under each of ``neighbours`` (default: all it supports), on
    synthetic neighbouring histograms of the schema of its first conformance case, or of
    ``schema`` (then the released cells are audited, not the case's queries)."""
    from dpcube import registry

    cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
    case = cls.conformance_cases()[0]
    if schema is not None:
        case = replace(case, id=f"{case.id} (given schema)", schema=schema, queries=())
    chosen = list(neighbours) if neighbours else [n.value for n in cls.neighbours]
    privacy: dict[str, Any] = {"epsilon": epsilon}
    if delta is not None:
        privacy["delta"] = delta
    results = []
    for neighbour in chosen:
        mechanism = cls(neighbour=neighbour, **privacy, **params)
        result = audit(
            case,
            neighbour,
            mechanism=mechanism,
            runs=runs,
            confidence=confidence,
            seed=seed,
            unit=unit,
        )
        result.case = f"{name} on synthetic data of the {case.id} schema"
        results.append(result)
    return results
