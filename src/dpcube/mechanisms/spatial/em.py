"""An exact exponential mechanism for the kd-tree's private medians (Cormode et al. 2012).

Candidates are the cut positions k in 1..L-1 of a node; the score of k is
``s(k) = |2 cnt_k - n|`` (cnt_k: points in the first k slices, n: points in the node), an integer
whose change under adding or removing one point is exactly 1 (``2 cnt_k - n`` moves by +-1), so
``Pr[k] ~ exp(-eps s(k) / 2)`` is eps-DP.

Sampling uses only the project's exact primitives, no floats: epsilon is rounded *down* to a
dyadic rational ``a / 2^j`` (less privacy loss, never more); a candidate is proposed uniformly
(``RandomSource.integers``) and accepted with probability ``exp(-a (s(k) - s_min) / 2^(j+1))``
by the exact Bernoulli-exp of Canonne, Kamath and Steinke (Algorithm 1). The first accepted
proposal has exactly the target distribution (rejection sampling with a uniform proposal and
``s_min`` the least score); the expected number of proposals is (L-1) / sum_k exp(-eps (s_k -
s_min) / 2). Proposals are drawn in batches per node, vectorised over all nodes of a level.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import bernoulli_exp

IntArray = NDArray[np.int64]

#: Proposals per pending node per round.
_BATCH = 16


def dyadic_floor(epsilon: float, bits: int = 24) -> tuple[int, int]:
    """``(a, j)`` with ``a / 2^j <= epsilon``, ``a`` of about ``bits`` bits.

    >>> dyadic_floor(0.5)
    (16777216, 25)
    """
    j = bits - math.ceil(math.log2(epsilon))
    a = math.floor(epsilon * 2.0**j)
    return a, j


def exponential_cuts(
    score: Callable[[IntArray, IntArray], IntArray],
    best: IntArray,
    lengths: IntArray,
    epsilon: float,
    source: RandomSource,
) -> IntArray:
    """One k in [1, L-1] per node with ``Pr[k] ~ exp(-epsilon score(node, k) / 2)``.

    ``score(nodes, ks)`` gives the integer scores of candidates; ``best[i]`` is the least score of
    node i (a lower bound suffices for correctness; the exact minimum makes it fast). With the
    noise switched off, the first candidate of least score is returned.
    """
    m = len(lengths)
    if source.noiseless:
        out = np.zeros(m, dtype=np.int64)
        for i in range(m):
            ks = np.arange(1, int(lengths[i]), dtype=np.int64)
            out[i] = ks[int(np.argmin(score(np.full(ks.size, i), ks)))]
        return out
    a, j = dyadic_floor(epsilon)
    den = 2 ** (j + 1)
    out = np.zeros(m, dtype=np.int64)
    pending = np.arange(m)
    while pending.size:
        nodes = np.repeat(pending, _BATCH)
        ks = 1 + source.integers(lengths[nodes] - 1)
        excess = score(nodes, ks) - best[nodes]
        if np.any(excess < 0):
            raise AssertionError("a score fell below the node's least score")
        accepted = bernoulli_exp(source, excess * a, den).reshape(-1, _BATCH)
        hit = accepted.any(axis=1)
        first = np.argmax(accepted, axis=1)
        out[pending[hit]] = ks.reshape(-1, _BATCH)[hit, first[hit]]
        pending = pending[~hit]
    return out
