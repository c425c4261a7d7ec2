"""Binning as SQL, shared by every SQL engine (DuckDB, Spark).

Each axis of the schema becomes one SQL expression that maps a row to its bin index, or to a
negative code when the row is outside the domain:

==========  ===========================================================
code >= 0   the bin
-1          out of domain (below the range, or an unknown category)
-2          NULL (or a float NaN) in a column the attribute reads
-3          out of domain above the range (ordinal and spatial only)
==========  ===========================================================

One ``GROUP BY`` of these codes counts every cell in one pass over the data. The few groups with
negative codes are then resolved by :func:`fill_counts` under the out-of-domain policy. The SQL
dialects differ only in quoting and in how a category's position is found (:class:`Dialect`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.engine.base import OutOfDomainPolicy, policy_report
from dpcube.errors import DataError
from dpcube.schema import Nominal, Ordinal, Schema, Spatial

BELOW, NULL, ABOVE = -1, -2, -3


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL engines."""

    name: str
    #: Column types (upper case, without parameters) that hold numbers.
    numeric_types: tuple[str, ...]

    def ident(self, name: str) -> str:
        if self.name == "spark":
            return "`" + name.replace("`", "``") + "`"
        return '"' + name.replace('"', '""') + '"'

    def literal(self, value: str) -> str:
        if self.name == "spark":
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + value.replace("'", "''") + "'"

    def category_position(self, column: str, categories: tuple[str, ...]) -> str:
        """0-based position of the column's text among the categories, or -1 (BELOW)."""
        cats = ", ".join(self.literal(x) for x in categories)
        if self.name == "spark":
            return f"array_position(array({cats}), CAST({column} AS STRING)) - 1"
        return f"coalesce(list_position([{cats}], CAST({column} AS VARCHAR)) - 1, {BELOW})"


DUCKDB = Dialect(
    "duckdb",
    (
        "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
        "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL",
    ),
)  # fmt: skip
SPARK = Dialect("spark", ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"))


def _number(x: float) -> str:
    return repr(float(x))


def _missing(column: str) -> str:
    """A numeric value that is missing: NULL, or a float NaN (which would compare as above every
    bound and be clipped into the last bin), so NaN follows the NULL policy."""
    return f"({column} IS NULL OR isnan(CAST({column} AS DOUBLE)))"


def axis_expressions(
    schema: Schema, columns: dict[str, str], dialect: Dialect = DUCKDB
) -> list[str]:
    """One SQL expression per axis giving the bin index or a negative code (module docstring).

    ``columns`` maps the source's column names to their SQL types; a missing column or a
    non-numeric column under an ordinal or spatial attribute raises :class:`DataError`.
    """
    exprs: list[str] = []
    for attr in schema.attributes:
        for col in attr.columns:
            if col not in columns:
                raise DataError(
                    f"attribute {attr.name!r} reads column {col!r}, which the data does not have "
                    f"(columns: {', '.join(columns)}); fix the schema's 'column' or the data"
                )
            kind = columns[col].split("(")[0].upper()
            if isinstance(attr, Ordinal | Spatial) and kind not in dialect.numeric_types:
                raise DataError(
                    f"column {col!r} has type {columns[col]} but attribute {attr.name!r} is "
                    f"{'ordinal' if isinstance(attr, Ordinal) else 'spatial'} and needs numbers; "
                    "clean the column or declare the attribute nominal"
                )
        if isinstance(attr, Ordinal):
            c = dialect.ident(attr.column)
            n = attr.shape[0]
            upper = (
                f"{c} <= {_number(attr.high)}"
                if attr.high_inclusive
                else f"{c} < {_number(attr.high)}"
            )
            if attr.width is not None:
                inside = f"LEAST(CAST(floor(({c} - {_number(attr.low)}) / {_number(attr.width)}) AS BIGINT), {n - 1})"
            else:
                whens = " ".join(
                    f"WHEN {c} < {_number(e)} THEN {i}" for i, e in enumerate(attr.edges[1:])
                )
                inside = f"CASE {whens} ELSE {n - 1} END"
            exprs.append(
                f"CASE WHEN {_missing(c)} THEN {NULL} WHEN {c} < {_number(attr.low)} THEN {BELOW} "
                f"WHEN NOT ({upper}) THEN {ABOVE} ELSE {inside} END"
            )
        elif isinstance(attr, Nominal):
            c = dialect.ident(attr.column)
            exprs.append(
                f"CASE WHEN {c} IS NULL THEN {NULL} ELSE {dialect.category_position(c, attr.categories)} END"
            )
        else:
            lat, lon = (dialect.ident(x) for x in attr.columns)
            lat0, lon0, lat1, lon1 = attr.bbox
            rows, cols = attr.shape
            any_null = f"{_missing(lat)} OR {_missing(lon)}"
            for col, lo, hi, n in ((lat, lat0, lat1, rows), (lon, lon0, lon1, cols)):
                exprs.append(
                    f"CASE WHEN {any_null} THEN {NULL} WHEN {col} < {_number(lo)} THEN {BELOW} "
                    f"WHEN {col} > {_number(hi)} THEN {ABOVE} "
                    f"ELSE LEAST(CAST(floor(({col} - {_number(lo)}) / {_number(hi - lo)} * {n}) AS BIGINT), {n - 1}) END"
                )
    return exprs


def offending_values_sql(columns: tuple[str, ...], expr: str, code: int, dialect: Dialect) -> str:
    """SQL over the table ``src`` for the three commonest values that get ``code`` from ``expr``."""
    cols = ", ".join(dialect.ident(c) for c in columns)
    return f"SELECT {cols}, count(*) AS n FROM src WHERE ({expr}) = {code} GROUP BY {cols} ORDER BY n DESC LIMIT 3"


#: ``examples(axis, code) -> [(value, rows), ...]``: the commonest offending values of an axis.
ExampleFinder = Callable[[int, int], list[tuple[Any, int]]]


def fill_counts(
    schema: Schema,
    codes: NDArray[np.int64],
    n: NDArray[np.int64],
    policy: OutOfDomainPolicy,
    examples: ExampleFinder,
) -> tuple[NDArray[np.int64], dict[str, Any]]:
    """Dense counts from grouped codes ``(groups, axes)`` and their sizes, under ``policy``.

    Raises :class:`DataError` for the first axis with NULL or out-of-domain rows that the policy
    does not cover, naming the column, example values and the number of rows.
    """
    codes = codes.copy()
    shape = np.array(schema.shape, dtype=np.int64)
    axis_attr = [schema[a] for a, _ in schema.axes]
    dropped: dict[str, int] = {}
    clipped: dict[str, int] = {}
    bad = (codes < 0).any(axis=1)
    if bad.any():
        for axis, attr in enumerate(axis_attr):
            col_codes = codes[bad, axis]
            for code in (NULL, BELOW, ABOVE):
                hit = col_codes == code
                if not hit.any():
                    continue
                count = int(n[bad][hit].sum())
                can_clip = code in (BELOW, ABOVE) and not isinstance(attr, Nominal)
                if policy == "error" or (policy == "clip" and not can_clip):
                    shown = ", ".join(f"{v!r} ({c} rows)" for v, c in examples(axis, code))
                    what = "NULL" if code == NULL else "outside the domain"
                    fix = (
                        "drop them with on_out_of_domain='drop' (--on-out-of-domain drop) or fix the data"
                        if code == NULL or isinstance(attr, Nominal)
                        else "widen the attribute's range, or choose on_out_of_domain='drop' or 'clip'"
                    )
                    raise DataError(
                        f"column {', '.join(attr.columns)!s} (attribute {attr.name!r}): {count} rows are "
                        f"{what}, e.g. {shown}; {fix}"
                    )
        if policy == "clip":
            for axis, attr in enumerate(axis_attr):
                for code, target in ((BELOW, 0), (ABOVE, int(shape[axis]) - 1)):
                    hit = codes[:, axis] == code
                    if hit.any():
                        clipped[attr.name] = clipped.get(attr.name, 0) + int(n[hit].sum())
                        codes[hit, axis] = target
            bad = (codes < 0).any(axis=1)
        for axis, attr in enumerate(axis_attr):
            first_bad = bad & (codes[:, axis] < 0) & ~(codes[:, :axis] < 0).any(axis=1)
            if first_bad.any():
                dropped[attr.name] = dropped.get(attr.name, 0) + int(n[first_bad].sum())
    keep = ~bad
    counts = np.zeros(schema.size, dtype=np.int64)
    flat = np.ravel_multi_index(tuple(codes[keep].T), schema.shape)
    np.add.at(counts, flat, n[keep])
    report = policy_report(
        policy, rows=int(n.sum()), counted=int(n[keep].sum()), dropped=dropped, clipped=clipped
    )
    return counts.reshape(schema.shape), report
