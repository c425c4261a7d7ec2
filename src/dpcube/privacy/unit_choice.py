"""Choosing the rows kept per privacy unit, K, privately (``--max-rows-per-unit auto``).

Bounding each unit to K rows trades bias for variance (Amin, Kulesza, Munoz Medina, Vassilvitskii,
"Bounding User Contributions: A Bias-Variance Trade-off in Differential Privacy", ICML 2019): a
small K drops the rows of every unit above K (the counts are biased down by the rows dropped), a
large K scales the noise by K. The best K depends on how many rows the units hold, a figure of
the data, so it is chosen from a noisy summary of it, inside the guarantee:

1. **The summary** (computed in the engine; exact, never published): for each bin
   ``b = 0..B`` of ``floor(log2 n_u)`` (``n_u`` the rows of unit u; the last bin holds every
   unit with at least ``2**B`` rows), the number of units ``c_b``
   (:func:`dpcube.engine.counting.unit_size_bins`; it also sums their rows, for the curator).
2. **The noise** (:func:`noisy_unit_counts`): one unit is in one bin, so the vector ``c`` has L1
   sensitivity 1 under add/remove (2 under replace: one unit leaves a bin, another joins one).
   Exact discrete Laplace noise (:func:`dpcube.privacy.samplers.discrete_laplace`) of scale
   ``1/epsilon`` (``2/epsilon`` under replace) on each ``c_b`` is the (discrete) Laplace
   mechanism: epsilon-DP for one unit. Everything below is post-processing of these figures.
   The bins above the highest one whose noisy count reaches ``t = scale * ln((B + 1) / 0.05)``
   (:func:`threshold`) count as empty, and negative counts as 0: an empty bin reaches ``t``
   with probability below 5% over all bins together (each discrete Laplace tail is at most
   ``exp(-t / scale)``), so noise in the empty bins of very large units does not pass for
   thousands of rows dropped. Units above that bin (fewer than about ``t`` per bin) are then
   not counted: the estimates below are low by their rows.
3. **The candidates** are ``K = 2**j``, ``j = 0..B``. Every unit in bin ``b >= j`` has at
   least ``2**j`` rows and loses ``n_u - 2**j``; every unit below keeps all. With a unit of bin
   ``b`` taken to hold the bin's middle ``m_b = 1.5 * 2**b`` rows (exact for a uniform spread
   of sizes across the bin, up to a half row), the rows dropped are estimated as
   ``dropped(2**j) = sum_{b >= j} c_b (m_b - 2**j)`` and the rows as ``sum_b c_b m_b``. The
   estimate is off by at most a factor 2 within a bin (a size is between ``2**b`` and
   ``2**(b+1)``), and low for units far above ``2**B``.
4. **The choice** minimises the estimated total error of the cell counts, bias plus noise:
   ``dropped(K) + K * noise_per_row``. Dropping a row lowers one cell by one, so the bias adds
   up over the cells to the rows dropped; ``noise_per_row`` is the noise the release adds over
   its cells per row of bound (the identity mechanism's: ``d sqrt(2) / epsilon_m`` for d cells,
   each a Laplace count of standard deviation ``sqrt(2) K / epsilon_m``). This is the
   bias-variance balance of Amin et al.: raising K by one saves one row for each unit above K
   and costs ``noise_per_row``, so the best K leaves about ``noise_per_row`` units above it; a
   table of many cells (much noise per row) gets a small K. Ties go to the smaller K.
5. **The share of rows dropped** at the chosen K is ``dropped(K) / sum_b c_b m_b`` from the
   same noisy counts, clipped to [0, 1]: a noisy figure inside the same guarantee, no further
   budget (an estimate: step 3's bin approximation applies to it). When no bin reaches the
   threshold (too few units for this epsilon), nothing is estimated: the share is None and K
   is 1 (every estimate of rows dropped is 0, so the least noise wins).

The selection spends :data:`DEFAULT_SELECTION_SHARE` of the release's epsilon (see its comment);
the mechanism gets the rest, and the ledger is charged once for both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import ParameterError
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import discrete_laplace, laplace_scale_rational

#: Share of a release's epsilon spent choosing K. The summary is ``B + 1`` = 11 unit counts of
#: L1 sensitivity 1: at a tenth of epsilon the noise on each has standard deviation
#: ``sqrt(2) / (0.1 epsilon)``, about 14 units at epsilon = 1, small against the tens or
#: hundreds of units a table of many rows per unit holds above a useful K. The
#: mechanism keeps 90% of epsilon, so its noise grows by 1/0.9 (11%) over a release with K
#: given; a K chosen far off its best costs more than that (the error is linear in K).
DEFAULT_SELECTION_SHARE = 0.1
#: The largest candidate is ``2**LARGEST_CANDIDATE_BITS`` = 1024 rows per unit.
LARGEST_CANDIDATE_BITS = 10
#: The word the flag and the keyword take for a privately chosen K.
AUTO = "auto"


def candidates(bits: int = LARGEST_CANDIDATE_BITS) -> tuple[int, ...]:
    """The candidate bounds ``1, 2, 4, ..., 2**bits``.

    >>> candidates(3)
    (1, 2, 4, 8)
    """
    return tuple(2**j for j in range(bits + 1))


def check_share(share: Any) -> float:
    """The selection share, checked: a number strictly between 0 and 1."""
    if isinstance(share, bool) or not isinstance(share, int | float):
        raise ParameterError(f"unit selection share: must be a number in (0, 1), got {share!r}")
    value = float(share)
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise ParameterError(
            f"unit selection share: must be strictly between 0 and 1 (the share of epsilon "
            f"spent choosing --max-rows-per-unit), got {share!r}"
        )
    return value


@dataclass(frozen=True)
class UnitSizeBins:
    """Exact figures of the data (the curator's only): per bin ``b`` of ``floor(log2 rows)``,
    the units ``counts[b]`` and their rows ``rows[b]`` (each unit's up to ``2**(B+1)``). Only
    the unit counts, noised, decide anything; the rows are for the curator's log."""

    counts: NDArray[np.int64]
    rows: NDArray[np.int64]

    @property
    def bits(self) -> int:
        return int(self.counts.size) - 1


@dataclass(frozen=True)
class BoundChoice:
    """The privately chosen bound and the noisy figures it came from (all publishable)."""

    max_rows_per_unit: int
    epsilon: float
    share: float
    #: None when no bin's noisy count reached the threshold (too few units for the noise at this
    #: epsilon to say anything; K is then 1, the least noise).
    rows_dropped_share: float | None
    candidates: tuple[int, ...]
    estimated_error: tuple[float, ...]

    def manifest(self) -> dict[str, Any]:
        """What the manifest records of the choice: the method, its budget, the chosen K and the
        noisy share of rows dropped (no exact figure)."""
        return {
            "method": "noisy log2 histogram of rows per unit (Amin et al., ICML 2019)",
            "epsilon": self.epsilon,
            "share_of_epsilon": self.share,
            "candidates": list(self.candidates),
            "chosen_max_rows_per_unit": self.max_rows_per_unit,
            "rows_dropped_share_noisy": self.rows_dropped_share,
        }


def noisy_unit_counts(
    bins: UnitSizeBins, *, epsilon: float, neighbour: str | Neighbour, source: RandomSource
) -> NDArray[np.float64]:
    """The units per bin with exact discrete Laplace noise: epsilon-DP for one unit (module
    doc, step 2)."""
    l1 = 2.0 if Neighbour.parse(neighbour) is Neighbour.REPLACE else 1.0
    t, s = laplace_scale_rational(l1 / epsilon)
    noise = discrete_laplace(source, t, s, size=bins.counts.shape)
    return (bins.counts + noise).astype(np.float64)


#: The chance that some empty bin passes the threshold (:func:`threshold`).
_FALSE_BIN = 0.05


def threshold(epsilon: float, neighbour: str | Neighbour, bits: int) -> float:
    """The noisy unit count below which a bin counts as empty (module doc, step 2).

    >>> round(threshold(0.1, "add_remove", 10), 1)
    53.9
    """
    l1 = 2.0 if Neighbour.parse(neighbour) is Neighbour.REPLACE else 1.0
    return l1 / epsilon * math.log((bits + 1) / _FALSE_BIN)


def bin_middles(bits: int) -> NDArray[np.float64]:
    """``m_b = 1.5 * 2**b``: the rows a unit of bin ``b`` is taken to hold (module doc, step 3)."""
    return np.array([1.5 * 2.0**b for b in range(bits + 1)], dtype=np.float64)


def estimated_dropped(counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """``dropped(2**j) = sum_{b >= j} c_b (m_b - 2**j)`` for every j (module doc, step 3).

    >>> estimated_dropped(np.array([2.0, 0.0, 1.0]))
    array([6., 4., 2.])
    """
    middles = bin_middles(counts.size - 1)
    out = np.empty(counts.size, dtype=np.float64)
    for j in range(counts.size):
        out[j] = float(np.sum(counts[j:] * (middles[j:] - 2.0**j)))
    return out


def choose_max_rows_per_unit(
    bins: UnitSizeBins,
    *,
    epsilon: float,
    share: float,
    neighbour: str | Neighbour,
    noise_per_row: float,
    source: RandomSource,
) -> BoundChoice:
    """The K of least estimated error (module doc, steps 2-5), from bins noised at ``epsilon``
    (the selection's share of the release's epsilon). With
    :data:`~dpcube.privacy.random.NO_NOISE` the exact bins decide (tests only)."""
    counts = noisy_unit_counts(bins, epsilon=epsilon, neighbour=neighbour, source=source)
    passed = np.flatnonzero(counts >= threshold(epsilon, neighbour, bins.bits))
    top = int(passed[-1]) if passed.size else -1
    counts = np.where(np.arange(counts.size) <= top, np.maximum(counts, 0.0), 0.0)
    dropped = np.maximum(estimated_dropped(counts), 0.0)
    ks = candidates(bins.bits)
    error = dropped + np.array(ks, dtype=np.float64) * noise_per_row
    best = int(np.argmin(error))  # the first of equal errors: the smaller K
    total = float(np.sum(counts * bin_middles(bins.bits)))
    share_dropped = min(max(float(dropped[best]) / total, 0.0), 1.0) if total > 0 else None
    return BoundChoice(
        max_rows_per_unit=ks[best],
        epsilon=epsilon,
        share=share,
        rows_dropped_share=share_dropped,
        candidates=ks,
        estimated_error=tuple(float(e) for e in error),
    )
