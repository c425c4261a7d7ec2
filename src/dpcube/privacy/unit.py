"""The privacy unit: what one neighbouring step adds or removes (a row, or all rows of a unit).

Without a unit, two data sets are neighbours when they differ in one *row*. With a unit column
(a plane's tail number, a patient id, a customer id), they differ in one *unit*: all the rows that
share one value of the column. A unit may hold any number of rows, so before anything is counted
the engine keeps at most ``max_rows_per_unit`` (K) rows of each unit, a uniformly random choice
(:func:`dpcube.engine.counting.bounded_rows_sql`). Optionally it also keeps at most
``max_cells_per_unit`` (C) distinct cells of each unit and ``max_rows_per_cell`` (R) rows of a
unit in one cell. Adding or removing one unit then changes the histogram by a vector ``v`` with

- ``v >= 0`` (add) or ``v <= 0`` (remove), at most C non-zero entries, each at most R, and
  ``||v||_1 <= min(K, C R)`` (:attr:`PrivacyUnit.rows`);
- ``||v||_2^2 <= q R^2 + r^2`` with ``q = min(C, floor(K / R))`` full cells and a remainder
  ``r = min(R, K - q R)`` in one more cell when ``q < C`` (:attr:`PrivacyUnit.l2`): the sum of
  squares of non-negative entries of bounded sum is largest when the mass is packed into as few
  cells as possible, each filled to R.

Without C the entries are bounded only by K (``q = 1``, L2 = K = L1); with R = 1, L2 =
sqrt(min(K, C)), the bound that makes Gaussian noise cheaper than Laplace for many rows per unit.
Under ``replace`` neighbours (one unit's rows replaced by another unit's) the change is ``a - b``
of two such vectors: ``||a - b||_1 <= 2 min(K, C R)``, and ``||a - b||_2^2 = ||a||^2 + ||b||^2 -
2 a.b <= 2 L2^2`` since ``a, b >= 0``.

Without a unit (:data:`ROW`) every figure is 1: the row-level neighbour of
:class:`~dpcube.privacy.neighbours.Neighbour`. The manifest records the unit as ``"row"`` or
``{"column": ..., "max_rows_per_unit": K, ...}`` (:meth:`PrivacyUnit.manifest`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from dpcube.errors import ParameterError
from dpcube.privacy.neighbours import Neighbour

#: Largest ``max_rows_per_unit``: the noise grows with K, and beyond a million rows per unit it
#: drowns any count (the exact samplers' scale limits refuse it anyway).
MAX_ROWS_PER_UNIT = 1_000_000


def _positive(name: str, value: Any, flag: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ParameterError(f"{flag}: must be a whole number >= 1, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ParameterError(f"{flag}: must be a whole number >= 1, got {value!r}") from None
    if not number.is_integer() or not 1 <= number <= MAX_ROWS_PER_UNIT:
        raise ParameterError(
            f"{flag}: must be a whole number from 1 to {MAX_ROWS_PER_UNIT:,}, got {value!r}"
        )
    return int(number)


@dataclass(frozen=True)
class PrivacyUnit:
    """One unit of privacy: ``column`` (None: the row; or a bound declared without its column,
    as the spatial mechanisms' ``user_bound``) and the contribution bounds of a unit.

    >>> u = PrivacyUnit("tailnum", 50)
    >>> u.rows, u.l2, u.manifest()
    (50, 50.0, {'column': 'tailnum', 'max_rows_per_unit': 50})
    >>> PrivacyUnit("tailnum", 50, max_cells_per_unit=10, max_rows_per_cell=2).l2  # 10 cells of 2
    6.324555320336759
    >>> ROW.manifest(), ROW.rows
    ('row', 1)
    """

    column: str | None = None
    max_rows_per_unit: int = 1
    max_cells_per_unit: int | None = None
    max_rows_per_cell: int | None = None

    @classmethod
    def parse(
        cls,
        column: str | None = None,
        max_rows_per_unit: Any = None,
        max_cells_per_unit: Any = None,
        max_rows_per_cell: Any = None,
    ) -> PrivacyUnit:
        """The unit from the user's keywords (those of :func:`dpcube.histogram` and of ``dpcube
        release``'s flags), each checked; :data:`ROW` when no column and no bound is given."""
        k = _positive("max_rows_per_unit", max_rows_per_unit, "--max-rows-per-unit")
        c = _positive("max_cells_per_unit", max_cells_per_unit, "--max-cells-per-unit")
        r = _positive("max_rows_per_cell", max_rows_per_cell, "--max-rows-per-cell")
        if column is None or column == "":
            if k is not None or c is not None or r is not None:
                raise ParameterError(
                    "--max-rows-per-unit/--max-cells-per-unit/--max-rows-per-cell bound the rows "
                    "of a privacy unit: name its column with --privacy-unit COLUMN "
                    "(privacy_unit='COLUMN')"
                )
            return ROW
        if not isinstance(column, str):
            raise ParameterError(f"--privacy-unit: must be a column name, got {column!r}")
        if k is None:
            raise ParameterError(
                f"--privacy-unit {column}: give --max-rows-per-unit K (max_rows_per_unit=K), the "
                "rows of one unit kept at most (chosen at random); the noise grows with K"
            )
        return cls(column, k, c, r)

    @property
    def is_row(self) -> bool:
        """Whether the unit is one row (no column, no bound)."""
        return self.column is None and self.max_rows_per_unit == 1 and not self.bounded_cells

    @property
    def bounded_cells(self) -> bool:
        return self.max_cells_per_unit is not None or self.max_rows_per_cell is not None

    @property
    def per_cell(self) -> int:
        """The most rows a unit puts in one cell: min(R, K)."""
        r = self.max_rows_per_cell
        return self.max_rows_per_unit if r is None else min(r, self.max_rows_per_unit)

    @property
    def cells(self) -> int:
        """The most cells a unit touches: min(C, K)."""
        c = self.max_cells_per_unit
        return self.max_rows_per_unit if c is None else min(c, self.max_rows_per_unit)

    @property
    def rows(self) -> int:
        """The most rows one unit adds to the counts: min(K, C R), the L1 change of a
        histogram when one unit is added or removed."""
        return min(self.max_rows_per_unit, self.cells * self.per_cell)

    @property
    def l2(self) -> float:
        """The largest L2 change of a histogram when one unit is added or removed (module doc)."""
        per_cell, cells, total = self.per_cell, self.cells, self.rows
        full = min(cells, total // per_cell)
        rest = min(per_cell, total - full * per_cell) if full < cells else 0
        return math.sqrt(full * per_cell**2 + rest**2)

    def histogram_sensitivity(self, neighbour: str | Neighbour, norm: str) -> float:
        """The sensitivity of the histogram (every cell's count) to one unit under ``neighbour``:
        L1 ``rows`` (x2 under replace), L2 ``l2`` (x sqrt 2 under replace); 1, 2, 1, sqrt 2 for
        :data:`ROW` as :meth:`Neighbour.histogram_sensitivity`."""
        n = Neighbour.parse(neighbour)
        if norm == "l1":
            return float(self.rows) * (2.0 if n is Neighbour.REPLACE else 1.0)
        if norm == "l2":
            return self.l2 * (math.sqrt(2.0) if n is Neighbour.REPLACE else 1.0)
        raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")

    def group_size(self, neighbour: str | Neighbour) -> int:
        """How many single-row additions or removals one neighbouring step of units takes:
        ``rows`` under add_remove, twice that under replace. Group privacy (Dwork and Roth, The
        Algorithmic Foundations of Differential Privacy, 2014, Theorem 2.2): an epsilon-DP
        mechanism for rows is (group_size x epsilon)-DP for units."""
        return self.rows * (2 if Neighbour.parse(neighbour) is Neighbour.REPLACE else 1)

    def covers(self, other: PrivacyUnit) -> bool:
        """Whether data bounded as ``other`` stays within every bound of this unit."""

        def within(mine: int | None, theirs: int | None) -> bool:
            return mine is None or (theirs is not None and theirs <= mine)

        return (
            other.max_rows_per_unit <= self.max_rows_per_unit
            and within(self.max_cells_per_unit, other.max_cells_per_unit)
            and within(self.max_rows_per_cell, other.max_rows_per_cell)
        )

    def with_column(self, column: str | None) -> PrivacyUnit:
        return replace(self, column=column)

    def manifest(self) -> str | dict[str, Any]:
        """``"row"``, or the column and the bounds (those given) for the manifest."""
        if self.is_row:
            return "row"
        out: dict[str, Any] = {"column": self.column, "max_rows_per_unit": self.max_rows_per_unit}
        if self.max_cells_per_unit is not None:
            out["max_cells_per_unit"] = self.max_cells_per_unit
        if self.max_rows_per_cell is not None:
            out["max_rows_per_cell"] = self.max_rows_per_cell
        return out

    def describe(self) -> str:
        """The unit in words (messages, docs)."""
        if self.is_row:
            return "one row"
        name = f"unit {self.column!r}" if self.column else "unit"
        extra = "".join(
            f", {v} {w}"
            for v, w in (
                (self.max_cells_per_unit, "cells at most"),
                (self.max_rows_per_cell, "rows per cell at most"),
            )
            if v is not None
        )
        return f"one {name} (at most {self.max_rows_per_unit} rows{extra})"

    @classmethod
    def from_manifest(cls, value: Any) -> PrivacyUnit:
        if value is None or value == "row":
            return ROW
        if isinstance(value, dict) and value.get("column") is None:
            unit = cls.parse("-", *(value.get(k) for k in _BOUNDS))
            return unit.with_column(None)
        if isinstance(value, dict):
            return cls.parse(
                value.get("column"),
                value.get("max_rows_per_unit"),
                value.get("max_cells_per_unit"),
                value.get("max_rows_per_cell"),
            )
        raise ParameterError(f"privacy_unit: expected 'row' or a mapping, got {value!r}")


_BOUNDS = ("max_rows_per_unit", "max_cells_per_unit", "max_rows_per_cell")

#: The row as the unit (no bound): today's meaning of every neighbour notion.
ROW = PrivacyUnit()
