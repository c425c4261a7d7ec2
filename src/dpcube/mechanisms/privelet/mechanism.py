"""Privelet and Privelet+ (Xiao, Wang, Gehrke, "Differential Privacy via Wavelet Transforms",
ICDE 2010; arXiv:0909.5530).

Privelet (Sec. III-VI): transform the frequency matrix with the HN wavelet transform, add
independent Laplace noise of magnitude ``lambda / W(c)`` to every coefficient c, refine (mean
subtraction on nominal axes) and invert. Privelet+ (Sec. VI-D, Fig. 5) leaves the attributes in
S_A untransformed; it is implemented as the HN transform with the identity on those axes (as in
Fig. 5), which is the paper's loop over sub-matrices without the loop.

Privacy (Privelet, Sec. II, Lemma 1, Theorem 2, Corollary 1). The weighted coefficients ``W(c) c``
have L1 sensitivity ``rho = prod_{A not in S_A} P(A)`` under the addition or removal of one tuple
(one cell changes by 1; Definition 3, Theorem 2), and at most ``2 rho`` when one tuple is replaced
(two cells change; the proof of Lemma 1). So Laplace noise of scale ``lambda = c rho / epsilon`` on
them, with ``c = 2`` for ``replace`` (the paper's notion, default) and ``c = 1`` for ``add_remove``,
is epsilon-DP; noise ``Lap(lambda)`` on ``W(c) c`` is the paper's ``Lap(lambda / W(c))`` on c (the
un-normalised form of Sec. III-A). The noise comes from
:func:`dpcube.privacy.samplers.snapped_laplace`, whose ``support`` is the number of coefficients one
neighbour can change: ``prod_i support_i`` per changed cell, twice that under ``replace``. It is
added to exact integers ``D W(c) c`` (D clears the denominators ``2f - 2`` of the nominal weights)
with the scale ``D lambda``, so no rounding error precedes it (:meth:`PriveletPlus._noisy_cells`).
When every attribute is in S_A nothing is transformed and the mechanism is the Basic method,
released exactly as :class:`dpcube.Identity` does (integer discrete Laplace).

Error (Privelet, Theorem 3): every weighted coefficient gets noise of the same variance v, so a box
query ``S_1 x ... x S_d`` has variance ``v * prod_i V_i(S_i)`` exactly (:class:`PriveletVariance`);
the paper's worst-case bound is ``v * prod_i H(A_i)`` (Theorem 3, Corollary 1, Eq. 7).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import SchemaError
from dpcube.histogram import Histogram
from dpcube.mechanisms.base import Mechanism, SensitivityClaim
from dpcube.mechanisms.params import ParamSpec
from dpcube.mechanisms.privelet.transforms import (
    EXACT_LIMIT,
    AxisTransform,
    HaarAxis,
    IdentityAxis,
    NominalAxis,
    NominalTree,
    axis_from_dict,
    box_variance,
    coefficient_support,
    common_denominator,
    denominators,
    generalized_sensitivity,
    hn_forward,
    hn_forward_integer,
    hn_inverse,
    integer_bound,
)
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace, snapped_laplace
from dpcube.release.base import ReleaseMetadata
from dpcube.release.cells import CellRelease
from dpcube.release.variance import Selection, VarianceModel, separable_variance
from dpcube.schema import Attribute, Nominal, Ordinal, Schema, Spatial


def wavelet_axes(attribute: Attribute) -> list[AxisTransform]:
    """The transforms of an attribute's axes: Haar for ordinal and spatial axes (Sec. IV), the
    nominal transform for a nominal attribute (Sec. V; a flat root over the categories when it has
    no hierarchy: h = 2, as for Gender in Sec. VII)."""
    if isinstance(attribute, Ordinal | Spatial):
        return [HaarAxis(n) for n in attribute.shape]
    if isinstance(attribute, Nominal):
        if attribute.hierarchy is not None:
            return [NominalAxis(NominalTree.from_hierarchy(attribute.hierarchy))]
        return [NominalAxis(NominalTree.flat(len(attribute.categories)))]
    raise SchemaError(
        f"attribute {attribute.name!r}: Privelet supports ordinal, nominal and spatial"
    )


def plain_by_rule(attribute: Attribute) -> bool:
    """Privelet, Sec. VI-D: A goes to S_A iff ``|A| <= P(A)**2 H(A)`` (per axis product for a
    spatial one).

    Eq. (7) is a product of one factor per attribute, |A| in S_A and P^2 H outside, so this
    choice minimises the bound.

    >>> from dpcube.schema import Ordinal
    >>> plain_by_rule(Ordinal.from_range("age", 0, 100, 1)), plain_by_rule(Ordinal.from_range("x", 0, 1000, 1))
    (True, False)
    """
    axes = wavelet_axes(attribute)
    return math.prod(attribute.shape) <= math.prod(ax.rho**2 * ax.bound_factor for ax in axes)


@dataclass(frozen=True)
class PriveletPlan:
    """Everything about a release that depends on the schema but not on the data."""

    axes: tuple[AxisTransform, ...]
    plain: tuple[str, ...]
    rho: int
    support: int
    neighbour_factor: int

    @property
    def all_plain(self) -> bool:
        return all(ax.kind == "identity" for ax in self.axes)

    def noise_scale(self, epsilon: float) -> float:
        """lambda = c rho / epsilon (Lemma 1 with c = 2 for replace; c = 1 for add/remove)."""
        return self.neighbour_factor * self.rho / epsilon

    @property
    def coefficients(self) -> int:
        return math.prod(ax.size for ax in self.axes)


class PriveletVariance(VarianceModel):
    """Exact variance of a box query: ``v * prod_i V_i(S_i)`` (Privelet, Theorem 3),
    data-independent.

    ``coefficient_variance`` v is the realised variance of the noise on every weighted coefficient
    ``W c``, as the sampler reports it: ``2 lambda**2`` enlarged by the sampler's grid (a factor
    ``1 + O(support 2**-24 / epsilon)``), the same for every coefficient.

    >>> m = PriveletVariance(2.0, [HaarAxis(8)])
    >>> m.variance_many(np.array([[[0, 7]], [[1, 6]]]))
    array([2.   , 2.375])
    """

    kind = "privelet"

    def __init__(self, coefficient_variance: float, axes: Sequence[AxisTransform]) -> None:
        self.coefficient_variance = float(coefficient_variance)
        self.axes = tuple(axes)

    def variance_many(self, boxes: NDArray[np.int64]) -> NDArray[np.float64]:
        boxes = np.asarray(boxes, dtype=np.int64).reshape(-1, len(self.axes), 2)
        return self.coefficient_variance * box_variance(self.axes, boxes)

    def selection_variance_many(self, selections: Sequence[Selection]) -> NDArray[np.float64]:
        """Exact variance of a set query: the noise covariance is ``v ⊗_i M_i`` (one factor per
        axis, Theorem 3's product), so the sum over a product of unions of intervals has
        variance ``v Π_i r_iᵀ M_i r_i`` (:func:`~dpcube.release.variance.separable_variance`)."""
        return separable_variance(
            selections,
            lambda axis, iv: self.axes[axis].interval_variance(iv[:, 0], iv[:, 1]),
            self.coefficient_variance,
        )

    def paper_bound(self) -> float:
        """Theorem 3 / Corollary 1: ``v * prod_i H(A_i)`` bounds every admissible range query."""
        return self.coefficient_variance * math.prod(ax.bound_factor for ax in self.axes)

    def max_variance(self) -> float:
        """The exact largest variance over all boxes: ``v * prod_i max_S V_i(S)`` (small axes)."""
        return self.coefficient_variance * math.prod(ax.max_interval_variance() for ax in self.axes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "coefficient_variance": self.coefficient_variance,
            "axes": [ax.to_dict() for ax in self.axes],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PriveletVariance:
        return cls(float(d["coefficient_variance"]), [axis_from_dict(a) for a in d["axes"]])


class PriveletPlus(Mechanism):
    """Privelet+ (Sec. VI-D): the attributes in S_A = ``plain_attributes`` get no transform.

    ``plain_attributes=None`` picks S_A by the rule of Sec. VI-D (:func:`plain_by_rule`); an empty
    list is plain Privelet; every attribute is the Basic method.

    >>> from dpcube import Schema, Histogram
    >>> from dpcube.privacy import NO_NOISE
    >>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 3], "width": 1}]})
    >>> r = PriveletPlus(1.0, plain_attributes=[]).release(Histogram(s, [1, 2, 3, 4]), random_state=NO_NOISE)
    >>> round(r.answer({"x": [1, 2]}), 9), r.variance({"x": [0, 3]}) > 0
    (5.0, True)
    """

    name = "privelet-plus"
    #: Peak memory of a release per cell: 20 to 57 bytes measured (Privelet: 48 to 107) (tracemalloc, 2**16 to 2**20 cells), x1.5.
    bytes_per_cell = 160.0
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "plain_attributes",
            "names",
            "S_A, the attributes left untransformed (names of the schema); null: the rule of "
            "Privelet's Sec. VI-D",
            optional=True,
        ),
    )

    def __init__(
        self,
        epsilon: float,
        plain_attributes: Sequence[str] | None = None,
        neighbour: str = "replace",
    ) -> None:
        super().__init__(epsilon, None, neighbour)
        if isinstance(plain_attributes, str):
            plain_attributes = [a for a in plain_attributes.split(",") if a]
        self.plain_attributes = None if plain_attributes is None else tuple(plain_attributes)

    # -- the plan ------------------------------------------------------------------------------
    def plain_set(self, schema: Schema) -> tuple[str, ...]:
        """S_A for ``schema``: the given attributes, or the rule of Privelet's Sec. VI-D."""
        if self.plain_attributes is None:
            return tuple(a.name for a in schema.attributes if plain_by_rule(a))
        for name in self.plain_attributes:
            if name not in schema.names:
                raise SchemaError(
                    f"plain_attributes names {name!r}, which is not an attribute; "
                    f"the schema has {', '.join(schema.names)}"
                )
        return tuple(a for a in schema.names if a in self.plain_attributes)

    def plan(self, schema: Schema) -> PriveletPlan:
        plain = self.plain_set(schema)
        axes: list[AxisTransform] = []
        for attribute in schema.attributes:
            if attribute.name in plain:
                axes.extend(IdentityAxis(n) for n in attribute.shape)
            else:
                axes.extend(wavelet_axes(attribute))
        # one privacy unit is up to min(K, C R) rows, each moving the coefficients by at most rho
        factor = (2 if self.neighbour == Neighbour.REPLACE.value else 1) * self.privacy_unit.rows
        return PriveletPlan(
            axes=tuple(axes),
            plain=plain,
            rho=generalized_sensitivity(axes),
            support=coefficient_support(axes),
            neighbour_factor=factor,
        )

    def worst_case_variance(self, schema: Schema) -> float:
        """The paper's bound (Theorem 3, Corollary 1, Eq. 7): ``2 lambda**2 prod_S|A| prod_rest H``.

        Under ``replace`` this is ``(8 / epsilon**2) prod_{S_A}|A| prod_{rest} P(A)**2 H(A)``.
        """
        plan = self.plan(schema)
        lam = plan.noise_scale(self.epsilon)
        return 2 * lam**2 * math.prod(ax.bound_factor for ax in plan.axes)

    # -- privacy -------------------------------------------------------------------------------
    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        plan = self.plan(schema)
        axes = plan.axes

        def weighted(x: NDArray[np.int64]) -> NDArray[np.float64]:
            return hn_forward(x, axes, weighted=True).ravel()

        # Adding/removing a tuple attains rho at every cell (Lemmas 2 and 4, product over axes).
        # Replacing one attains 2 rho only when the two cells can have disjoint coefficient sets,
        # which needs an untransformed axis; otherwise the shared base coefficients cancel and
        # 2 rho (the paper's calibration, Lemma 1) is an upper bound.
        tight = self.privacy_unit.is_row and (
            self.neighbour == Neighbour.ADD_REMOVE.value
            or any(ax.kind == "identity" and ax.n > 1 for ax in axes)
        )
        return [
            SensitivityClaim(
                "weighted_coefficients",
                weighted,
                "l1",
                float(plan.neighbour_factor * plan.rho),
                tight,
            )
        ]

    # -- releasing -----------------------------------------------------------------------------
    def _release(
        self, data: Histogram, source: RandomSource, metadata: ReleaseMetadata
    ) -> CellRelease:
        plan = self.plan(data.schema)
        lam = plan.noise_scale(self.epsilon)
        if plan.all_plain:
            counts, draw = add_discrete_laplace(data.counts, lam, source)
            cells: NDArray[Any] = counts
            variance = float(np.asarray(draw.variance).flat[0])
        else:
            cells, variance, draw = self._noisy_cells(data.counts, plan, source)
        metadata.noise = {
            "distribution": draw.distribution,
            "lambda": lam,
            "realised_scale": float(np.asarray(draw.scale).flat[0]),
            "coefficient_variance": variance,
            "generalized_sensitivity": plan.rho,
            "plain_attributes": list(plan.plain),
            "transforms": [ax.kind for ax in plan.axes],
            "coefficients": plan.coefficients,
        }
        return CellRelease(data.schema, metadata, cells, PriveletVariance(variance, plan.axes))

    def _noisy_cells(
        self, counts: NDArray[np.int64], plan: PriveletPlan, source: RandomSource
    ) -> tuple[NDArray[np.float64], float, Any]:
        """Transform, noise, refine and invert (Sec. III-A); returns the cells, the noise variance
        of a weighted coefficient ``W c``, and the sampler's report.

        The noise goes on exact integers, never on rounded values, so the sampler's contract
        ``sum |dx| / b <= epsilon`` holds for the values actually computed:

        - normally on ``J = D W c`` (:func:`hn_forward_exact`; D clears the denominators of the
          nominal weights) with the one scale ``D lambda``: that is ``Lap(lambda)`` on every
          ``W c`` (the un-normalised form), and every coefficient gets noise of the same variance;
        - if ``D`` would push J past 2**53 (hierarchies with many different fanouts), on
          ``I = den W c`` (:func:`hn_forward_integer`) with the scales ``den lambda``; the
          sampler's grid then makes the realised variances differ by up to about 2**-23
          (relative), and the largest is reported, so the variance model is an upper bound
          tight to that precision.

        Each scale is one correctly rounded division of integers, rounded up.
        """
        axes = plan.axes
        common = common_denominator(axes)
        if integer_bound(counts, axes) * common < EXACT_LIMIT:
            values, den = hn_forward_integer(counts, axes, multiplier=common), np.array(common)
        else:
            values, den = hn_forward_integer(counts, axes), denominators(axes)
        scales = np.nextafter(plan.neighbour_factor * plan.rho * den / self.epsilon, np.inf)
        support = plan.support * plan.neighbour_factor
        noisy, draw = snapped_laplace(
            values, scales, epsilon=self.epsilon, support=support, source=source
        )
        del values
        noisy /= den
        cells = hn_inverse(noisy, axes, weighted=True)
        realised = np.asarray(draw.variance)
        if den.ndim:  # one value per distinct scale suffices: the scale varies only with den
            realised = realised[tuple(slice(None) if n > 1 else slice(0, 1) for n in den.shape)]
        else:
            realised = realised[(0,) * realised.ndim]
        variance = float(np.max(realised / den.astype(np.float64) ** 2))
        return cells, variance, draw

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import MIXED_QUERIES, Case, mixed_schema

        schema, queries = mixed_schema(), MIXED_QUERIES
        return [
            Case("privelet-plus-auto", schema, lambda n: cls(1.0, neighbour=n), queries),
            Case(
                "privelet-plus-a",
                schema,
                lambda n: cls(1.0, plain_attributes=["a"], neighbour=n),
                queries,
            ),
            Case(
                "privelet-plus-b",
                schema,
                lambda n: cls(0.7, plain_attributes=["b"], neighbour=n),
                queries,
            ),
        ]


class Privelet(PriveletPlus):
    """Privelet (Sec. III-VI): every attribute is wavelet-transformed (S_A is empty).

    >>> from dpcube import Schema, Histogram
    >>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 7], "width": 1}]})
    >>> Privelet(1.0).plan(s).rho, Privelet(1.0).plan(s).noise_scale(1.0)
    (4, 8.0)
    """

    name = "privelet"

    def __init__(self, epsilon: float, neighbour: str = "replace") -> None:
        super().__init__(epsilon, plain_attributes=(), neighbour=neighbour)

    @classmethod
    def conformance_cases(cls) -> list[Any]:
        from dpcube.mechanisms.conformance import MIXED_QUERIES, Case, mixed_schema

        mixed = mixed_schema()
        flat = Schema.from_dict(
            {
                "attributes": [
                    {"name": "g", "kind": "nominal", "categories": ["F", "M", "X"]},
                    {
                        "name": "p",
                        "kind": "spatial",
                        "columns": ["lat", "lon"],
                        "bbox": [0, 0, 1, 1],
                        "resolution": [2, 2],
                    },
                ]
            }
        )
        queries = MIXED_QUERIES
        flat_queries: list[dict[str, Any]] = [
            {},
            {"g": "M"},
            {"p": {"bins": [[0, 0], [0, 1]]}},
            {"g": ["M", "X"], "p": {"bins": [[1, 1], [1, 1]]}},
        ]
        return [
            Case("privelet-mixed", mixed, lambda n: cls(1.0, neighbour=n), queries),
            Case("privelet-flat-spatial", flat, lambda n: cls(0.5, neighbour=n), flat_queries),
        ]


__all__ = [
    "Privelet",
    "PriveletPlan",
    "PriveletPlus",
    "PriveletVariance",
    "plain_by_rule",
    "wavelet_axes",
]
