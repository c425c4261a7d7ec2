"""The Identity mechanism: independent noise on every cell (Dwork, McSherry, Nissim, Smith 2006;
"Basic" in the Privelet paper).

Measurement: the histogram itself. Under ``add_remove`` one cell changes by 1 (L1 = L2 = 1);
under ``replace`` one cell loses 1 and another gains 1 (L1 = 2, L2 = sqrt 2). With a privacy unit
of at most K rows (C cells, R rows a cell) one unit changes the histogram by L1 min(K, C R) and
L2 sqrt(q R^2 + r^2) (:mod:`dpcube.privacy.unit`; x2 and x sqrt 2 under replace): Laplace noise
is calibrated to the first, Gaussian noise to the second.

- ``noise="laplace"``: discrete Laplace of scale Delta_1/epsilon on the integer counts: epsilon-DP.
- ``noise="gaussian"``: discrete Gaussian with sigma from (epsilon, delta) through zCDP
  (:func:`dpcube.privacy.samplers.gaussian_sigma`): (epsilon, delta)-DP.

A range query over c cells has noise variance c times the per-cell variance.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from dpcube.errors import BudgetError
from dpcube.histogram import Histogram
from dpcube.mechanisms.base import Mechanism, SensitivityClaim
from dpcube.mechanisms.params import ParamSpec
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import (
    add_discrete_gaussian,
    add_discrete_laplace,
    gaussian_sigma,
)
from dpcube.release.base import ReleaseMetadata
from dpcube.release.cells import CellRelease
from dpcube.release.variance import UniformCellVariance
from dpcube.schema import Schema


class Identity(Mechanism):
    """Noise on every cell of the histogram.

    >>> from dpcube import Schema, Histogram
    >>> from dpcube.privacy import NO_NOISE
    >>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 3], "width": 1}]})
    >>> r = Identity(1.0).release(Histogram(s, [1, 2, 3, 4]), random_state=NO_NOISE)
    >>> r.answer({"x": [1, 2]}), r.variance({"x": [1, 2]}) > 0
    (5.0, True)
    """

    name = "identity"
    #: Peak memory of a release per cell: 32 bytes measured (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 48.0
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "noise",
            "choice",
            "the noise on every cell (gaussian needs --delta)",
            choices=("laplace", "gaussian"),
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        noise: str = "laplace",
        neighbour: str = "add_remove",
    ) -> None:
        super().__init__(epsilon, delta, neighbour)
        if noise == "gaussian" and self.delta is None:
            raise BudgetError("Gaussian noise needs delta > 0 (for example delta=1e-6)")
        self.noise = noise

    @property
    def norm(self) -> str:
        return "l1" if self.noise == "laplace" else "l2"

    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        delta = self.histogram_sensitivity(self.norm)
        return [
            SensitivityClaim(
                "cells", lambda x: np.asarray(x, dtype=np.float64).ravel(), self.norm, delta
            )
        ]

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import MIXED_QUERIES, Case, mixed_schema

        schema, queries = mixed_schema(), MIXED_QUERIES
        return [
            Case("identity-laplace", schema, lambda n: cls(1.0, neighbour=n), queries),
            Case(
                "identity-gaussian",
                schema,
                lambda n: cls(0.5, delta=1e-5, noise="gaussian", neighbour=n),
                queries,
            ),
        ]

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> CellRelease:
        sensitivity = self.histogram_sensitivity(self.norm)
        counts: Any
        if self.noise == "laplace":
            counts, draw = add_discrete_laplace(data.counts, sensitivity / self.epsilon, source)
        else:
            assert self.delta is not None
            sigma = gaussian_sigma(sensitivity, self.epsilon, self.delta)
            counts, draw = add_discrete_gaussian(data.counts, sigma, source)
        metadata.noise = {
            "distribution": draw.distribution,
            "scale": float(draw.scale),
            "cell_variance": float(draw.variance),
        }
        return CellRelease(data.schema, metadata, counts, UniformCellVariance(float(draw.variance)))
