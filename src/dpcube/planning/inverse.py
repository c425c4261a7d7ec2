"""The inverse question: what epsilon does a target error need? ("this workload with at most
+-E at 95 % needs epsilon >= X under mechanism M").

Every exact candidate answers a query with the true value plus ``Z = Σ aᵢ Nᵢ``, a fixed linear
combination of independent noise draws. The half-width of the ``level`` interval is the smallest E
with ``P(|Z| > E) ≤ 1 − level`` by a bound that holds for *every* such combination, never a
normal approximation where the noise is not Gaussian (one Laplace draw, e.g. a one-cell query of
Identity, has a 95 % half-width of 2.12 sd, not 1.96 sd):

- ``tail="laplace"`` (continuous Laplace draws: the snapped samplers of the matrix mechanism and
  Privelet): Lap(b) is a Gaussian scale mixture, ``b sqrt(2W) G`` with W ~ Exp(1), G ~ N(0, 1), so
  given the Ws, Z is normal with variance ``σ² Σ wᵢ Wᵢ`` (``Σ wᵢ = 1``). Then
  ``P(|Z| > E) = E[h(σ² Σ wᵢ Wᵢ)]`` with ``h(s) = 2Φ̄(E/√s)``. h is convex up to its inflection
  ``s = E²/3`` and concave after; ``h̃`` = h up to there and its tangent after is convex and
  ``≥ h``, and ``Σ wᵢ Wᵢ`` is below ``W`` in the convex order (Jensen), so
  ``P(|Z| > E) ≤ E[h̃(σ² W)]``: a bound in σ alone, attained up to the tangent by a single draw.
  :func:`laplace_factor` solves it: κ = 2.161 at 95 % (Chebyshev would give 4.47).
- ``tail="discrete-laplace"`` (Identity, data cubes without consistency, the Basic method): the
  answer is a sum of c i.i.d. discrete Laplace draws, whose tail is computed exactly
  (:func:`discrete_laplace_sum_tail`, a difference of negative binomials). Where that sum is too
  long, the coupling bound: a discrete Laplace draw X
  of scale b and a continuous L ~ Lap(b) satisfy ``|X| − 1 ≤st |L| ≤st |X| + 1``
  (``P(|X| ≥ k) = 2pᵏ/(1+p) ≤ p^{k−1}`` and ``P(|L| > y) = p^y ≤ P(|X| ≥ ⌊y⌋)``, ``p = e^{−1/b}``),
  so a quantile coupling gives ``X = L + R`` with independent symmetric ``|R| ≤ 1``: the
  half-width is ``κ σ_L`` plus ``c`` or a Hoeffding bound on ``ΣR`` (union bound,
  :func:`discrete_laplace_half_width`), ``σ_L = b sqrt(2c)``.
- ``tail="normal"`` (the matrix mechanism's continuous Gaussian): Z is exactly normal (up to the
  sampler's 2⁻²⁴-relative grid): κ = Φ⁻¹((1 + level)/2) = 1.96.
- ``tail="subgaussian"`` (Identity's discrete Gaussian of parameter σ²: σ²-subgaussian, Canonne,
  Kamath, Steinke 2020): ``P(|Z| > E) ≤ 2 exp(−E²/(2 σ_Z²))``, κ = sqrt(2 ln(2/(1 − level))) = 2.72.

``aggregate="max"``: every query of the workload meets the target (the largest query variance is
known when the workload lists its queries, for Identity on range / prefix / marginal / upto
workloads, and for Privelet on allrange); ``"mean"``: a query of the mean variance (and mean L1
norm) over the workload, a summary of the typical query rather than a guarantee for each. The
smallest epsilon is found by bisection on ``log ε`` of the exact spread (the samplers' rounding
makes it only nearly proportional to ``1/ε``), rounded up to 3 significant digits and checked.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import integrate, special

from dpcube.errors import QueryError
from dpcube.planning.plan import Candidate, MechanismPlan

TAILS = ("laplace", "discrete-laplace", "normal", "subgaussian")


def laplace_mixture_tail(kappa: float) -> float:
    """``E[h̃(W)]``, W ~ Exp(1): the bound on ``P(|Z| > κσ)`` for any combination Z of independent
    Laplace draws with variance σ² (module docstring).

    >>> math.exp(-2.12 * math.sqrt(2)) < laplace_mixture_tail(2.12) < 0.054  # one draw: exact
    True
    """
    s0 = kappa * kappa / 3.0

    def h(s: float) -> float:
        return float(special.erfc(kappa / math.sqrt(2.0 * s))) if s > 0 else 0.0

    slope = kappa * math.exp(-1.5) / math.sqrt(2.0 * math.pi) * s0**-1.5  # h'(s0), u² = 3
    below, _ = integrate.quad(lambda w: h(w) * math.exp(-w), 0.0, s0)
    above = math.exp(-s0) * (h(s0) + slope)  # ∫_{s0}^∞ (h(s0) + slope (w − s0)) e^{−w} dw
    return below + above


@functools.lru_cache(maxsize=64)
def laplace_factor(level: float) -> float:
    """Smallest κ with ``laplace_mixture_tail(κ) ≤ 1 − level``.

    >>> round(laplace_factor(0.95), 3)
    2.161
    """
    alpha = 1.0 - level
    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if laplace_mixture_tail(mid) > alpha else (lo, mid)
    return hi


def normal_factor(level: float) -> float:
    """Φ⁻¹((1 + level)/2).

    >>> round(normal_factor(0.95), 3)
    1.96
    """
    return float(special.ndtri((1.0 + level) / 2.0))


def subgaussian_factor(level: float) -> float:
    """sqrt(2 ln(2 / (1 − level))).

    >>> round(subgaussian_factor(0.95), 3)
    2.716
    """
    return math.sqrt(2.0 * math.log(2.0 / (1.0 - level)))


def half_width_factor(tail: str, level: float) -> float:
    """κ of a noise family at ``level`` (module docstring)."""
    if not 0.5 <= level < 1.0:
        raise QueryError(f"level must be in [0.5, 1), e.g. 0.95; got {level}")
    if tail in ("laplace", "discrete-laplace"):
        return laplace_factor(level)
    if tail == "normal":
        return normal_factor(level)
    if tail == "subgaussian":
        return subgaussian_factor(level)
    raise QueryError(f"no tail bound for noise family {tail!r}")


@dataclass
class EpsilonNeed:
    """The smallest epsilon meeting the target under one candidate (or why there is none)."""

    label: str
    mechanism: str
    basis: str
    epsilon: float | None
    factor: float | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "mechanism": self.mechanism,
            "basis": self.basis,
            "epsilon": self.epsilon,
            "half_width_factor": self.factor,
            "note": self.note,
        }


def spread(
    candidate: Candidate, epsilon: float, queries: int, aggregate: str
) -> tuple[float, float]:
    """(sd, margin) of the aggregate query's noise at ``epsilon`` (same delta)."""
    if candidate.spread_at is not None:
        return candidate.spread_at(epsilon, aggregate)
    if candidate.tail == "discrete-laplace" or candidate.error_at is None:
        raise QueryError(
            f"{candidate.label}: no tail bound for its answers (their L1 coefficient norms are "
            "not known)"
        )
    total = candidate.error_at(epsilon)
    if aggregate == "mean":
        return math.sqrt(total / queries), 0.0
    if aggregate == "max":
        if candidate.max_query_variance is None:
            raise QueryError(
                f"{candidate.label}: the largest query variance is known only when the workload "
                "lists its queries (a query file, random ranges); use the mean aggregate"
            )
        return math.sqrt(total * candidate.max_query_variance / candidate.expected_error), 0.0
    raise QueryError(f"aggregate must be 'max' or 'mean', got {aggregate!r}")


#: Largest support (in multiples of the noise unit) on which the exact discrete Laplace tail is
#: summed; beyond, the coupling bound is used (it is then tight: the lattice is fine).
MAX_EXACT_SUPPORT = 5_000_000


def discrete_laplace_sum_tail(scale: float, cells: float, target: float) -> float | None:
    """Exact ``P(|S| > target)`` for S the sum of ``cells`` independent discrete Laplace draws of
    scale b (``p = e^{−1/b}``): each draw is ``G − G'`` with G, G' geometric, so
    ``S = N − N'`` with N, N' negative binomial (``cells``, 1 − p) and
    ``P(S > m) = Σ_k P(N' = k) P(N > k + m)``. None when the support is too large to sum.

    >>> round(discrete_laplace_sum_tail(1.0, 1, 0.5), 6) == round(2 * math.exp(-1) / (1 + math.exp(-1)), 6)
    True
    """
    from scipy import stats

    p = math.exp(-1.0 / scale)
    dist = stats.nbinom(cells, 1.0 - p)
    top = int(dist.isf(1e-17)) + 1
    if top > MAX_EXACT_SUPPORT:
        return None
    k = np.arange(top + 1)
    m = math.floor(target)
    return float(min(1.0, 2.0 * np.sum(dist.pmf(k) * dist.sf(k + m))))


def meets(
    candidate: Candidate,
    epsilon: float,
    target: float,
    level: float,
    queries: int,
    aggregate: str,
) -> bool:
    """Whether the aggregate query's ``level`` interval at ``epsilon`` is within ``+-target``."""
    if candidate.tail == "discrete-laplace":
        sd, cells = spread(candidate, epsilon, queries, aggregate)
        tail = discrete_laplace_sum_tail(sd / math.sqrt(2.0 * cells), cells, target)
        if tail is not None:
            return tail <= 1.0 - level
    return half_width(candidate, epsilon, level, queries, aggregate) <= target


def half_width(
    candidate: Candidate, epsilon: float, level: float, queries: int, aggregate: str
) -> float:
    """Half-width of the ``level`` interval of the aggregate query at ``epsilon``."""
    sd, margin = spread(candidate, epsilon, queries, aggregate)
    if candidate.tail == "discrete-laplace":
        return discrete_laplace_half_width(sd, margin, level)
    return half_width_factor(candidate.tail, level) * sd + margin


#: Shares of 1 - level given to the lattice part of discrete Laplace noise (the best is used).
LATTICE_SHARES = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5)


def discrete_laplace_half_width(sd: float, cells: float, level: float) -> float:
    """Half-width for a sum of ``cells`` discrete Laplace draws (0/1 coefficients), coupled to
    continuous ones of total sd ``sd``: ``X = L + R`` with independent, symmetric ``|Rᵢ| ≤ 1``
    (module docstring). Either the sure bound ``|ΣRᵢ| ≤ cells`` or, splitting
    ``1 − level = α₁ + α₂``, Hoeffding's ``P(|ΣRᵢ| ≥ t) ≤ 2 exp(−t²/(2 cells))`` at α₂ with the
    Laplace bound at α₁ (a union bound); the smallest over :data:`LATTICE_SHARES`.

    >>> round(discrete_laplace_half_width(10.0, 1.0, 0.95), 3)   # one cell: sure margin 1
    22.614
    >>> discrete_laplace_half_width(80.0, 64.0, 0.95) < laplace_factor(0.95) * 80.0 + 64.0
    True
    """
    alpha = 1.0 - level
    best = laplace_factor(level) * sd + cells
    for share in LATTICE_SHARES:
        a2 = alpha * share
        lattice = math.sqrt(2.0 * cells * math.log(2.0 / a2))
        best = min(best, laplace_factor(1.0 - (alpha - a2)) * sd + lattice)
    return best


def _round_up(x: float, digits: int = 3) -> float:
    """``x`` rounded up to ``digits`` significant digits.

    >>> _round_up(0.123401), _round_up(12.0)
    (0.124, 12.0)
    """
    scale = 10 ** (digits - 1 - math.floor(math.log10(x)))
    return math.ceil(x * scale - 1e-9) / scale


def required_epsilon(
    candidate: Candidate,
    target: float,
    level: float = 0.95,
    queries: int = 1,
    aggregate: str = "max",
    max_epsilon: float = 1e4,
) -> EpsilonNeed:
    """The smallest epsilon (3 significant digits, rounded up) at which the ``level`` interval of
    the aggregate query has half-width at most ``target`` (module docstring)."""
    if not (target > 0 and math.isfinite(target)):
        raise QueryError(f"the target error must be a positive number, got {target}")
    if not 0.5 <= level < 1.0:
        raise QueryError(f"level must be in [0.5, 1), e.g. 0.95; got {level}")
    if candidate.basis == "benchmark":
        figure = candidate.benchmark or {}
        return EpsilonNeed(
            candidate.label,
            candidate.mechanism,
            "benchmark",
            None,
            None,
            "data-dependent, not computable before seeing the data; public benchmark figure: "
            f"{figure.get('metric', '')} {figure.get('value', '')} at epsilon "
            f"{figure.get('epsilon', '')} on {figure.get('data', '')} "
            f"({figure.get('source', '')}; `{figure.get('command', '')}`)",
        )
    if candidate.basis != "exact":
        return EpsilonNeed(
            candidate.label, candidate.mechanism, candidate.basis, None, None, candidate.note
        )
    try:
        kappa = half_width_factor(candidate.tail, level)

        def ok(eps: float) -> bool:
            return meets(candidate, eps, target, level, queries, aggregate)

        reachable = ok(max_epsilon)
    except QueryError as exc:
        return EpsilonNeed(candidate.label, candidate.mechanism, "exact", None, None, str(exc))
    if not reachable:
        return EpsilonNeed(
            candidate.label,
            candidate.mechanism,
            "exact",
            None,
            kappa,
            f"not reachable: even epsilon = {max_epsilon:g} gives more than +-{target:g}"
            + (
                " (the lattice margin of integer noise)"
                if candidate.tail == "discrete-laplace"
                else ""
            ),
        )
    lo, hi = 1e-9, max_epsilon
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if not ok(mid) else (lo, mid)
    eps = _round_up(hi)
    while not ok(eps):  # the samplers' rounding: step up until the target is met
        eps = _round_up(eps * 1.001)
    what = "every query" if aggregate == "max" else "a query of the mean variance"
    how = (
        "exact discrete Laplace tail (or its coupling bound)"
        if candidate.tail == "discrete-laplace"
        else f"{candidate.tail} tail bound, {kappa:.3f} sd"
    )
    return EpsilonNeed(
        candidate.label,
        candidate.mechanism,
        "exact",
        eps,
        kappa,
        f"{what} within +-{target:g} with probability >= {level:.0%} ({how})",
    )


def epsilon_needs(
    plan: MechanismPlan, target: float, level: float = 0.95, aggregate: str = "max"
) -> list[EpsilonNeed]:
    """:func:`required_epsilon` for every candidate of a plan, smallest epsilon first."""
    needs = [
        required_epsilon(c, target, level, max(plan.queries, 1), aggregate) for c in plan.candidates
    ]
    return sorted(needs, key=lambda n: (n.epsilon is None, n.epsilon or 0.0))


__all__ = [
    "TAILS",
    "EpsilonNeed",
    "discrete_laplace_half_width",
    "discrete_laplace_sum_tail",
    "epsilon_needs",
    "half_width",
    "half_width_factor",
    "laplace_factor",
    "laplace_mixture_tail",
    "meets",
    "normal_factor",
    "required_epsilon",
    "spread",
    "subgaussian_factor",
]
