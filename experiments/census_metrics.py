"""The PGSR checks (consistency, validity, faithfulness: Fioretto, Van Hentenryck and Zhu, AI 2021)
and the error metrics of their experiments (Sec. 11)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.mechanisms.census.hierarchy import RegionHierarchy


def violations(h: RegionHierarchy, values: NDArray[Any], groups: int) -> dict[str, int]:
    """Counters of broken PGSR conditions.

    ``consistency`` (#CV of Table 7): (internal region, size) pairs whose value is not the sum of
    the children's; ``faithfulness``: levels whose total is not G; ``negative`` and
    ``non_integer`` cells.

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> violations(h, np.array([[3, 1, 2], [2, 0, 1], [1, 1, 0]]), 6)
    {'consistency': 1, 'faithfulness': 1, 'negative': 0, 'non_integer': 0}
    """
    v = np.asarray(values, dtype=np.float64)
    sums = np.zeros_like(v)
    kids = np.flatnonzero(h.parent >= 0)
    np.add.at(sums, h.parent[kids], v[kids])
    internal = h.level < h.levels
    cv = int(np.sum(sums[internal] != v[internal]))
    faithful = sum(int(v[h.level_slice(lv)].sum() != groups) for lv in range(1, h.levels + 1))
    return {
        "consistency": cv,
        "faithfulness": faithful,
        "negative": int(np.sum(v < 0)),
        "non_integer": int(np.sum(v != np.rint(v))),
    }


def level_errors(
    h: RegionHierarchy, released: NDArray[Any], truth: NDArray[Any]
) -> list[dict[str, float]]:
    """Per level l: raw sum_{r in R_l, s} |n^ - n|, the per-cell mean, and the raw sum / k.

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> level_errors(h, np.array([[3, 1, 2], [2, 0, 1], [1, 1, 1]]), np.array([[3, 1, 2], [1, 1, 1], [2, 0, 1]]))[1]
    {'level': 2, 'l1': 4.0, 'mean_cell': 0.6666666666666666, 'l1_over_k': 1.3333333333333333}
    """
    k = truth.shape[1]
    out = []
    for level in range(1, h.levels + 1):
        d = np.abs(
            np.asarray(released[h.level_slice(level)], np.float64) - truth[h.level_slice(level)]
        )
        out.append(
            {
                "level": level,
                "l1": float(d.sum()),
                "mean_cell": float(d.mean()),
                "l1_over_k": float(d.sum() / k),
            }
        )
    return out
