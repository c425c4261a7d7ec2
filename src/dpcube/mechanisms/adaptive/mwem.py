"""MWEM: multiplicative weights and the exponential mechanism on a workload (Hardt, Ligett,
McSherry, "A Simple and Practical Algorithm for Differentially Private Data Release", NIPS 2012,
Algorithm 1 with the practical improvement its experiments use: every past measurement re-used
in the multiplicative-weights updates).

The queries are the workload's counting queries over boxes of the grid (:mod:`.queries`). With
``N`` the total (public if ``total`` is given, else measured: below), the estimate ``A`` starts
uniform, ``N / n`` on every cell, and each of ``T = rounds`` rounds spends ``epsilon_r`` =
(epsilon minus the total's share) / T:

1. *Select* (``selection_share`` of ``epsilon_r``): the exponential mechanism, exactly
   (:func:`dpcube.privacy.samplers.exponential_mechanism`), with score
   ``|q(x) - q(A)|`` for each query not measured yet (0 for the measured ones: which queries were
   measured is public, the earlier rounds' output). One record changes each ``q(x)`` by at most
   1, so each score by at most 1 (the "query answers" claim, L-infinity).
2. *Measure*: the chosen query's true answer plus discrete Laplace noise of scale
   ``1 / ((1 - selection_share) epsilon_r)`` (one query, L1 sensitivity 1).
3. *Multiplicative weights*: ``A(i) <- A(i) exp(q(i) (m - q(A)) / (2N))``, renormalised to ``N``,
   cycled ``update_rounds`` times over every measurement so far (the paper's practical
   improvement: re-using past measurements), in the log domain so that no weight overflows.

The release is the last ``A`` (the paper's practical variant, as in its experiments, rather than
the average of the ``A_t``).

``N``: with ``total`` given, it is taken as public knowledge (the manifest says so; it is not
charged). Without it, ``total_share`` of epsilon measures the total with discrete Laplace noise of
scale ``1 / (total_share epsilon)`` (L1 sensitivity 1 under ``add_remove``; under ``replace`` the
total does not change, the claim is an upper bound), floored at 1.

Privacy: sequential composition of the total's measurement and T rounds of (selection +
measurement): ``epsilon`` in all. Error: MW's estimate is biased towards uniform on the queries
it has not measured; the answers get model-based (bootstrap) intervals, never trusted ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import QueryError
from dpcube.histogram import Histogram
from dpcube.linalg.summed_area import box_sums, prefix_sums
from dpcube.mechanisms.adaptive.queries import box_slices, covers_grid, workload_boxes
from dpcube.mechanisms.base import Mechanism, SensitivityClaim, check_share_scale
from dpcube.mechanisms.params import ParamSpec
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace, exponential_mechanism
from dpcube.release.base import ReleaseMetadata
from dpcube.release.cells import CellRelease
from dpcube.schema import Schema
from dpcube.workloads import Workload, resolve_workload

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Sensitivity of one counting query over a box (add_remove and replace alike).
QUERY_SENSITIVITY = 1.0
#: The most cell updates (passes x cells, cells counted as at least 1,000) a release may do.
MAX_UPDATE_WORK = 5e8


def multiplicative_weights(
    log_weights: FloatArray,
    total: float,
    measurements: list[tuple[tuple[slice, ...], float]],
    update_rounds: int,
) -> FloatArray:
    """MW updates (Hardt et al., Algorithm 1, step 3) on ``log A`` (normalised to ``total``),
    cycled ``update_rounds`` times over ``measurements`` (box index, noisy answer).

    >>> w = multiplicative_weights(np.zeros(4), 8.0, [((slice(0, 1),), 8.0)], 200)
    >>> bool(total_of(w, 8.0)[0] > 7.5)
    True
    """
    w = np.array(log_weights, dtype=np.float64)
    for _ in range(update_rounds):
        norm = _logsumexp(w)  # log of the weights' sum, kept up to date update by update
        for index, measured in measurements:
            # the box's share of the total, clamped to [0, 1] against rounding
            share = min(max(float(np.exp(w[index] - norm).sum()), 0.0), 1.0)
            step = (measured - total * share) / (2.0 * total)
            w[index] += step
            # the box's weights grew by e^step: the sum by the factor (1 - share) + share e^step,
            # added in the log domain (a share of 1 and a step of -500 must not give log(0))
            rest = math.log1p(-share) if share < 1.0 else -math.inf
            boxed = math.log(share) + step if share > 0.0 else -math.inf
            norm += float(np.logaddexp(rest, boxed))
    return w - _logsumexp(w)


def _logsumexp(w: FloatArray) -> float:
    top = float(np.max(w))
    return top + math.log(float(np.exp(w - top).sum()))


def total_of(log_weights: FloatArray, total: float) -> FloatArray:
    """The estimate ``A = total * softmax(log A)``."""
    return total * np.exp(log_weights - _logsumexp(log_weights))


class MWEM(Mechanism):
    """MWEM (Hardt, Ligett, McSherry, NIPS 2012) on a workload of range queries.

    >>> from dpcube import Schema, Histogram
    >>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 7], "width": 1}]})
    >>> r = MWEM(1.0, workload="allrange").release(Histogram(s, [0, 0, 0, 0, 90, 90, 0, 0]), random_state=7)
    >>> r.metadata.mechanism, r.counts.shape
    ('mwem', (8,))
    """

    name = "mwem"
    #: Peak memory of a release per cell: the estimate, its log weights and prefix sums (floats).
    bytes_per_cell = 160.0
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "workload",
            "structured",
            "the workload of range queries MWEM selects from (a spec like allrange, or a query "
            "file)",
            accepts=(str, Path, list, Mapping, Workload),
        ),
        ParamSpec(
            "rounds", "int", "rounds T (one query selected and measured each)", low=1, high=10000
        ),
        ParamSpec(
            "selection_share",
            "float",
            "share of each round's epsilon on selecting the query (the rest measures it)",
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
        ),
        ParamSpec(
            "total",
            "int",
            "the number of records, taken as public (not charged); null: measured with "
            "total_share of epsilon (at most 2**44: the exponential mechanism's exact grid holds "
            "scores up to 2**46 sensitivities)",
            low=1,
            high=2**44,
            optional=True,
        ),
        ParamSpec(
            "total_share",
            "float",
            "share of epsilon measuring the total when it is not given",
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
        ),
        ParamSpec(
            "update_rounds",
            "int",
            "passes of multiplicative weights over all measurements after each round",
            low=1,
            high=10000,
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        workload: Any = "allrange",
        rounds: int = 10,
        selection_share: float = 0.5,
        total: int | None = None,
        total_share: float = 0.05,
        update_rounds: int = 50,
        neighbour: str = "add_remove",
    ) -> None:
        super().__init__(epsilon, delta, neighbour)
        self.workload = workload
        self.rounds = int(rounds)
        self.selection_share = float(selection_share)
        self.total = None if total is None else int(total)
        self.total_share = float(total_share)
        self.update_rounds = int(update_rounds)
        self._boxes: dict[tuple[Any, ...], IntArray] = {}
        self._resolved: Workload | None = None

    def get_params(self) -> dict[str, Any]:
        """The parameters; a workload given as a file, a list of queries or a Workload is
        recorded as its spec or its boxes (so that a saved release's bootstrap re-runs MWEM
        without the file)."""
        params = super().get_params()
        if self._resolved is not None and self._resolved.spec is None:
            params["workload"] = self._resolved.to_dict()
        elif isinstance(self.workload, Workload):
            params["workload"] = self.workload.to_dict()
        elif isinstance(self.workload, Path):
            params["workload"] = str(self.workload)
        return params

    def metadata(self, data: Any, source: RandomSource) -> ReleaseMetadata:
        """The base metadata, with the workload resolved first (so that :meth:`get_params`
        records a file's or a list's queries, not the path)."""
        if isinstance(data, Histogram):
            self.boxes(data.schema)
        return super().metadata(data, source)

    # -- the workload ------------------------------------------------------------------------
    def boxes(self, schema: Schema) -> IntArray:
        """The workload's queries as boxes of the schema's grid (resolved once per schema)."""
        key = (schema.shape, repr(schema.to_dict()))
        if key not in self._boxes:
            spec: Any = self.workload
            if isinstance(spec, Mapping):
                from dpcube.workloads import workload_from_dict

                spec = workload_from_dict(spec)
            w = resolve_workload(spec, schema)
            if tuple(w.dims) != tuple(schema.shape):
                raise QueryError(
                    f"mwem: the workload {w.name!r} is over the grid {w.dims} but the schema's "
                    f"grid is {schema.shape}; give a workload over the schema (e.g. allrange, "
                    "marginals:K, upto:K, or a query file)"
                )
            self._boxes[key] = workload_boxes(w)
            self._resolved = w
        return self._boxes[key]

    # -- the budget --------------------------------------------------------------------------
    @property
    def epsilon_total(self) -> float:
        """The share measuring the total (0 when the total is given as public)."""
        return 0.0 if self.total is not None else self.epsilon * self.total_share

    @property
    def epsilon_round(self) -> float:
        return (self.epsilon - self.epsilon_total) / self.rounds

    @property
    def epsilon_select(self) -> float:
        return self.epsilon_round * self.selection_share

    @property
    def epsilon_measure(self) -> float:
        return self.epsilon_round - self.epsilon_select

    @property
    def unit_rows(self) -> float:
        """The most rows one privacy unit adds or removes (1 for the row): every query answer
        and the total move by at most this much, one row at a time."""
        return float(self.privacy_unit.rows)

    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        boxes = self.boxes(schema)
        prefixed = np.asarray(boxes)

        def answers(x: IntArray) -> FloatArray:
            return box_sums(prefix_sums(np.asarray(x, dtype=np.int64)), prefixed).astype(np.float64)

        moving = Neighbour(self.neighbour) is Neighbour.ADD_REMOVE or not bool(
            np.all(covers_grid(boxes, schema.shape))
        )
        claims = [
            SensitivityClaim(
                "query answers",
                answers,
                "linf",
                QUERY_SENSITIVITY * self.unit_rows,
                tight=moving and self.privacy_unit.is_row,
            )
        ]
        if self.total is None:
            claims.append(
                SensitivityClaim(
                    "total",
                    lambda x: np.array([float(np.sum(x))]),
                    "l1",
                    self.unit_rows,
                    tight=Neighbour(self.neighbour) is Neighbour.ADD_REMOVE
                    and self.privacy_unit.is_row,
                )
            )
        return claims

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import MIXED_QUERIES, Case, mixed_schema

        line = Schema.from_dict(
            {"attributes": [{"name": "a", "kind": "ordinal", "range": [0, 3], "width": 1}]}
        )
        # Noiseless, all 10 queries of allrange:4 are measured exactly (10 rounds) and MW
        # converges to the counts (to 1e-14 on the all-ones and the [4, 3, 2, 1] bases, which
        # have no empty cell; MW approaches a count of 0 only as 2N/k after k passes).
        ranges: tuple[dict[str, Any], ...] = ({}, {"a": [0, 1]}, {"a": [1, 3]}, {"a": [2, 2]})
        # The first case is the one `dpcube audit` and the CI audit run thousands of times: a
        # cheap configuration (3 rounds, 10 passes); the noiseless-exactness case comes next.
        return [
            Case(
                "mwem-query-list",
                mixed_schema(),
                lambda n: cls(
                    5.0, workload=list(MIXED_QUERIES), rounds=3, update_rounds=10, neighbour=n
                ),
                (),
            ),
            Case(
                "mwem",
                line,
                lambda n: cls(
                    200.0, workload="allrange", rounds=10, update_rounds=100, neighbour=n
                ),
                ranges,
            ),
            Case(
                "mwem-marginals-public-total",
                mixed_schema(),
                lambda n: cls(
                    50.0, workload="marginals:1", rounds=6, total=20, update_rounds=20, neighbour=n
                ),
                (),
            ),
        ]

    def validate(self, data: Histogram) -> None:
        self.boxes(data.schema)  # the workload fits the schema (refused before the charge)
        # Round t cycles update_rounds times over t measurements, each pass O(cells): the
        # release does update_rounds * T (T + 1) / 2 passes. Refused above MAX_UPDATE_WORK cell
        # updates (seconds of work), before the charge, rather than running away after it.
        passes = self.update_rounds * self.rounds * (self.rounds + 1) // 2
        work = passes * max(math.prod(data.schema.shape), 1000)
        if work > MAX_UPDATE_WORK:
            raise QueryError(
                f"mwem: rounds={self.rounds} and update_rounds={self.update_rounds} make "
                f"{passes:,} update passes over {math.prod(data.schema.shape):,} cells, more than "
                f"{MAX_UPDATE_WORK:.0e} cell updates; lower rounds or update_rounds"
            )
        if self.total is None:
            check_share_scale(
                self.name, f"total_share={self.total_share:g}", self.unit_rows, self.epsilon_total
            )
        check_share_scale(
            self.name,
            f"rounds={self.rounds}",
            QUERY_SENSITIVITY * self.unit_rows,
            self.epsilon_measure,
        )
        check_share_scale(
            self.name,
            f"rounds={self.rounds}",
            QUERY_SENSITIVITY * self.unit_rows,
            self.epsilon_select,
        )

    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> CellRelease:
        schema = data.schema
        boxes = self.boxes(schema)
        counts = np.asarray(data.counts, dtype=np.int64)
        truth = box_sums(prefix_sums(counts), boxes).astype(np.float64)
        noise: dict[str, Any] = {"distribution": "discrete_laplace"}
        if self.total is None:
            noisy_total, draw = add_discrete_laplace(
                np.array([int(counts.sum())]), self.unit_rows / self.epsilon_total, source
            )
            total = max(float(noisy_total[0]), 1.0)
            noise.update(total="measured", epsilon_total=self.epsilon_total)
            noise["total_scale"] = float(draw.scale)
        else:
            total = float(self.total)
            noise["total"] = "public"
            metadata.declared_public = [
                {
                    "figure": "total",
                    "value": self.total,
                    "declared_by": "curator",
                    "how": "MWEM(total=...) / --param total=N: the number of records, taken as "
                    "public and not measured",
                }
            ]
        n = counts.size
        log_w = np.zeros(schema.shape, dtype=np.float64)
        measured: list[tuple[tuple[slice, ...], float]] = []
        chosen = np.zeros(len(boxes), dtype=bool)
        scale = 0.0
        for _ in range(self.rounds):
            estimate = box_sums(prefix_sums(total_of(log_w, total)), boxes)
            scores = np.where(chosen, 0.0, np.abs(truth - estimate))
            pick = exponential_mechanism(
                scores,
                epsilon=self.epsilon_select,
                sensitivity=QUERY_SENSITIVITY * self.unit_rows,
                source=source,
            )
            chosen[pick] = True
            answer, draw = add_discrete_laplace(
                np.array([int(truth[pick])]),
                QUERY_SENSITIVITY * self.unit_rows / self.epsilon_measure,
                source,
            )
            scale = float(draw.scale)
            measured.append((box_slices(boxes[pick]), float(answer[0])))
            log_w = multiplicative_weights(log_w, total, measured, self.update_rounds)
        noise.update(
            rounds=self.rounds,
            queries=len(boxes),
            epsilon_select=self.epsilon_select,
            epsilon_measure=self.epsilon_measure,
            measure_scale=scale,
            cells=n,
        )
        metadata.noise = noise
        return CellRelease(schema, metadata, total_of(log_w, total))
