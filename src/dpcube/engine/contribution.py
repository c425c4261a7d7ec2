"""What the engine needs to bound each privacy unit's rows before counting."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContributionBound:
    """The engine's instruction to bound each unit's rows before counting (the privacy layer's
    :class:`~dpcube.privacy.unit.PrivacyUnit` with a key): at most ``max_rows`` rows of each
    value of ``column``, and optionally at most ``max_cells`` cells and ``max_rows_per_cell`` rows
    in one cell. ``key`` (any text) seeds the random choice; the bound holds for any key."""

    column: str
    max_rows: int
    key: str
    max_cells: int | None = None
    max_rows_per_cell: int | None = None
