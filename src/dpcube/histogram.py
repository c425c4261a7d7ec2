"""The frequency matrix: counts of records per cell of a schema's domain."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcube.engine import POLICIES, Engine, OutOfDomainPolicy, get_engine
from dpcube.engine.counting import ContributionBound
from dpcube.errors import DataError, SchemaError
from dpcube.privacy.unit import ROW, PrivacyUnit
from dpcube.privacy.unit_choice import (
    AUTO,
    DEFAULT_SELECTION_SHARE,
    LARGEST_CANDIDATE_BITS,
    UnitSizeBins,
    candidates,
    check_share,
)
from dpcube.schema import Schema


@dataclass(frozen=True)
class Histogram:
    """Non-negative int64 counts in the schema's shape, with the data report.

    >>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "nominal", "categories": ["a", "b"]}]})
    >>> Histogram(s, [3, 4]).total
    7
    """

    schema: Schema
    counts: NDArray[np.int64]
    report: dict[str, Any] = field(default_factory=dict)
    #: The identity of the data set counted (``sha256:<fingerprint>`` or ``name:<NAME>``), which
    #: selects its budget ledger; ``None`` for bare counts. Never written into a release.
    dataset: str | None = field(default=None, repr=False, compare=False)
    #: The unit whose rows were bounded before counting (:data:`~dpcube.privacy.unit.ROW`: none);
    #: a mechanism releasing this histogram protects that unit.
    privacy_unit: PrivacyUnit = field(default=ROW, compare=False)

    def __init__(
        self,
        schema: Schema,
        counts: ArrayLike,
        report: dict[str, Any] | None = None,
        *,
        dataset: str | None = None,
        privacy_unit: PrivacyUnit = ROW,
    ) -> None:
        arr = np.asarray(counts)
        if arr.shape != schema.shape:
            raise SchemaError(
                f"counts of shape {arr.shape} do not match the schema's shape {schema.shape}"
            )
        arr = _as_counts(arr)
        object.__setattr__(self, "schema", schema)
        object.__setattr__(self, "counts", arr)
        object.__setattr__(self, "report", dict(report or {}))
        object.__setattr__(self, "dataset", dataset)
        object.__setattr__(self, "privacy_unit", privacy_unit)

    @property
    def total(self) -> int:
        return int(self.counts.sum())


INT64_MAX = int(np.iinfo(np.int64).max)


def _as_counts(arr: NDArray[Any]) -> NDArray[np.int64]:
    """``arr`` as int64 counts: whole, non-negative, each and their total within int64."""
    if arr.dtype != np.bool_ and not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise DataError(f"histogram counts must be whole numbers, got dtype {arr.dtype}")
    if arr.size == 0:
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise DataError("histogram counts must be whole numbers")
    arr = arr.astype(np.int64) if arr.dtype == np.bool_ else arr
    low, high = arr.min(), arr.max()
    if low < 0:
        raise DataError(f"histogram counts must be non-negative; found {int(low)}")
    # Compare as floats first (exact ints would overflow the cast), then exactly.
    if float(high) >= 2.0**63 or (np.issubdtype(arr.dtype, np.integer) and int(high) > INT64_MAX):
        raise DataError(
            "a histogram count is larger than the int64 maximum (9.2e18); counts must fit int64"
        )
    counts = arr.astype(np.int64)
    if int(high) > INT64_MAX // counts.size:
        # The total could overflow: add exactly (Python ints) only in this rare case.
        total = sum(int(x) for x in counts.ravel())
        if total > INT64_MAX:
            raise DataError(
                f"the histogram's total of {total:.3g} records would overflow int64 sums; "
                "counts must add up to at most 9.2e18"
            )
    return counts


def histogram(
    source: Any,
    schema: Schema,
    *,
    on_out_of_domain: OutOfDomainPolicy = "error",
    engine: str | Engine | None = None,
    max_cells: int | None = None,
    dataset: str | None = None,
    show_values: bool = False,
    privacy_unit: str | None = None,
    max_rows_per_unit: int | str | None = None,
    max_cells_per_unit: int | None = None,
    max_rows_per_cell: int | None = None,
    bounding_seed: int | float | str | None = None,
    unit_selection_share: float = DEFAULT_SELECTION_SHARE,
) -> Histogram:
    """Count the records of ``source`` in every cell of ``schema``'s domain.

    ``source`` is a CSV/Parquet/JSON path (or a directory of Parquet files), a pandas or Polars
    DataFrame, an Arrow table, a DuckDB relation, :class:`dpcube.SQL` or a Spark DataFrame. Binning
    and grouping run in the engine (``"duckdb"`` or ``"spark"``; by default Spark for a Spark
    DataFrame and DuckDB otherwise); rows never become Python objects.

    The histogram carries its data set's identity, which selects the budget ledger a release
    charges: ``dataset=NAME`` names it, otherwise it is the fingerprint of the records
    (:func:`dpcube.engine.fingerprint`, one more scan).

    Rows that ``on_out_of_domain`` does not cover raise :class:`dpcube.errors.DataError` counting
    each cause per column; ``show_values=True`` adds the commonest offending values to the message
    (they are private data: for the curator's eyes only).

    ``privacy_unit`` names the column whose values are the units to protect (a plane, a patient,
    a customer): each unit then keeps at most ``max_rows_per_unit`` rows (and at most
    ``max_cells_per_unit`` cells and ``max_rows_per_cell`` rows in one cell), a uniformly random
    choice made in the engine before counting (:func:`dpcube.engine.counting.bounded_rows_sql`),
    and a mechanism releasing the histogram protects one unit (:mod:`dpcube.privacy.unit`). A
    NULL unit id is refused. ``bounding_seed`` makes the choice reproducible (tests; by default
    a fresh random 128-bit key). The number of rows dropped is exact: it goes to the report (the
    curator's log), never into a release.

    ``max_rows_per_unit="auto"`` leaves K to the release, which chooses it privately among
    ``1, 2, 4, ..., 1024`` with ``unit_selection_share`` of its epsilon
    (:mod:`dpcube.privacy.unit_choice`): the result is a :class:`UnitBoundCandidates`, counted
    here at every candidate (one pass of the engine each, the same random choice of rows, so
    the kept rows are nested) with the units' sizes binned by ``log2``, all before any charge.
    """
    if isinstance(max_rows_per_unit, str) and max_rows_per_unit.strip().lower() == AUTO:
        return _bound_candidates(
            source,
            schema,
            on_out_of_domain=on_out_of_domain,
            engine=engine,
            max_cells=max_cells,
            dataset=dataset,
            show_values=show_values,
            privacy_unit=privacy_unit,
            refused=(max_cells_per_unit, max_rows_per_cell),
            bounding_seed=bounding_seed,
            share=unit_selection_share,
        )
    unit = PrivacyUnit.parse(privacy_unit, max_rows_per_unit, max_cells_per_unit, max_rows_per_cell)
    if on_out_of_domain not in POLICIES:
        raise DataError(
            f"on_out_of_domain must be one of {', '.join(POLICIES)}, got {on_out_of_domain!r}"
        )
    schema.check_materialisable(max_cells)
    counts, report = get_engine(engine, source).histogram(
        source,
        schema,
        on_out_of_domain=on_out_of_domain,
        show_values=show_values,
        bound=contribution_bound(unit, bounding_seed),
    )
    return Histogram(
        schema, counts, report, dataset=data_set_identity(source, dataset), privacy_unit=unit
    )


class BoundCandidates:
    """An input prepared at every candidate bound K of a privacy unit, for a release that
    chooses K privately (``max_rows_per_unit="auto"``, :mod:`dpcube.privacy.unit_choice`).

    ``at_bound[K]`` is what the mechanism's ``prepare`` takes for the bound K (a histogram
    counted at K, or a source to count at K, each with the same key choosing the kept rows);
    ``unit_sizes`` the exact log2 bins of the units' sizes (the curator's only);
    ``selection_share`` the share of epsilon the choice spends; ``schema`` the input's schema.
    :meth:`dpcube.mechanisms.base.Mechanism.release` prepares and checks every candidate,
    charges once, then chooses K and releases the input at K.
    """

    at_bound: dict[int, Any]
    unit_sizes: UnitSizeBins
    selection_share: float
    schema: Schema


class UnitBoundCandidates(Histogram, BoundCandidates):
    """A histogram counted at every candidate bound of a privacy unit, for a release that
    chooses the bound privately (``max_rows_per_unit="auto"``).

    Its own counts (and ``privacy_unit``) are those at the largest candidate; ``at_bound[K]`` is
    the histogram at K; ``unit_sizes`` the exact log2 bins of the units' sizes (the curator's
    only: :class:`~dpcube.privacy.unit_choice.UnitSizeBins`). :meth:`Mechanism.release` spends
    ``selection_share`` of its epsilon on the choice, the rest on the chosen histogram.
    """

    at_bound: dict[int, Histogram]
    unit_sizes: UnitSizeBins
    selection_share: float

    def __init__(
        self, at_bound: dict[int, Histogram], unit_sizes: UnitSizeBins, selection_share: float
    ) -> None:
        top = at_bound[max(at_bound)]
        super().__init__(
            top.schema,
            top.counts,
            top.report,
            dataset=top.dataset,
            privacy_unit=top.privacy_unit,
        )
        object.__setattr__(self, "at_bound", dict(at_bound))
        object.__setattr__(self, "unit_sizes", unit_sizes)
        object.__setattr__(self, "selection_share", check_share(selection_share))


def _bound_candidates(
    source: Any,
    schema: Schema,
    *,
    on_out_of_domain: OutOfDomainPolicy,
    engine: str | Engine | None,
    max_cells: int | None,
    dataset: str | None,
    show_values: bool,
    privacy_unit: str | None,
    refused: tuple[Any, Any],
    bounding_seed: int | float | str | None,
    share: float,
) -> UnitBoundCandidates:
    share = check_share(share)
    if not privacy_unit:
        raise DataError(
            "--max-rows-per-unit auto chooses the rows kept per unit: name the unit's column "
            "with --privacy-unit COLUMN (privacy_unit='COLUMN')"
        )
    if any(r is not None for r in refused):
        raise DataError(
            "--max-rows-per-unit auto chooses K alone: give --max-cells-per-unit/"
            "--max-rows-per-cell with a whole-number K, or drop them"
        )
    PrivacyUnit.parse(privacy_unit, 1)  # the column name, checked
    identity = data_set_identity(source, dataset)
    key = secrets.token_hex(16) if bounding_seed is None else str(bounding_seed)
    bits = LARGEST_CANDIDATE_BITS
    counts, rows = get_engine(engine, source).unit_sizes(source, privacy_unit, bits)
    if on_out_of_domain not in POLICIES:
        raise DataError(
            f"on_out_of_domain must be one of {', '.join(POLICIES)}, got {on_out_of_domain!r}"
        )
    schema.check_materialisable(max_cells)
    at_bound: dict[int, Histogram] = {}
    for k in candidates(bits):
        unit = PrivacyUnit(privacy_unit, k)
        counted, report = get_engine(engine, source).histogram(
            source,
            schema,
            on_out_of_domain=on_out_of_domain,
            show_values=show_values,
            bound=contribution_bound(unit, key),
        )
        at_bound[k] = Histogram(schema, counted, report, dataset=identity, privacy_unit=unit)
    return UnitBoundCandidates(at_bound, UnitSizeBins(counts, rows), share)


def contribution_bound(
    unit: PrivacyUnit, seed: int | float | str | None = None
) -> ContributionBound | None:
    """The engine's bounding instruction for ``unit`` (None for the row), keyed by ``seed`` or a
    fresh random 128-bit key."""
    if unit.column is None:
        return None
    return ContributionBound(
        unit.column,
        unit.max_rows_per_unit,
        secrets.token_hex(16) if seed is None else str(seed),
        unit.max_cells_per_unit,
        unit.max_rows_per_cell,
    )


def data_set_identity(source: Any, name: str | None = None) -> str | None:
    """``name:<name>`` when the curator names the data set, else the fingerprint of ``source``.

    A Spark DataFrame's fingerprint is computed on Spark, equal to that of its CSV or Parquet file.
    """
    from dpcube.engine import fingerprint
    from dpcube.privacy.identity import name_identity

    if name:
        return name_identity(name)
    return fingerprint(source)
