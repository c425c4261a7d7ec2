"""Variance models: the exact noise variance of a range query, without the data.

A model maps boxes (inclusive index intervals per axis, shape (q, axes, 2)) to variances and
round-trips through a JSON dict so that a loaded release still knows its error. Each mechanism
with linear noise supplies one; register new kinds in :data:`dpcube.registry.VARIANCE_MODELS`.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube import registry
from dpcube.release.base import box_sizes

#: The cells a query selects, as disjoint inclusive intervals per axis (their product): a box has
#: one interval per axis, a set of categories several on its attribute's axis.
Selection = tuple[tuple[tuple[int, int], ...], ...]


def union_quadratic(
    runs: Sequence[tuple[int, int]],
    interval_quadratic: Callable[[NDArray[np.int64]], Any],
) -> float:
    """``rᵀ M r`` for the indicator ``r`` of a union of disjoint intervals on one axis, from the
    quadratic form on single intervals alone (``interval_quadratic``: (m, 2) -> m).

    ``rᵀ M r = Σ_k Q(I_k) + 2 Σ_{j<k} B(I_j, I_k)`` with the cross term of ``I = [a, b]`` before
    ``J = [c, d]`` by polarization over the gap ``G = [b+1, c-1]`` (``Q`` of an empty interval
    is 0): ``1_[a,d] = 1_I + 1_G + 1_J``, so ``2 B(I, J) = Q([a, d]) - Q([a, c-1]) - Q([b+1, d])
    + Q(G)``. Exact for any symmetric ``M``: the noise covariance between the parts of a set
    query is counted, not assumed zero.

    >>> m = np.array([[2.0, 1.0, 0.5], [1.0, 2.0, 1.0], [0.5, 1.0, 2.0]])
    >>> from dpcube.linalg.boxes import interval_quadratic
    >>> float(union_quadratic([(0, 0), (2, 2)], lambda iv: interval_quadratic(m, iv)))  # [1,0,1] M [1,0,1]
    5.0
    """
    runs = sorted(runs)
    needed: list[tuple[int, int]] = list(runs)
    pairs = []
    for j in range(len(runs)):
        for k in range(j + 1, len(runs)):
            (a, b), (c, d) = runs[j], runs[k]
            pairs.append(len(needed))
            needed.extend([(a, d), (a, c - 1), (b + 1, d), (b + 1, c - 1)])
    values = np.zeros(len(needed))
    real = [i for i, (lo, hi) in enumerate(needed) if lo <= hi]
    if real:
        values[real] = interval_quadratic(np.array([needed[i] for i in real], dtype=np.int64))
    total = float(values[: len(runs)].sum())
    for at in pairs:
        whole, left, right, gap = values[at : at + 4]
        total += whole - left - right + gap
    return total


def separable_variance(
    selections: Sequence[Selection],
    axis_quadratic: Callable[[int, NDArray[np.int64]], Any],
    scale: float,
) -> NDArray[np.float64]:
    """``scale * Π_i r_iᵀ M_i r_i`` for noise covariance ``scale * ⊗_i M_i`` (one factor per
    axis): the variance of each selection's sum, axis by axis (:func:`union_quadratic`)."""
    out = np.full(len(selections), float(scale))
    for q, selection in enumerate(selections):
        for axis, runs in enumerate(selection):
            out[q] *= union_quadratic(runs, functools.partial(axis_quadratic, axis))
    return out


class VarianceModel(ABC):
    kind: ClassVar[str]

    @abstractmethod
    def variance_many(self, boxes: NDArray[np.int64]) -> NDArray[np.float64]:
        """Exact noise variance of the answer of each box."""

    def selection_variance_many(self, selections: Sequence[Selection]) -> NDArray[np.float64]:
        """Exact noise variance of the sum over each selection (a set query: disjoint boxes
        whose noises may be correlated). The default knows none (NaN: no exact interval);
        every model registered in :data:`dpcube.registry.VARIANCE_MODELS` gives it."""
        return np.full(len(selections), np.nan)

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON-able parameters (without ``kind``)."""

    @classmethod
    @abstractmethod
    def from_dict(cls, d: Mapping[str, Any]) -> VarianceModel:
        """Inverse of :meth:`to_dict`."""

    def dump(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.to_dict()}


def load_variance_model(d: Mapping[str, Any] | None) -> VarianceModel | None:
    if not d:
        return None
    cls = registry.resolve(registry.VARIANCE_MODELS, d["kind"], "variance model")
    params = {k: v for k, v in d.items() if k != "kind"}
    model: VarianceModel = cls.from_dict(params)
    return model


class UniformCellVariance(VarianceModel):
    """Independent noise of equal variance v on every cell: a box of c cells has variance c*v.

    >>> UniformCellVariance(2.0).variance_many(np.array([[[0, 1], [0, 2]]]))
    array([12.])
    """

    kind = "uniform_cell"

    def __init__(self, cell_variance: float) -> None:
        self.cell_variance = float(cell_variance)

    def variance_many(self, boxes: NDArray[np.int64]) -> NDArray[np.float64]:
        return box_sizes(boxes).astype(np.float64) * self.cell_variance

    def selection_variance_many(self, selections: Sequence[Selection]) -> NDArray[np.float64]:
        """Independent cells: the selection's cells times the cell variance."""
        return separable_variance(
            selections, lambda _axis, iv: iv[:, 1] - iv[:, 0] + 1.0, self.cell_variance
        )

    def to_dict(self) -> dict[str, Any]:
        return {"cell_variance": self.cell_variance}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UniformCellVariance:
        return cls(float(d["cell_variance"]))
