"""AHP: noisy counts, sort, threshold, cluster, average (Zhang, Chen, Xu, Meng, Xie, "Towards
Accurate Histogram Publication under Differential Privacy", SDM 2014: the steps of its algorithm
and its greedy clustering rule).

With ``epsilon_1 = ratio * epsilon`` and ``epsilon_2 = epsilon - epsilon_1``:

1. *Noisy counts.* Every cell (1-D, or the cells of any grid flattened in C order) gets discrete
   Laplace noise of scale ``Delta / epsilon_1`` (the "cells" measurement).
2. *Threshold.* Noisy counts at or below ``eta ln(n) / epsilon_1`` (n cells) are set to 0: an empty
   cell's noise exceeds it with probability ``n^-eta / 2`` only (``n^(-eta/2) / 2`` under
   ``replace``, whose noise is twice as wide), so sparse regions become one cluster of zeros.
3. *Sort and cluster.* The thresholded counts are sorted and cut greedily into contiguous groups
   of the sorted order (:func:`greedy_clusters`): a group is closed before the next value when
   keeping it costs more than starting afresh, with the paper's error of a group ``G`` as its sum
   of squared deviations from its mean plus the noise its average will carry,
   ``SSE(G) + 2 / (|G| epsilon_2^2)``, and the least error of a new group starting at the value
   (the paper's ``err*`` with its early stop). Steps 2-3 read only the noisy counts:
   post-processing.
4. *Group sums.* Each group's true sum gets discrete Laplace noise of scale ``Delta / epsilon_2``
   (the "group sums" measurement; the groups are disjoint, so one record changes one sum, or two
   under ``replace``, whatever the grouping); each cell gets its group's noisy sum over the group's
   size.

Privacy: sequential composition of two Laplace measurements, ``epsilon_1 + epsilon_2 = epsilon``;
the grouping is a function of the first measurement's output only. Sensitivity (both
measurements): L1 1 under ``add_remove``, 2 under ``replace``.

Error: a cell of group G has the noise variance ``2 b^2 / |G|^2`` (``b`` the group noise's scale)
plus the bias ``mean(G) - x_i`` of the averaging; the grouping is data-dependent, so the answers
are biased and get model-based (bootstrap) intervals, never trusted ones.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube.histogram import Histogram
from dpcube.mechanisms.base import Mechanism, SensitivityClaim, check_share_scale
from dpcube.mechanisms.params import ParamSpec
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace
from dpcube.release.base import ReleaseMetadata
from dpcube.release.cells import CellRelease
from dpcube.schema import Schema

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Lengths of ``err*`` scanned one at a time before the numpy windows.
_SCALAR = 16
#: The first numpy window of ``err*`` (then doubled).
_WINDOW = 64


def _group_error(p: list[float], pp: list[float], i: int, j: int, epsilon: float) -> float:
    """Error of the group of sorted values ``i..j`` (inclusive): SSE plus ``2 / (len eps^2)``.
    ``p``/``pp``: zero-padded prefix sums of the values and of their squares."""
    length = j - i + 1
    total = p[j + 1] - p[i]
    sse = (pp[j + 1] - pp[i]) - total * total / length
    return float(max(sse, 0.0) + 2.0 / (length * epsilon**2))


def _best_new_group(
    p: FloatArray, prefix: list[float], value: float, j: int, epsilon: float, run_end: int = 0
) -> float:
    """The paper's ``err*(x_j)``: the least ``(x_j - mean(x_j..x_l))^2 + 2 / (len^2 eps^2)`` over
    groups ``j..l`` starting at ``j``, scanning ``l`` upwards until the squared deviation grows
    by at least what the noise term can still fall (the paper's early stop).

    ``p``: the zero-padded prefix sums (``prefix``: the same as Python floats). The first
    :data:`_SCALAR` lengths are scanned one at a time (the stop usually comes within a few), the
    rest in geometric windows of numpy arrays; both compute the same floating-point values.

    ``run_end``: where the run of values equal to ``x_j`` ends, when the values are whole numbers
    whose sums are exact in floating point, or ``x_j`` is 0. Inside the run every mean is exactly ``x_j`` (the
    deviation is 0) and the stop cannot come (it needs ``2 / (L^2 eps^2) <= 2 / ((n-j+1)^2
    eps^2)``, false for ``L < n - j + 1``), so the least error there is the run's last one,
    ``2 / (len^2 eps^2)``, and the scan resumes after it: a run of r equal counts (the zeros of a
    sparse histogram) costs O(r) in all, not O(r^2).
    """
    n = len(p) - 1
    tail = 2.0 / ((n - j + 1) ** 2 * epsilon**2)
    best = math.inf
    last_dev = last_noise = 0.0
    head = prefix[j]
    if run_end - j > _SCALAR:
        length = float(run_end - j)
        last_noise = 2.0 / (length**2 * epsilon**2)
        best = last_noise
        first = run_end
    else:
        first = j
    for end in range(first, min(n, first + _SCALAR)):
        length = float(end - j + 1)
        deviation = (value - (prefix[end + 1] - head) / length) ** 2
        noise = 2.0 / (length**2 * epsilon**2)
        if end != j and deviation - last_dev >= last_noise - tail:
            return best
        best = min(best, deviation + noise)
        last_dev, last_noise = deviation, noise
    start = first + _SCALAR
    window = _WINDOW
    while start < n:
        stop = min(n, start + window)
        window *= 2  # geometric windows: a long run of equal values costs O(log) numpy calls
        ls = np.arange(start, stop)
        lengths = (ls - j + 1).astype(np.float64)
        deviation_v = (value - (p[ls + 1] - head) / lengths) ** 2
        noise_v = 2.0 / (lengths**2 * epsilon**2)
        prev_dev = np.concatenate(([last_dev], deviation_v[:-1]))
        prev_noise = np.concatenate(([last_noise], noise_v[:-1]))
        hit = np.flatnonzero(deviation_v - prev_dev >= prev_noise - tail)
        cut = int(hit[0]) if hit.size else len(ls)
        if cut:
            best = min(best, float(np.min(deviation_v[:cut] + noise_v[:cut])))
        if hit.size:
            break
        last_dev, last_noise = float(deviation_v[-1]), float(noise_v[-1])
        start = stop
    return best


def greedy_clusters(values: FloatArray, epsilon: float) -> list[tuple[int, int]]:
    """Contiguous groups ``[start, stop)`` of the sorted ``values`` (AHP's greedy clustering):
    value j joins the open group ``i..j-1`` unless ``err(i..j) >= err(i..j-1) + err*(x_j)``.

    >>> greedy_clusters(np.array([0.0, 0.0, 0.0, 100.0, 101.0, 500.0]), 1.0)
    [(0, 3), (3, 5), (5, 6)]
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    p = np.concatenate(([0.0], np.cumsum(x)))
    pp = np.concatenate(([0.0], np.cumsum(x * x)))
    prefix, squares, values = p.tolist(), pp.tolist(), x.tolist()
    # where each run of equal values ends, used where the means are exact: whole numbers, or
    # zeros (adding 0.0 leaves a prefix sum unchanged)
    exact = bool(np.all(x == np.round(x))) and float(np.abs(x).sum()) < 2.0**52
    starts = np.flatnonzero(np.diff(x) != 0) + 1
    ends = np.append(starts, n)
    run_ends = (ends[np.searchsorted(starts, np.arange(n), side="right")]).tolist()
    groups: list[tuple[int, int]] = []
    i = 0
    for j in range(1, n):
        joined = _group_error(prefix, squares, i, j, epsilon)
        apart = _group_error(prefix, squares, i, j - 1, epsilon) + _best_new_group(
            p, prefix, values[j], j, epsilon, run_ends[j] if exact or values[j] == 0.0 else 0
        )
        if joined >= apart:
            groups.append((i, j))
            i = j
    if n:
        groups.append((i, n))
    return groups


def ahp_groups(noisy: FloatArray, epsilon_1: float, epsilon_2: float, eta: float) -> IntArray:
    """The group label of every cell, from the noisy counts only (steps 2-3): threshold, sort,
    cluster. Labels are 0..g-1 in the order of the sorted groups."""
    x = np.asarray(noisy, dtype=np.float64).ravel()
    n = x.size
    cutoff = eta * math.log(n) / epsilon_1 if n > 1 else 0.0
    x = np.where(x <= cutoff, 0.0, x)
    order = np.argsort(x, kind="stable")
    labels = np.empty(n, dtype=np.int64)
    for label, (start, stop) in enumerate(greedy_clusters(x[order], epsilon_2)):
        labels[order[start:stop]] = label
    return labels


def _pair_sums(x: IntArray) -> FloatArray:
    """Sums of the cells grouped in pairs (C order): the group-sum measurement on one grouping
    (its sensitivity is the same on every grouping of disjoint groups)."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    return np.asarray(np.bincount(np.arange(flat.size) // 2, weights=flat), dtype=np.float64)


class AHP(Mechanism):
    """AHP (Zhang et al., SDM 2014): noisy counts, threshold, sort, cluster, noisy group averages.

    >>> from dpcube import Schema, Histogram
    >>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 7], "width": 1}]})
    >>> r = AHP(1.0).release(Histogram(s, [0, 0, 0, 0, 90, 90, 0, 0]), random_state=7)
    >>> r.metadata.mechanism, r.counts.shape
    ('ahp', (8,))
    """

    name = "ahp"
    #: Peak memory of a release per cell: a few float and int arrays of n (sort, labels, sums).
    bytes_per_cell = 160.0
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "ratio",
            "float",
            "share of epsilon on the noisy counts that choose the groups (the rest on the "
            "group sums)",
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
        ),
        ParamSpec(
            "eta",
            "float",
            "threshold factor: noisy counts up to eta ln(cells) / (ratio epsilon) become 0",
            low=0.0,
            high=100.0,
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        ratio: float = 0.85,
        eta: float = 0.35,
        neighbour: str = "add_remove",
    ) -> None:
        super().__init__(epsilon, delta, neighbour)
        self.ratio = float(ratio)
        self.eta = float(eta)

    @property
    def epsilons(self) -> tuple[float, float]:
        """``(epsilon_1, epsilon_2)``: the noisy counts' share and the group sums' share."""
        first = self.epsilon * self.ratio
        return first, self.epsilon - first

    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        delta = self.histogram_sensitivity("l1")
        return [
            SensitivityClaim(
                "cells", lambda x: np.asarray(x, dtype=np.float64).ravel(), "l1", delta
            ),
            SensitivityClaim("group sums", _pair_sums, "l1", delta),
        ]

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import MIXED_QUERIES, Case, mixed_schema

        # Noiseless answers are exact when distinct counts never share a group and the
        # threshold is below 1. Two counts 1 apart are split when their SSE, 1/2, exceeds what
        # joining saves of the noise, at most 1/epsilon_2^2 (err(i..j) = 1/2 + 1/eps2^2 against
        # err(i..j-1) + err* >= 2/eps2^2): epsilon_2 = 3 in both cases; the thresholds
        # eta ln 9 / epsilon_1 are 0.26 and 0.045.
        return [
            Case("ahp", mixed_schema(), lambda n: cls(20.0, neighbour=n), MIXED_QUERIES),
            Case(
                "ahp-half",
                mixed_schema(),
                lambda n: cls(6.0, ratio=0.5, neighbour=n),
                MIXED_QUERIES,
            ),
        ]

    def validate(self, data: Histogram) -> None:
        delta = self.histogram_sensitivity("l1")
        first, second = self.epsilons
        check_share_scale(self.name, f"ratio={self.ratio:g}", delta, first)
        check_share_scale(self.name, f"ratio={self.ratio:g}", delta, second)

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> CellRelease:
        delta = self.histogram_sensitivity("l1")
        first, second = self.epsilons
        counts = np.asarray(data.counts, dtype=np.int64).ravel()
        noisy, first_draw = add_discrete_laplace(counts, delta / first, source)
        labels = ahp_groups(noisy.astype(np.float64), first, second, self.eta)
        groups = int(labels.max()) + 1
        sums = np.bincount(labels, weights=counts, minlength=groups).astype(np.int64)
        sizes = np.bincount(labels, minlength=groups)
        noisy_sums, second_draw = add_discrete_laplace(sums, delta / second, source)
        estimate = (noisy_sums / sizes)[labels].reshape(data.schema.shape)
        metadata.noise = {
            "distribution": first_draw.distribution,
            "epsilon_counts": first,
            "epsilon_group_sums": second,
            "counts_scale": float(first_draw.scale),
            "group_sum_scale": float(second_draw.scale),
            "groups": groups,
        }
        return CellRelease(data.schema, metadata, estimate.astype(np.float64))
