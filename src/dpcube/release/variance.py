"""Variance models: the exact noise variance of a range query, without the data.

A model maps boxes (inclusive index intervals per axis, shape (q, axes, 2)) to variances and
round-trips through a JSON dict so that a loaded release still knows its error. Each mechanism
with linear noise supplies one; register new kinds in :data:`dpcube.registry.VARIANCE_MODELS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube import registry
from dpcube.release.base import box_sizes


class VarianceModel(ABC):
    kind: ClassVar[str]

    @abstractmethod
    def variance_many(self, boxes: NDArray[np.int64]) -> NDArray[np.float64]:
        """Exact noise variance of the answer of each box."""

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

    def to_dict(self) -> dict[str, Any]:
        return {"cell_variance": self.cell_variance}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UniformCellVariance:
        return cls(float(d["cell_variance"]))
