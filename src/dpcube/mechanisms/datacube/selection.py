"""Choosing the measured cuboids L_pre (Ding, Winslett, Han, Li, SIGMOD 2011, Secs. 4.1,
4.2 and 7.2).

- :func:`bound_max_variance`: Algorithm 1 (BOUND MAX VARIANCE, "BMax"): binary search over the
  variance bound, each step a greedy SET COVER for every sensitivity s (FEASIBLE, lines 6-12).
- :func:`publish_most`: Algorithm 2 (PUBLISH MOST, "PMost"): greedy max-coverage for every s at
  the fixed bound theta0.
- :func:`optimal_budgets`: the non-uniform budget allocation of Sec. 7.2 (which gives no algorithm;
  ours is a cost-weighted set cover).

All bounds are in epsilon-free units ``u = theta * eps^2`` and coverage is tested in exact integer
arithmetic, ``2 s^2 mag <= u`` (so that threshold ties cannot flip by rounding), so the chosen
cuboids never depend on epsilon. A *prefix optimisation* of ours is used: for a bound u,
FEASIBLE(L, u, s) depends on s only through ``m(s)``, the largest mag value ``<= u / (2 s^2)``; the
greedy pick sequence for one coverage family is fixed and FEASIBLE with s picks is its
length-s prefix, so each family is run once (and cached across the binary search).

>>> from dpcube.mechanisms.datacube.lattice import Lattice
>>> lat = Lattice((2, 7, 5))
>>> sel = bound_max_variance(lat, list(range(8)))
>>> sel.bound_u, [lat.label(c) for c in sel.sources]       # Example 4.1
(Fraction(64, 1), ['C111', 'C101', 'C110', 'C100'])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpcube.mechanisms.datacube.lattice import Lattice


@dataclass(frozen=True)
class Selection:
    """The measured cuboids and what the selection guarantees.

    ``sources``: L_pre in pick order. ``bound_u``: ``max_{C in L} noise(C, L_pre) * eps^2`` under
    uniform budgets, ``2 |L_pre|^2 max_C min mag`` (theta', the achieved bound, which can be below
    the searched theta*). ``theta_star_u``: theta* of the binary search (BMax only). ``shares``: the
    fraction of epsilon spent on each source (uniform: 1/s each). ``info``: method-specific figures
    (precise counts, trace).
    """

    sources: tuple[int, ...]
    bound_u: Fraction
    shares: tuple[Fraction, ...]
    theta_star_u: Fraction | None = None
    info: dict[str, object] = field(default_factory=dict)


class Coverage:
    """``mag(C, C')`` for every candidate C' (all 2^d, in the tie-break order of
    :meth:`Lattice.candidate_order`) and every C in L."""

    def __init__(self, lattice: Lattice, published: Sequence[int]) -> None:
        self.lattice = lattice
        self.published = list(published)
        self.candidates = lattice.candidate_order()
        inf = np.iinfo(np.int64).max
        # cells[x] = prod of |A_i| over the dimensions of x, by a doubling recursion over bits
        cells = np.ones(1, dtype=np.int64)
        for k in lattice.cards:
            cells = np.concatenate([cells, cells * k])
        cand = np.asarray(self.candidates, dtype=np.int64)[:, None]
        pub = np.asarray(self.published, dtype=np.int64)[None, :]
        self.mag = np.where((pub & ~cand) == 0, cells[cand & ~pub], inf)
        self.values = np.unique(self.mag[self.mag < inf])
        self._greedy: dict[tuple[int, bytes | None], tuple[list[int], list[float]]] = {}

    def threshold(self, u: Fraction, s: int) -> int | None:
        """``m(s)``: the largest mag value ``<= u / (2 s^2)`` (None when nothing can be covered)."""
        tau = math.floor(u / (2 * s * s))
        i = int(np.searchsorted(self.values, tau, side="right"))
        return int(self.values[i - 1]) if i > 0 else None

    def greedy(
        self, m: int, weights: NDArray[np.float64] | None = None
    ) -> tuple[list[int], list[float]]:
        """Greedy cover with family ``cov(C') = {C in L : mag(C, C') <= m}`` run until no gain.

        Returns the picks (candidate indices) and the covered weight after each pick. Ties go to the
        first candidate in that tie-break order; a chosen candidate is never picked again.
        """
        key = (m, None if weights is None else weights.tobytes())
        if key in self._greedy:
            return self._greedy[key]
        cov = self.mag <= m
        w = np.ones(len(self.published)) if weights is None else weights
        gains = cov.astype(np.float64) @ w
        uncovered = np.ones(len(self.published), dtype=bool)
        picks: list[int] = []
        covered: list[float] = []
        total = 0.0
        while True:
            j = int(np.argmax(gains))
            if gains[j] <= 0:
                break
            picks.append(j)
            new = cov[j] & uncovered
            uncovered &= ~new
            total += float(w[new].sum())
            covered.append(total)
            gains -= cov[:, new].astype(np.float64) @ w[new]
            gains[j] = -1.0
        self._greedy[key] = (picks, covered)
        return picks, covered

    def sources(self, picks: Sequence[int]) -> tuple[int, ...]:
        return tuple(self.candidates[j] for j in picks)

    def best_mag(self, sources: Sequence[int]) -> NDArray[np.int64]:
        """``min_{C' in sources} mag(C, C')`` for every C in L (int64 max where not computable)."""
        rows = [self.candidates.index(s) for s in sources]
        return np.asarray(self.mag[rows].min(axis=0))

    def noise_u(self, sources: Sequence[int]) -> Fraction:
        """Actual ``noise(L_pre) * eps^2 = 2 |L_pre|^2 max_C min mag`` (inf-like when not computable)."""
        worst = int(self.best_mag(sources).max())
        return Fraction(2 * len(sources) ** 2 * worst)


def feasible(cov: Coverage, u: Fraction, s: int) -> tuple[int, ...] | None:
    """FEASIBLE(L, theta, s) of Algorithm 1 (lines 6-12) with ``u = theta eps^2``: the greedy cover with
    at most s picks, or None when it does not cover L.

    >>> from dpcube.mechanisms.datacube.lattice import Lattice
    >>> lat = Lattice((2, 7, 5)); cov = Coverage(lat, list(range(8)))
    >>> [lat.label(c) for c in feasible(cov, Fraction(80), 2)]
    ['C111', 'C101']
    """
    m = cov.threshold(u, s)
    if m is None:
        return None
    picks, covered = cov.greedy(m)
    if picks and covered[-1] == len(cov.published) and len(picks) <= s:
        return cov.sources(picks)
    return None


def _feasible_any(cov: Coverage, u: Fraction) -> list[tuple[int, tuple[int, ...]]]:
    """Every (s, L_pre) with FEASIBLE(L, u, s) != NO, s = 1 .. |L| (stops once u / 2s^2 < 1)."""
    out = []
    for s in range(1, len(cov.published) + 1):
        if u < 2 * s * s:
            break
        found = feasible(cov, u, s)
        if found is not None:
            out.append((s, found))
    return out


def bound_max_variance(
    lattice: Lattice, published: Sequence[int], robust: bool = False
) -> Selection:
    """Algorithm 1 (BOUND MAX VARIANCE) (Sec. 4.1), with the choices it leaves open (which s to
    return, the reported bound) made here.

    Binary search over ``u`` from ``[0, 2|L|^2]`` (K_all's bound) until the interval is at most 1
    (distinct noise values differ by at least 2); theta* = the right end. Among every s feasible at
    theta*, return the L_pre with the least actual noise, then fewer cuboids, then smaller s.
    ``robust=True`` also keeps the best solution seen in any call and K_all / K_base (A5c).
    """
    cov = Coverage(lattice, published)
    lo, hi = Fraction(0), Fraction(2 * len(cov.published) ** 2)
    trace: list[tuple[float, bool]] = []
    seen: list[tuple[int, tuple[int, ...]]] = []
    while hi - lo > 1:
        mid = (lo + hi) / 2
        found = _feasible_any(cov, mid)
        trace.append((float(mid), bool(found)))
        if robust:
            seen.extend(found)
        if found:
            hi = mid
        else:
            lo = mid
    options = _feasible_any(cov, hi)
    if robust:
        options += [*seen, (len(cov.published), tuple(cov.published)), (1, (lattice.base,))]
    s, best = min(options, key=lambda o: (cov.noise_u(o[1]), len(o[1]), o[0]))
    n = len(best)
    return Selection(
        sources=best,
        bound_u=cov.noise_u(best),
        shares=tuple(Fraction(1, n) for _ in best),
        theta_star_u=hi,
        info={"trace": trace, "s": s, "feasible_s": [o[0] for o in _feasible_any(cov, hi)]},
    )


def publish_most(
    lattice: Lattice,
    published: Sequence[int],
    theta0_u: Fraction,
    weights: Mapping[int, float] | None = None,
) -> Selection:
    """Algorithm 2 (PUBLISH MOST): maximise the weight of cuboids with variance <= theta0.

    For each s, GREEDYCOVER(L, theta0, s) is the length-s prefix of the greedy run for family m(s).
    Best R_s: largest covered weight, then least actual noise (after adding the base cuboid when
    some cuboid of L would not be computable, as Sec. 4.2 says), then smaller s (the paper leaves
    ties open). When nothing can be precise, K_base. ``info`` reports the greedy weight and the
    actual precise count.
    """
    cov = Coverage(lattice, published)
    w = None if weights is None else np.array([float(weights.get(c, 1.0)) for c in cov.published])
    inf = np.iinfo(np.int64).max
    options: list[tuple[float, Fraction, int, tuple[int, ...]]] = []
    for s in range(1, len(cov.published) + 1):
        m = cov.threshold(theta0_u, s)
        if m is None:
            break
        picks, covered = cov.greedy(m, w)
        if not picks:
            continue
        k = min(s, len(picks))
        chosen = cov.sources(picks[:k])
        if int(cov.best_mag(chosen).max()) == inf and lattice.base not in chosen:
            chosen = (*chosen, lattice.base)
        options.append((covered[k - 1], cov.noise_u(chosen), s, chosen))
    best: tuple[int, ...]
    if not options or max(o[0] for o in options) <= 0:
        weight, s, best = 0.0, 1, (lattice.base,)
    else:
        weight, _, s, best = min(options, key=lambda o: (-o[0], o[1], o[2]))
    variance_u = 2 * len(best) ** 2 * cov.best_mag(best)
    precise = int(sum(1 for v in variance_u.tolist() if v <= theta0_u))
    n = len(best)
    return Selection(
        sources=best,
        bound_u=cov.noise_u(best),
        shares=tuple(Fraction(1, n) for _ in best),
        info={"s": s, "greedy_weight": weight, "precise": precise, "theta0_u": theta0_u},
    )


def _sqrt_shares(roots: Sequence[float]) -> tuple[Fraction, ...]:
    """Shares ``eps_j / eps = sqrt(m_j) / sum sqrt(m_k)`` as exact fractions that sum to 1."""
    total = sum(roots)
    shares = [Fraction(r / total).limit_denominator(2**40) for r in roots[:-1]]
    return (*shares, 1 - sum(shares, Fraction(0)))


def allocated_bound(cov: Coverage, sources: Sequence[int], shares: Sequence[Fraction]) -> Fraction:
    """``max_C min_j mag(C, C_j) * 2 / share_j^2`` (eps-free units)."""
    rows = [cov.candidates.index(s) for s in sources]
    mags = cov.mag[rows].astype(object)
    worst = Fraction(0)
    for col in range(len(cov.published)):
        best = min(
            Fraction(2 * int(mags[r, col])) / (shares[r] ** 2)
            for r in range(len(rows))
            if int(mags[r, col]) != np.iinfo(np.int64).max
        )
        worst = max(worst, best)
    return worst


def allocate(cov: Coverage, sources: Sequence[int]) -> tuple[tuple[int, ...], tuple[Fraction, ...]]:
    """The budget split minimising the max variance for a fixed L_pre (Sec. 7.2).

    Each C in L is served by its least-mag source; with ``m_j`` the largest mag a source serves,
    ``eps_j ∝ sqrt(m_j)`` minimises ``max_j 2 m_j / eps_j^2`` subject to ``sum eps_j = eps``, giving
    ``2 (sum_j sqrt m_j)^2 / eps^2``. Sources that serve nothing are dropped.
    """
    rows = [cov.candidates.index(s) for s in sources]
    mags = cov.mag[rows]
    serve = np.argmin(mags, axis=0)
    kept: list[int] = []
    roots: list[float] = []
    for r, src in enumerate(sources):
        served = mags[r, serve == r]
        if served.size:
            kept.append(src)
            roots.append(math.sqrt(int(served.max())))
    return tuple(kept), _sqrt_shares(roots)


def optimal_budgets(lattice: Lattice, published: Sequence[int], start: Selection) -> Selection:
    """Non-uniform budgets (Sec. 7.2; the algorithm is ours, the paper gives none) for BOUND MAX
    VARIANCE.

    Weighted set cover over balls ``(C', m) = {C in L : mag(C, C') <= m}`` with cost sqrt(m) (a
    source already chosen with radius m1 pays only ``sqrt(m) - sqrt(m1)``); the greedy picks the ball
    of most newly covered cuboids per unit cost. The budget is then split by :func:`allocate`.
    The result is compared with :func:`allocate` applied to ``start`` (the uniform selection), and
    the one with the smaller max variance is returned, so it is never worse than ``start``.
    """
    cov = Coverage(lattice, published)
    inf = np.iinfo(np.int64).max
    uncovered = np.ones(len(cov.published), dtype=bool)
    radius = np.zeros(len(cov.candidates), dtype=np.int64)
    order = np.argsort(cov.mag, axis=1, kind="stable")
    sorted_mag = np.take_along_axis(cov.mag, order, axis=1)
    while uncovered.any():
        newly = np.cumsum(uncovered[order], axis=1)
        valid = (sorted_mag < inf) & (sorted_mag > radius[:, None])
        last = np.ones_like(valid)
        last[:, :-1] = sorted_mag[:, 1:] != sorted_mag[:, :-1]
        cost = np.sqrt(np.where(valid, sorted_mag, 1).astype(np.float64)) - np.sqrt(radius)[:, None]
        # cuboids within a chosen source's radius are covered already, so ``newly`` is the gain
        ratio = np.where(valid & last & (newly > 0), newly / np.maximum(cost, 1e-300), -1.0)
        i, k = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        radius[i] = sorted_mag[i, k]
        uncovered &= cov.mag[i] > radius[i]
    chosen = [cov.candidates[i] for i in range(len(radius)) if radius[i] > 0]
    chosen.sort(key=lambda c: cov.candidates.index(c))
    options = [allocate(cov, chosen), allocate(cov, start.sources)]
    scored = [(allocated_bound(cov, srcs, sh), len(srcs), srcs, sh) for srcs, sh in options]
    bound, _, sources, shares = min(scored, key=lambda x: (x[0], x[1]))
    info = dict(start.info)
    info.update(uniform_bound_u=start.bound_u, weighted_cover=[lattice.label(c) for c in chosen])
    return Selection(
        sources=sources, bound_u=bound, shares=shares, theta_star_u=start.theta_star_u, info=info
    )
