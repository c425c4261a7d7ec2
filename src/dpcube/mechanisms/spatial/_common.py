"""Shared pieces of the spatial mechanisms (Shaham et al., SIGSPATIAL 2021 (HTF), Sec. 4.2-4.3).

- :func:`grid_shape`: the 2-D domain of a schema (one :class:`~dpcube.schema.Spatial` attribute,
  or two ordinal attributes used as axis 0 and axis 1);
- :func:`geometric_shares`: Eq. 17, the per-height budget of a tree (Cormode et al. 2012);
- :func:`tree_height`: HTF's Eq. 10 (Shaham et al., SIGSPATIAL 2021), floored (the floor gives
  the heights 15, 16, 17 the paper reports), with guards for small counts;
- :class:`SpatialMechanism`: the base class with the user-level contribution bound ``c``.

Axis 0 of the frequency matrix is the "row" axis (latitude, y, for a spatial attribute) and axis 1
the "column" axis (longitude, x). Rectangles are half-open ``(r0, r1, c0, c1)`` in grid cells.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import ParameterError, SchemaError
from dpcube.histogram import Histogram
from dpcube.mechanisms.base import Mechanism, SensitivityClaim, check_share_scale
from dpcube.mechanisms.params import ParamSpec
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import add_discrete_laplace
from dpcube.privacy.unit import PrivacyUnit
from dpcube.release.base import ReleaseMetadata
from dpcube.schema import Ordinal, Schema, Spatial

ROW, COL = 0, 1


def grid_shape(schema: Schema) -> tuple[int, int]:
    """The (rows, cols) of a 2-D schema, or a one-line :class:`SchemaError`.

    >>> s = Schema.from_dict({"attributes": [{"name": "p", "kind": "spatial", "columns": ["lat", "lon"],
    ...     "bbox": [0, 0, 1, 1], "resolution": [4, 8]}]})
    >>> grid_shape(s)
    (4, 8)
    """
    attrs = schema.attributes
    if len(attrs) == 1 and isinstance(attrs[0], Spatial):
        rows, cols = attrs[0].shape
        return int(rows), int(cols)
    if len(attrs) == 2 and all(isinstance(a, Ordinal) for a in attrs):
        return int(attrs[0].shape[0]), int(attrs[1].shape[0])
    kinds = ", ".join(f"{a.name} ({type(a).__name__.lower()})" for a in attrs)
    raise SchemaError(
        f"spatial mechanisms need one spatial attribute or two ordinal attributes (x/y); "
        f"the schema has {kinds}"
    )


def geometric_shares(h: int, epsilon: float) -> NDArray[np.float64]:
    """``eps_i`` for heights i = 0..h (index i; leaves i = 0 get the most), Eq. 17.

    ``eps_i = 2^((h-i)/3) eps (2^(1/3) - 1) / (2^((h+1)/3) - 1)``; the shares sum to ``epsilon``
    and ``eps_(i-1) / eps_i = 2^(1/3)``.

    >>> [round(float(x), 6) for x in geometric_shares(2, 1.0)]
    [0.412599, 0.32748, 0.259921]
    """
    if h < 0:
        raise ValueError(f"tree height must be >= 0, got {h}")
    i = np.arange(h + 1, dtype=np.float64)
    c = 2.0 ** (1.0 / 3.0)
    shares = 2.0 ** ((h - i) / 3.0) * epsilon * (c - 1.0) / (2.0 ** ((h + 1) / 3.0) - 1.0)
    return np.asarray(shares)


def total_claim() -> SensitivityClaim:
    """The total count: one row, L1 sensitivity 1 under add/remove-one."""
    return SensitivityClaim(
        "total", lambda x: np.array([np.asarray(x).sum()], dtype=np.float64), "l1", 1.0
    )


def cells_claim(name: str = "partition counts (any tiling)") -> SensitivityClaim:
    """The counts of the cells of any partition: L1 sensitivity 1 under add/remove-one."""
    return SensitivityClaim(name, lambda x: np.asarray(x, dtype=np.float64).ravel(), "l1", 1.0)


#: Largest ``user_bound``: group privacy divides every budget by it, and beyond a million points
#: per user the noise drowns any count.
MAX_USER_BOUND = 1_000_000
#: Deepest forced tree ``height``: node indices of a binary tree this deep still fit in int64
#: (nodes below the depth at which the grid's cells are single are childless, so only the width
#: of the indices bounds it).
MAX_FORCED_HEIGHT = 62

#: ``eps_height``: the budget (absolute, less than epsilon) of the noisy total that sets a height
#: or grid chosen from the data.
EPS_HEIGHT = ParamSpec(
    "eps_height",
    "float",
    "budget of the noisy total that sizes the tree or grid (absolute; less than epsilon)",
    low=0,
    low_open=True,
)


def tree_height(noisy_total: float, epsilon: float, c0: float = 10.0) -> int:
    """HTF's height h = floor(log2(|D| eps / c0)), at least 1 (HTF, Eq. 10).

    >>> [tree_height(3_500_000, e) for e in (0.1, 0.3, 0.5)]
    [15, 16, 17]
    >>> tree_height(1_000_000, 0.1), tree_height(-5, 1.0)
    (13, 1)
    """
    x = noisy_total * epsilon / c0
    if x < 2:
        return 1
    return max(1, math.floor(math.log2(x)))


def relative_error(
    true: NDArray[Any], estimate: NDArray[Any], bound: float = 20.0
) -> NDArray[np.float64]:
    """Per-query relative error in percent with the smoothing bound: HTF's Eq. 3 with the
    denominator max(c, 20) of DPBench (Hay et al., SIGMOD 2016).

    >>> relative_error(np.array([0, 100, 10]), np.array([10, 90, 0])).tolist()
    [50.0, 10.0, 50.0]
    """
    t = np.asarray(true, dtype=np.float64)
    e = np.asarray(estimate, dtype=np.float64)
    return np.asarray(100.0 * np.abs(t - e) / np.maximum(t, bound))


def noisy_count(total: int, epsilon: float, source: RandomSource) -> int:
    """``total + DLap(1/epsilon)`` (a count of sensitivity 1; Eq. 9)."""
    noisy, _ = add_discrete_laplace(np.array([total], dtype=np.int64), 1.0 / epsilon, source)
    return int(noisy[0])


#: Rectangles over :func:`spatial_case_schema` (2 x 3) used by the conformance cases.
SPATIAL_CASE_QUERIES: list[dict[str, Any]] = [
    {},
    {"p": {"bins": [[0, 0], [0, 2]]}},
    {"p": {"bins": [[0, 1], [1, 1]]}},
    {"p": {"bins": [[1, 1], [2, 2]]}},
]


def spatial_case_schema(rows: int = 2, cols: int = 3) -> Schema:
    """A tiny spatial schema for the conformance suite and tests."""
    return Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "p",
                    "kind": "spatial",
                    "columns": ["lat", "lon"],
                    "bbox": [0.0, 0.0, float(rows), float(cols)],
                    "resolution": [rows, cols],
                }
            ]
        }
    )


class SpatialMechanism(Mechanism):
    """Base of the spatial mechanisms: a 2-D histogram in, a release of rectangles out.

    Unit of privacy: one location point (unbounded, ``add_remove`` neighbours; HTF, Sec. 2.1).
    ``replace`` neighbours (a point moved; the number of points public) are supported by group
    privacy: a replacement is one removal and one addition, so every measurement's sensitivity is
    at most twice its add/remove sensitivity and every internal budget is halved
    (:attr:`points_per_unit`). For counts this is tight (one cell -1, another +1); for the noisy
    total it is loose (a replacement does not change the total).
    With a privacy unit of at most K points (a user: ``dpcube.histogram(source, schema,
    privacy_unit=COLUMN, max_rows_per_unit=K)``, or C cells of R points) the unit is one user
    holding at most m = min(K, C R) points, and every internal budget is ``epsilon / m``: group
    privacy of a pure epsilon-DP mechanism (Dwork and Roth 2014, Theorem 2.2), since the trees'
    and grids' choices are data-dependent and only their per-point sensitivities are known.
    ``user_bound=c`` is the same unit declared on the mechanism (an alias of
    ``privacy_unit=PrivacyUnit(None, c)``): the input must then be bounded to c points or fewer.
    """

    neighbours: ClassVar[tuple[Neighbour, ...]] = (Neighbour.ADD_REMOVE, Neighbour.REPLACE)
    param_specs: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec(
            "user_bound",
            "int",
            "the unit of privacy is a user holding at most this many points (1: one point); "
            "the older name of privacy_unit's max_rows_per_unit (--max-rows-per-unit)",
            low=1,
            high=MAX_USER_BOUND,
        ),
    )

    def __init__(
        self,
        epsilon: float,
        delta: float | None = None,
        neighbour: str = "add_remove",
        user_bound: int = 1,
    ) -> None:
        super().__init__(epsilon, delta, neighbour)
        self.user_bound = int(user_bound)

    @property
    def user_bound(self) -> int:
        """The points of one unit: :attr:`privacy_unit`'s ``max_rows_per_unit`` (1: one point)."""
        return self.privacy_unit.max_rows_per_unit

    @user_bound.setter
    def user_bound(self, value: int) -> None:
        if value == 1 or value == self.privacy_unit.max_rows_per_unit:
            return
        if not self.privacy_unit.is_row:
            raise ParameterError(
                f"{self.name}: user_bound={value} and privacy_unit "
                f"{self.privacy_unit.manifest()} both set the points per user; give one "
                "(privacy_unit, --privacy-unit/--max-rows-per-unit)"
            )
        self.privacy_unit = PrivacyUnit(None, int(value))

    @property
    def points_per_unit(self) -> int:
        """Add/remove steps of one point that one neighbouring step can take: the unit's points
        m = min(K, C R) under ``add_remove``, 2m under ``replace`` (one removal and one addition
        per point). Every internal budget is divided by it (group privacy of pure epsilon-DP)."""
        return self.privacy_unit.group_size(self.neighbour)

    def point_claims(self, schema: Schema) -> list[SensitivityClaim]:
        """The measurements and their sensitivities to one point (subclasses)."""
        raise NotImplementedError

    def sensitivity_claims(self, schema: Schema) -> list[SensitivityClaim]:
        """Per point; with ``user_bound=c`` a user moves every measurement by at most c times, and
        a replacement by at most twice the add/remove sensitivity."""
        claims = self.point_claims(schema)
        c = self.points_per_unit
        if c == 1:
            return claims
        rows = self.privacy_unit.rows
        reasons = (["user"] if rows > 1 else []) + (["replace"] if c > rows else [])
        label = f"x{c} ({', '.join(reasons)})"
        return [
            dataclasses.replace(x, name=f"{x.name} {label}", declared=x.declared * c, tight=False)
            for x in claims
        ]

    def check_share(self, what: str, epsilon_share: float, sensitivity: float = 1.0) -> None:
        """Refuse, before the charge, a part ``epsilon_share`` of the budget (per point: divided
        by :attr:`points_per_unit` here) whose noise the exact samplers cannot represent."""
        check_share_scale(self.name, what, sensitivity, epsilon_share / self.points_per_unit)

    @property
    def unit_epsilon(self) -> float:
        """The budget per point: epsilon / :attr:`points_per_unit`."""
        return self.epsilon / self.points_per_unit

    def prepare(self, data: Any) -> Histogram:
        hist: Histogram = super().prepare(data)
        grid_shape(hist.schema)
        return hist

    def metadata(self, data: Any, source: RandomSource) -> ReleaseMetadata:
        meta = super().metadata(data, source)
        meta.report["privacy_unit"] = (
            "point"
            if self.privacy_unit.is_row
            else f"user (at most {self.privacy_unit.rows} points)"
        ) + (" replaced (bounded DP)" if self.neighbour == Neighbour.REPLACE else "")
        return meta
