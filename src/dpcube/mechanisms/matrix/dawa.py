"""DAWA, the data- and workload-aware algorithm (C. Li, M. Hay, G. Miklau, Y. Wang, "A Data- and
Workload-Aware Algorithm for Range Queries Under Differential Privacy", PVLDB 7(5), 2014).

The cells are put in a line (1-D as they are; 2-D along the Hilbert curve, as in the paper),
then two stages, with ``epsilon_1 = partition_share * epsilon`` and ``epsilon_2 = epsilon -
epsilon_1`` (sequential composition; the paper's rho = 0.25 is the default share):

1. **Private L1 partitioning** (the paper's first stage). A bucket B (an interval of the line)
   estimates each of its cells by the bucket's mean; its cost is the L1 error of that, the deviation
   ``dev(x, B) = sum_{i in B} |x_i - mean_B(x)|``, plus the expected absolute noise of its count,
   ``1 / epsilon_2``. The partition of least total cost is found by a dynamic program over the
   *dyadic* intervals (length ``2^k``, starting at a multiple of ``2^k``), whose every
   end point closes at most ``log2 n + 1`` of them: ``O(n log n)``.

   The deviations are measured with noise. Adding or removing one record changes one cell by 1,
   which moves ``dev(x, B)`` of each bucket B holding it by at most ``2 (1 - 1/|B|)`` (the mean
   moves by ``1/|B|``: the cell's own term by at most ``1 - 1/|B|``, the other ``|B| - 1`` terms
   by at most ``1/|B|`` each), and not at all for ``|B| = 1``. Each cell lies in exactly one
   dyadic interval per level, so the vector of all dyadic deviations has L1 sensitivity
   ``Delta_1 = sum_{k=1}^{K} 2 (1 - 2^{-k})``, ``K = floor(log2 n)``: about ``2 log2 n``, attained
   from an all-zero histogram (:func:`deviation_sensitivity`). Under ``replace`` (one record moves
   between two cells) at most twice that. The whole vector is released by the Laplace mechanism
   with scale ``Delta_1 / epsilon_1`` and the partition is post-processing of it, so stage 1 is
   ``epsilon_1``-DP by construction. (The paper, and ektelo's implementation, draw each
   interval's noise with scale ``2 / epsilon_1`` instead; that scale does not cover the many
   intervals one cell lies in under the standard argument, so dpcube calibrates to the whole
   vector: see docs/dawa.md for the effect on the error.) The noise is exact: ``|B| dev(x, B) =
   sum |(|B| x_i - S_B)|`` is an integer, drawn with discrete Laplace noise of scale ``|B|
   Delta_1 / epsilon_1`` (:func:`dpcube.privacy.samplers.add_discrete_laplace`), so that
   ``dev`` itself gets scale ``Delta_1 / epsilon_1`` on every level.

2. **Workload-aware measurement of the buckets** (the second stage). The workload W on the cells becomes
   ``W E`` on the buckets, E spreading a bucket's count evenly over its cells (Gram ``Eᵀ G E``);
   a strategy A for the buckets is chosen for it (the paper's GreedyH; dpcube the matrix
   mechanism's optimiser, :func:`dpcube.mechanisms.matrix.optimize.optimized_strategy`, on up to
   :data:`OPT_MAX_BUCKETS` buckets, else the binary hierarchy on up to
   :data:`HIERARCHY_MAX_BUCKETS`, else the identity), the bucket counts ``c`` are measured as
   ``A c`` plus Laplace noise of scale ``||A||_1 / epsilon_2`` (``||A||_1`` the largest column L1
   norm, the sensitivity of ``A c``: one record moves one bucket count by 1), estimated by least
   squares and spread evenly over each bucket's cells. The strategy depends on the partition,
   which stage 1 released: post-processing.

The release is a :class:`~dpcube.release.cells.CellRelease` without a variance model: its answers
are biased by the partition (a bucket's cells all get its mean), so no exact interval exists;
``answer_uncertainty`` gives the model-based bootstrap (never trusted). The error model is in
docs/dawa.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import QueryError
from dpcube.histogram import Histogram
from dpcube.linalg.operators import Explicit
from dpcube.linalg.solve import GramSolver, least_squares
from dpcube.mechanisms.base import Mechanism, SensitivityClaim, check_share_scale
from dpcube.mechanisms.matrix.strategies import Strategy, hierarchical, identity
from dpcube.mechanisms.params import ParamSpec
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace, snapped_laplace
from dpcube.release.base import ReleaseMetadata
from dpcube.release.cells import CellRelease
from dpcube.schema import Schema
from dpcube.workloads import Workload, allrange, resolve_workload

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: Largest grid on which the workload's Gram is made dense to reduce it to the buckets
#: (``Eᵀ G E``): 4,096 cells is a 128 MiB matrix.
MAX_WORKLOAD_CELLS = 4096
#: Most buckets the optimised strategy is built for: the optimiser takes about 0.7 CPU s on 256
#: buckets and 9 s on 1,024 (it grows about as k^2), and the model-based intervals re-run the
#: release hundreds of times; above, the binary hierarchy.
OPT_MAX_BUCKETS = 256
#: Most buckets measured by the binary hierarchy (its least squares is dense); above, the
#: identity (each bucket count with its own noise).
HIERARCHY_MAX_BUCKETS = 4096
#: Bucket strategies a release may ask for: ``opt`` falls back as the constants above say.
BUCKET_STRATEGIES = ("opt", "hierarchical", "identity")


# -- the line of cells --------------------------------------------------------------------------
def hilbert_curve(side: int) -> tuple[IntArray, IntArray]:
    """(row, column) of the cells of a ``side x side`` grid (side a power of two) in the order of
    the Hilbert curve (the classic distance-to-coordinates conversion, vectorised).

    >>> r, c = hilbert_curve(2)
    >>> list(zip(r.tolist(), c.tolist()))
    [(0, 0), (0, 1), (1, 1), (1, 0)]
    """
    d = np.arange(side * side, dtype=np.int64)
    x = np.zeros_like(d)
    y = np.zeros_like(d)
    t = d.copy()
    s = 1
    while s < side:
        rx = 1 & (t // 2)
        ry = 1 & (t ^ rx)
        flip = (ry == 0) & (rx == 1)
        x = np.where(flip, s - 1 - x, x)
        y = np.where(flip, s - 1 - y, y)
        swap = ry == 0
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        x = x + s * rx
        y = y + s * ry
        t //= 4
        s *= 2
    return x, y


def line_order(shape: Sequence[int]) -> IntArray:
    """The flat (C-order) indices of the cells in the order DAWA lines them up: 1-D as they are,
    2-D along the Hilbert curve of the smallest power-of-two square holding the grid (cells
    outside the grid skipped, so any rows x columns works).

    >>> line_order((2, 2)).tolist(), line_order((3,)).tolist()
    ([0, 1, 3, 2], [0, 1, 2])
    >>> sorted(line_order((3, 5)).tolist()) == list(range(15))
    True
    """
    dims = tuple(int(d) for d in shape)
    if len(dims) == 1:
        return np.arange(dims[0], dtype=np.int64)
    if len(dims) != 2:
        raise QueryError(
            f"dawa releases 1-D and 2-D grids (2-D along the Hilbert curve); this schema has "
            f"{len(dims)} axes {dims}: release fewer attributes, or use matrix or identity"
        )
    rows, cols = dims
    side = 1 << max(0, math.ceil(math.log2(max(rows, cols))))
    r, c = hilbert_curve(side)
    inside = (r < rows) & (c < cols)
    return np.asarray(r[inside] * cols + c[inside], dtype=np.int64)


# -- stage 1: the L1 partition ------------------------------------------------------------------
def dyadic_levels(n: int) -> list[int]:
    """Bucket lengths ``2^k`` (k >= 1) of the dyadic intervals that fit in ``n`` cells.

    >>> dyadic_levels(1), dyadic_levels(8), dyadic_levels(12)
    ([], [2, 4, 8], [2, 4, 8])
    """
    out = []
    m = 2
    while m <= n:
        out.append(m)
        m *= 2
    return out


def scaled_deviations(line: IntArray) -> list[IntArray]:
    """For each dyadic length m (:func:`dyadic_levels`), the integers ``m dev(x, B) = sum_{i in B}
    |m x_i - S_B|`` of the aligned intervals ``B = [j m, (j + 1) m)`` inside the line.

    >>> [d.tolist() for d in scaled_deviations(np.array([1, 3, 2, 2]))]
    [[4, 0], [8]]
    """
    x = np.asarray(line, dtype=np.int64)
    out = []
    for m in dyadic_levels(len(x)):
        blocks = x[: (len(x) // m) * m].reshape(-1, m)
        sums = blocks.sum(axis=1)
        out.append(np.abs(m * blocks - sums[:, None]).sum(axis=1))
    return out


def deviation_sensitivity(n: int, neighbour: str = "add_remove") -> float:
    """L1 sensitivity of the vector of every dyadic interval's deviation (module docstring):
    ``sum_k 2 (1 - 1/m_k)`` over the dyadic lengths, twice that under ``replace``.

    >>> deviation_sensitivity(1), deviation_sensitivity(4), deviation_sensitivity(4, "replace")
    (0.0, 2.5, 5.0)
    """
    base = sum((2.0 * (1.0 - 1.0 / m) for m in dyadic_levels(n)), 0.0)
    return base if Neighbour(neighbour) is Neighbour.ADD_REMOVE else 2.0 * base


def deviations(line: IntArray) -> FloatArray:
    """Every dyadic interval's deviation ``dev(x, B)``, level after level (the measurement of
    stage 1; its sensitivity is :func:`deviation_sensitivity`)."""
    parts = [d / m for d, m in zip(scaled_deviations(line), dyadic_levels(len(line)), strict=True)]
    return np.concatenate(parts) if parts else np.zeros(0)


def best_partition(n: int, level_costs: Sequence[FloatArray], bucket_cost: float) -> IntArray:
    """The partition of ``[0, n)`` into dyadic intervals of least total cost, by the dynamic
    program of Li et al. restricted to dyadic intervals: ``best[j] = min_m best[j - m] + cost(j - m, j)`` over the
    dyadic lengths m closing at j, in ``O(n log n)``. ``level_costs[k][i]`` is the (noisy)
    deviation of the i-th interval of length ``2^(k+1)``; every bucket adds ``bucket_cost``;
    singletons cost ``bucket_cost`` only. Ties keep the longer bucket. Returns the bucket starts
    (ascending, from 0).

    >>> best_partition(4, [np.array([0.0, 5.0]), np.array([6.0])], 1.0).tolist()
    [0, 2, 3]
    """
    best = np.zeros(n + 1)
    start = np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        best[j] = best[j - 1] + bucket_cost
        start[j] = j - 1
        m, k = 2, 0
        while m <= j and j % m == 0 and k < len(level_costs):
            candidate = best[j - m] + float(level_costs[k][j // m - 1]) + bucket_cost
            if candidate <= best[j]:
                best[j] = candidate
                start[j] = j - m
            m *= 2
            k += 1
    starts = []
    j = n
    while j > 0:
        j = int(start[j])
        starts.append(j)
    return np.array(starts[::-1], dtype=np.int64)


def noisy_deviations(
    line: IntArray, epsilon_1: float, sensitivity: float, source: RandomSource
) -> list[FloatArray]:
    """Stage 1's measurement: each level's deviations with discrete Laplace noise of scale
    ``sensitivity / epsilon_1`` (on the integers ``m dev``, scale ``m sensitivity / epsilon_1``),
    clipped at 0 (a deviation is never negative; post-processing). ``sensitivity``: the L1
    sensitivity of the whole vector (:func:`deviation_sensitivity`)."""
    out = []
    for scaled, m in zip(scaled_deviations(line), dyadic_levels(len(line)), strict=True):
        noisy, _ = add_discrete_laplace(scaled, m * sensitivity / epsilon_1, source)
        out.append(np.maximum(noisy, 0).astype(np.float64) / m)
    return out


# -- stage 2: the buckets ----------------------------------------------------------------------
def bucket_sizes(starts: IntArray, n: int) -> IntArray:
    """Sizes of the buckets starting at ``starts`` on a line of n cells.

    >>> bucket_sizes(np.array([0, 2, 3]), 4).tolist()
    [2, 1, 1]
    """
    return np.diff(np.append(starts, n)).astype(np.int64)


def reduced_gram(gram_line: FloatArray, starts: IntArray) -> FloatArray:
    """``Eᵀ G E`` for the workload's Gram on the line and E spreading each bucket evenly over its
    cells: ``(1 / |a||b|) sum_{i in a, j in b} G_ij``.

    >>> reduced_gram(np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([0])).tolist()
    [[1.5]]
    """
    n = gram_line.shape[0]
    sizes = bucket_sizes(starts, n).astype(np.float64)
    summed = np.add.reduceat(np.add.reduceat(gram_line, starts, axis=0), starts, axis=1)
    return np.asarray(summed / np.outer(sizes, sizes), dtype=np.float64)


def bucket_strategy(
    requested: str,
    buckets: int,
    gram: Callable[[], FloatArray] | None,
    max_opt_buckets: int = OPT_MAX_BUCKETS,
) -> Strategy:
    """The strategy measuring ``buckets`` bucket counts: ``opt`` (the matrix optimiser on the
    reduced workload ``gram()``; needs the Gram and at most ``max_opt_buckets`` buckets),
    ``hierarchical`` (binary; at most :data:`HIERARCHY_MAX_BUCKETS`) or ``identity``, each falling
    back to the next when it does not apply. Depends on the partition only (post-processing)."""
    if buckets == 1:
        return identity(1)
    if requested == "opt" and gram is not None and buckets <= max_opt_buckets:
        from dpcube.mechanisms.matrix.optimize import optimized_strategy

        reduced = Workload("DAWA buckets", (buckets,), Explicit(gram()), 1)
        return optimized_strategy(reduced)
    if requested in ("opt", "hierarchical") and buckets <= HIERARCHY_MAX_BUCKETS:
        return hierarchical(buckets)
    return identity(buckets)


@dataclass(frozen=True)
class Partition:
    """A partition of the line of cells: ``order`` (flat cell indices along the line) and the
    bucket ``starts`` on that line."""

    order: IntArray
    starts: IntArray

    @property
    def sizes(self) -> IntArray:
        return bucket_sizes(self.starts, len(self.order))

    def bucket_counts(self, counts: NDArray[Any]) -> IntArray:
        line = np.asarray(counts).ravel()[self.order]
        return np.add.reduceat(line.astype(np.int64), self.starts).astype(np.int64)

    def spread(self, bucket_estimates: FloatArray, shape: tuple[int, ...]) -> FloatArray:
        """Cells from bucket estimates: each bucket's estimate spread evenly over its cells."""
        line = np.repeat(bucket_estimates / self.sizes, self.sizes)
        out = np.empty(len(self.order))
        out[self.order] = line
        return out.reshape(shape)


class DAWA(Mechanism):
    """DAWA (Li, Hay, Miklau, Wang, PVLDB 2014): a private L1 partition of the cells, then a
    workload-aware strategy on the buckets (module docstring; error model in docs/dawa.md).

    ``workload``: as for ``matrix`` (a spec such as ``allrange``, a JSON/CSV file of queries, a
    list of query dicts or a :class:`Workload`); default AllRange over the grid.
    ``partition_share``: the share of epsilon spent on the partition (the paper's rho).
    ``strategy``: how the bucket counts are measured (``opt``, ``hierarchical``, ``identity``).

    >>> from dpcube import Schema, Histogram
    >>> from dpcube.privacy import NO_NOISE
    >>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 7], "width": 1}]})
    >>> r = DAWA(1.0).release(Histogram(s, [5, 5, 5, 5, 0, 0, 9, 1]), random_state=NO_NOISE)
    >>> r.counts.round(6).tolist()
    [5.0, 5.0, 5.0, 5.0, 0.0, 0.0, 9.0, 1.0]
    >>> r.metadata.noise["buckets"]
    4
    """

    name = "dawa"
    #: Peak memory of a release per cell besides the dense matrices of :meth:`memory_estimate`:
    #: 82 bytes measured (tracemalloc, 2**16 and 2**18 cells, few buckets), x1.5.
    bytes_per_cell = 124.0
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "workload",
            "structured",
            "the workload the bucket strategy is chosen for (a spec like allrange, or a query "
            "file); null: every range",
            optional=True,
            accepts=(str, Path, list, Workload),
        ),
        ParamSpec(
            "partition_share",
            "float",
            "share of epsilon spent on the private partition (the paper's rho); the rest "
            "measures the buckets",
            low=0,
            high=1,
            low_open=True,
            high_open=True,
        ),
        ParamSpec(
            "strategy",
            "choice",
            "how the bucket counts are measured: opt (the matrix optimiser on the workload, up "
            f"to {OPT_MAX_BUCKETS} buckets on grids of up to {MAX_WORKLOAD_CELLS} cells), "
            "hierarchical, identity",
            choices=BUCKET_STRATEGIES,
        ),
        ParamSpec(
            "max_opt_buckets",
            "int",
            "most buckets the opt strategy is optimised for (about 0.7 CPU s at 256, 9 s at "
            "1024); above, the binary hierarchy",
            low=2,
            high=HIERARCHY_MAX_BUCKETS,
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        neighbour: str = "add_remove",
        workload: Any = None,
        partition_share: float = 0.25,
        strategy: str = "opt",
        max_opt_buckets: int = OPT_MAX_BUCKETS,
    ) -> None:
        super().__init__(epsilon, delta, neighbour)
        self.workload = workload
        self.partition_share = float(partition_share)
        self.strategy = strategy
        self.max_opt_buckets = int(max_opt_buckets)
        self._workloads: dict[str, Workload] = {}

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        if isinstance(self.workload, Workload):
            params["workload"] = self.workload.to_dict()
        return params

    @property
    def epsilon_partition(self) -> float:
        return self.partition_share * self.epsilon

    @property
    def epsilon_buckets(self) -> float:
        return self.epsilon - self.epsilon_partition

    # -- the workload ------------------------------------------------------------------------
    def resolve_workload(self, schema: Schema) -> Workload | None:
        """The workload over this schema's grid (AllRange when none was given), checked; None
        when none was given and the grid is above :data:`MAX_WORKLOAD_CELLS` (no dense Gram)."""
        key = repr(schema.to_dict())
        if key not in self._workloads:
            dims = schema.shape
            if self.workload is None:
                if math.prod(dims) > MAX_WORKLOAD_CELLS:
                    return None
                w = allrange(dims)
            else:
                w = resolve_workload(self.workload, schema)
            if w.n != math.prod(dims):
                raise QueryError(
                    f"the workload {w.name!r} has {w.n} cells but the schema's grid {dims} has "
                    f"{math.prod(dims)}"
                )
            self._workloads[key] = w
        return self._workloads[key]

    def _line_gram(self, schema: Schema, order: IntArray) -> FloatArray | None:
        """The workload's dense Gram in line order, or None when the grid is too large."""
        w = self.resolve_workload(schema)
        if w is None or math.prod(schema.shape) > MAX_WORKLOAD_CELLS:
            return None
        gram = w.gram.dense()
        return np.asarray(gram[np.ix_(order, order)], dtype=np.float64)

    # -- declared privacy --------------------------------------------------------------------
    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        order = line_order(schema.shape)
        n = len(order)
        pairs = np.arange(0, n, 2, dtype=np.int64)
        # One privacy unit of m = min(K, C R) rows moves both measurements by at most m times
        # one row's change (triangle inequality, one row at a time): both claims scale by m.
        rows = float(self.privacy_unit.rows)
        stage2_factor = (1.0 if self.neighbour == Neighbour.ADD_REMOVE.value else 2.0) * rows
        tight = self.neighbour == Neighbour.ADD_REMOVE.value and self.privacy_unit.is_row

        def bucket_answers(x: NDArray[np.int64]) -> FloatArray:
            # Stage 2 for a fixed partition (the pairs of the line): A c / ||A||_1. For any
            # partition the columns of A S (S: cells to buckets) are columns of A, so its L1
            # sensitivity is ||A||_1 (add_remove) and at most twice that (replace).
            part = Partition(order, pairs)
            gram = self._line_gram(schema, order)
            strategy = bucket_strategy(
                self.strategy,
                len(pairs),
                None if gram is None else (lambda: reduced_gram(gram, pairs)),
                self.max_opt_buckets,
            )
            op = strategy.operator
            c = part.bucket_counts(x).astype(np.float64)
            return np.asarray(op.matvec(c) / op.l1_sensitivity(), dtype=np.float64)

        return [
            SensitivityClaim(
                "deviations of the dyadic intervals (stage 1, epsilon_1)",
                lambda x: deviations(np.asarray(x).ravel()[order]),
                "l1",
                deviation_sensitivity(n, self.neighbour) * rows,
                tight=tight,
            ),
            SensitivityClaim(
                "bucket strategy answers / ||A||_1 (stage 2, epsilon_2)",
                bucket_answers,
                "l1",
                stage2_factor,
                tight=tight,
            ),
        ]

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import MIXED_QUERIES, Case, mixed_schema

        eight = Schema.from_dict(
            {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 7], "width": 1}]}
        )
        ranges = [{}, {"x": [0, 1]}, {"x": [2, 6]}, {"x": [7, 7]}]
        # The first case (audited by default) runs at epsilon 1; its noiseless answers are biased
        # by the partition, so it checks no answers. At epsilon 64 the bucket cost 1/epsilon_2 is below 1/45, under any non-zero deviation
        # of whole counts (at least 1/2 for two cells), so a noiseless release keeps only the
        # buckets of equal cells and answers every query exactly.
        return [
            Case("dawa-1d", eight, lambda n: cls(1.0, neighbour=n), []),
            Case("dawa-1d-exact", eight, lambda n: cls(64.0, neighbour=n), ranges),
            Case(
                "dawa-2d-hilbert-exact",
                mixed_schema(),
                lambda n: cls(64.0, neighbour=n, workload="allrange:3x3"),
                MIXED_QUERIES,
            ),
            Case(
                "dawa-1d-hierarchical",
                eight,
                lambda n: cls(1.0, neighbour=n, strategy="hierarchical", partition_share=0.5),
                [],
            ),
        ]

    # -- releasing ---------------------------------------------------------------------------
    def prepare(self, data: Any) -> Any:
        prepared = super().prepare(data)
        line_order(prepared.schema.shape)  # refuses a grid of more than two axes
        return prepared

    def validate(self, data: Histogram) -> None:
        """The workload fits the grid and both shares of epsilon keep their noise within the
        exact samplers (before the charge)."""
        schema = data.schema
        if self.workload is not None:
            self.resolve_workload(schema)
        n = math.prod(schema.shape)
        levels = dyadic_levels(n)
        deviation_claim, bucket_claim = self.sensitivity_claims(schema)
        if levels:
            check_share_scale(
                self.name,
                f"partition_share={self.partition_share:g}",
                levels[-1] * deviation_claim.declared,
                self.epsilon_partition,
            )
        # The bucket strategy's column norm is at most the binary hierarchy's levels (the
        # optimised strategy's is 1, the identity's 1), times the declared factor.
        factor = bucket_claim.declared
        check_share_scale(
            self.name,
            f"1 - partition_share={1 - self.partition_share:g}",
            factor * (math.ceil(math.log2(max(n, 1))) + 1),
            self.epsilon_buckets,
        )

    def memory_estimate(self, data: Any) -> float:
        """The line's vectors (:attr:`bytes_per_cell`), plus the dense matrices: the workload's
        Gram and its reduction when the grid is small enough for ``opt`` (two n x n float64), and
        the least squares of a bucket strategy other than the identity (its Gram and factor, at
        most :data:`HIERARCHY_MAX_BUCKETS` square)."""
        n = float(math.prod(data.schema.shape))
        dense = 0.0
        if self.strategy == "opt" and n <= MAX_WORKLOAD_CELLS:
            dense += 2 * 8.0 * n * n
        if self.strategy != "identity":
            dense += 2 * 8.0 * min(n, float(HIERARCHY_MAX_BUCKETS)) ** 2
        return super().memory_estimate(data) + dense

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> CellRelease:
        schema = data.schema
        order = line_order(schema.shape)
        line = data.counts.ravel()[order].astype(np.int64)
        n = len(line)
        # Stage 1: the private partition (epsilon_1).
        # The noise scales come from the declared claims (module docstring).
        deviation_claim, bucket_claim = self.sensitivity_claims(schema)
        costs = noisy_deviations(line, self.epsilon_partition, deviation_claim.declared, source)
        # A bucket's expected noise grows with the unit's rows (the stage-2 claim): so does its cost.
        starts = best_partition(n, costs, bucket_claim.declared / self.epsilon_buckets)
        part = Partition(order, starts)
        k = len(starts)
        # Stage 2: the buckets (epsilon_2), a strategy chosen from the partition alone.
        gram = self._line_gram(schema, order) if self.strategy == "opt" else None
        strategy = bucket_strategy(
            self.strategy,
            k,
            None if gram is None else (lambda: reduced_gram(gram, starts)),
            self.max_opt_buckets,
        )
        op = strategy.operator
        norm = op.l1_sensitivity()
        factor = bucket_claim.declared
        changed = 1 if self.neighbour == Neighbour.ADD_REMOVE.value else 2
        support = int(op.column_support().max()) * changed * self.privacy_unit.cells
        answers = op.matvec(part.bucket_counts(data.counts).astype(np.float64))
        noisy, draw = snapped_laplace(
            answers,
            factor * norm / self.epsilon_buckets,
            epsilon=self.epsilon_buckets,
            support=support,
            source=source,
        )
        buckets = least_squares(op, noisy, GramSolver.for_strategy(op))
        estimate = part.spread(buckets, schema.shape)
        metadata.noise = {
            "distribution": "discrete_laplace (partition), " + draw.distribution + " (buckets)",
            "epsilon_partition": self.epsilon_partition,
            "epsilon_buckets": self.epsilon_buckets,
            "deviation_scale": deviation_claim.declared / self.epsilon_partition,
            "buckets": k,
            "largest_bucket": int(part.sizes.max()),
            "bucket_strategy": strategy.name,
            "strategy_l1": norm,
            "scale": float(np.max(draw.scale)),
            "noise_variance": float(np.max(draw.variance)),
            "line": "hilbert" if len(schema.shape) == 2 else "axis",
        }
        return CellRelease(schema, metadata, estimate)


__all__ = [
    "BUCKET_STRATEGIES",
    "DAWA",
    "HIERARCHY_MAX_BUCKETS",
    "MAX_WORKLOAD_CELLS",
    "OPT_MAX_BUCKETS",
    "Partition",
    "best_partition",
    "bucket_strategy",
    "deviation_sensitivity",
    "deviations",
    "dyadic_levels",
    "hilbert_curve",
    "line_order",
    "noisy_deviations",
    "reduced_gram",
    "scaled_deviations",
]
