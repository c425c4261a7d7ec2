"""Neighbour notion, sensitivities, geometric noise and the budget split (Fioretto, Van
Hentenryck, Zhu, Artificial Intelligence 296, 2021, Secs. 3-4, 8, 9.2).

Neighbour notion (the paper's implicit relation in the proof of Lemma 4, made explicit here):
the units (groups), their leaf regions, the size bound k and G are public, and

- ``add_remove``: one individual joins or leaves an EXISTING group, so one group's size moves
  s -> s +/- 1 inside S = {1..k} (the last bin is top-coded "k or more", so growing a group of
  size k changes nothing; a group never empties, as G is public);
- ``replace``: one individual moves from one existing group to another (two such moves).

Sensitivities per level (an individual is in exactly one region per level), L1:

===================================  ==========  =========  ==============================
measurement                          add_remove  replace    where
===================================  ==========  =========  ==============================
group-size vectors n^r (Lemma 4)     2           4          M_H, M_DP, TopDown, relaxed QP
cumulative vectors Gamma(n^r) (L. 6) 1           2          M_C, M_CDP^~, M_CDP default
level chain (size-major prefix sum)  |R_l|       2 |R_l|    corrected here, M_CDP chain
===================================  ==========  =========  ==============================

Units given one region by ``region_of_unit`` (a unit seen in several regions in the data, see
:func:`dpcube.engine.counting.group_size_counts`): one individual joining or leaving a unit can
then also move it to another region, so one level's group-size vectors change by -1 at (old
region, s) and +1 at (new region, s +/- 1): still 2 in L1 per moved individual, and the
group-size methods keep their guarantee. The cumulative vectors change by up to 2k - 1 and the
chain more, so the methods measuring them refuse such a table before the charge
(:meth:`dpcube.mechanisms.census.mechanism.CensusHierarchy.validate`).

Every level gets epsilon / L (Theorem 1: parallel composition within a level, sequential across
levels). Noise is the double-geometric (discrete Laplace) of scale Delta / epsilon_l, i.e.
alpha = exp(-epsilon_l / Delta), drawn by :func:`dpcube.privacy.samplers.add_discrete_laplace`.

M_CDP noise modes (Sec. 9.2; the paper calibrates the chain to sensitivity 1, but moving one group
from size s to s+1 changes |R_l| entries of the size-major prefix sum):

- ``private_postprocessed`` (default): per-region cumulative noise as M_C, chain values derived by
  post-processing. epsilon-DP.
- ``private_calibrated``: chain noise with alpha_l = exp(-epsilon / (L |R_l|)). epsilon-DP.
- ``as_published``: chain noise with alpha = exp(-epsilon / L), as the paper prints it. **NOT
  epsilon-DP** when some |R_l| > 1: it is (sum_l |R_l| epsilon / L)-DP. For reproducing Table 7 only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import BudgetError
from dpcube.mechanisms.census.chain import level_chain_values
from dpcube.mechanisms.census.cumulative import gamma
from dpcube.mechanisms.census.table import GroupSizeTable
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace

NOISE_MODES = ("private_postprocessed", "private_calibrated", "as_published")
#: Number of individuals moved by one neighbour step.
_MOVES = {"add_remove": 1, "replace": 2}


def vector_sensitivity(neighbour: str) -> int:
    """L1 sensitivity of one level's group-size vectors (Lemma 4): 2 per moved individual."""
    return 2 * _MOVES[neighbour]


def cumulative_sensitivity(neighbour: str) -> int:
    """L1 sensitivity of one level's cumulative vectors (Lemma 6): 1 per moved individual."""
    return _MOVES[neighbour]


def chain_sensitivity(neighbour: str, regions: int) -> int:
    """L1 sensitivity of one level's chain vector: |R_l| per moved individual (corrected here: the
    paper assumes 1)."""
    return _MOVES[neighbour] * regions


def check_noise_mode(mode: str) -> str:
    if mode not in NOISE_MODES:
        raise BudgetError(f"noise_mode must be one of {', '.join(NOISE_MODES)}; got {mode!r}")
    return mode


def accounting(
    method: str, noise_mode: str, epsilon: float, level_sizes: tuple[int, ...], neighbour: str
) -> dict[str, Any]:
    """The privacy accountant: per level, the measurement, its true sensitivity, the noise scale,
    and the epsilon actually spent (sensitivity / scale); the total and whether it is <= epsilon.

    >>> a = accounting("cdp", "as_published", 1.0, (1, 2), "add_remove")
    >>> round(a["epsilon_spent"], 6), a["private"]
    (1.5, False)
    >>> accounting("cdp", "private_postprocessed", 1.0, (1, 2), "add_remove")["private"]
    True
    """
    L = len(level_sizes)
    eps_l = epsilon / L
    levels: list[dict[str, Any]] = []
    for level, size in enumerate(level_sizes, start=1):
        if method in ("dp", "qp", "qip", "topdown"):
            meas, delta, scale = (
                "group_sizes",
                vector_sensitivity(neighbour),
                vector_sensitivity(neighbour) / eps_l,
            )
        elif (
            method in ("cdp_approx", "qp_cumulative", "qip_cumulative")
            or noise_mode == "private_postprocessed"
        ):
            meas, delta, scale = (
                "cumulative",
                cumulative_sensitivity(neighbour),
                cumulative_sensitivity(neighbour) / eps_l,
            )
        elif noise_mode == "private_calibrated":
            meas, delta = "chain", chain_sensitivity(neighbour, size)
            scale = delta / eps_l
        else:
            meas, delta = "chain", chain_sensitivity(neighbour, size)
            scale = cumulative_sensitivity(neighbour) / eps_l
        levels.append(
            {
                "level": level,
                "measurement": meas,
                "sensitivity": delta,
                "scale": scale,
                "epsilon": delta / scale,
            }
        )
    spent = float(sum(lv["epsilon"] for lv in levels))
    return {"levels": levels, "epsilon_spent": spent, "private": spent <= epsilon * (1 + 1e-12)}


def _per_level_noise(
    values: NDArray[np.int64], h_level: NDArray[np.int64], scales: list[float], source: RandomSource
) -> tuple[NDArray[np.int64], list[float]]:
    out = np.empty_like(values)
    variances = []
    for level, scale in enumerate(scales, start=1):
        rows = h_level == level
        out[rows], draw = add_discrete_laplace(values[rows], scale, source)
        variances.append(float(draw.variance))
    return out, variances


def noisy_counts(
    table: GroupSizeTable, epsilon: float, source: RandomSource, neighbour: str
) -> tuple[NDArray[np.int64], dict[str, Any]]:
    """n~^r = n^r + Geom(exp(-epsilon / (L Delta)))^k for every region (Eq. 3), Delta = 2 or 4."""
    h = table.hierarchy
    scale = vector_sensitivity(neighbour) * h.levels / epsilon
    noisy, var = _per_level_noise(table.counts, h.level, [scale] * h.levels, source)
    return noisy, {"measurement": "group_sizes", "scale": scale, "cell_variance": var}


def noisy_cumulative(
    table: GroupSizeTable, epsilon: float, source: RandomSource, neighbour: str
) -> tuple[NDArray[np.int64], dict[str, Any]]:
    """c~^r = Gamma(n^r) + Geom(exp(-epsilon / (L Delta)))^k for every region, Delta = 1 or 2."""
    h = table.hierarchy
    scale = cumulative_sensitivity(neighbour) * h.levels / epsilon
    noisy, var = _per_level_noise(gamma(table.counts), h.level, [scale] * h.levels, source)
    return noisy, {"measurement": "cumulative", "scale": scale, "cell_variance": var}


def chain_from_cumulative(h: Any, cumulative: NDArray[Any]) -> list[NDArray[np.float64]]:
    """Chain values of each level from per-region cumulative vectors (Sec. 9.2, mode 3):
    c(s, r_j) = sum_{i <= j} c_s^{r_i} + sum_{i > j} c_{s-1}^{r_i}, with c_0 = 0.

    On exact inputs this is the true chain (an identity checked here):

    >>> from dpcube.mechanisms.census.hierarchy import RegionHierarchy
    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> n = h.aggregate(np.array([[2, 0, 1], [1, 1, 1]]))
    >>> [v.astype(int).tolist() for v in chain_from_cumulative(h, gamma(n))]
    [[[3], [4], [6]], [[2, 3], [3, 4], [5, 6]]]
    """
    out = []
    for level in range(1, h.levels + 1):
        c = np.asarray(cumulative[h.level_slice(level)], dtype=np.float64).T
        prev = np.vstack([np.zeros((1, c.shape[1])), c[:-1]])
        upto = np.cumsum(c, axis=1)
        after = prev.sum(axis=1, keepdims=True) - np.cumsum(prev, axis=1)
        out.append(upto + after)
    return out


def noisy_chain(
    table: GroupSizeTable, epsilon: float, source: RandomSource, neighbour: str, mode: str
) -> tuple[list[NDArray[np.float64]], dict[str, Any]]:
    """The noisy chain per level for M_CDP under ``mode`` (see the module docstring)."""
    h = table.hierarchy
    if mode == "private_postprocessed":
        cum, info = noisy_cumulative(table, epsilon, source, neighbour)
        return chain_from_cumulative(h, cum), info
    truth = level_chain_values(h, table.counts)
    out = []
    scales = []
    for level, values in enumerate(truth, start=1):
        delta = (
            chain_sensitivity(neighbour, h.level_sizes[level - 1])
            if mode == "private_calibrated"
            else cumulative_sensitivity(neighbour)
        )
        scale = delta * h.levels / epsilon
        noisy, _ = add_discrete_laplace(values, scale, source)
        out.append(noisy.astype(np.float64))
        scales.append(scale)
    return out, {"measurement": "chain", "scale": scales}
