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
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dpcube.engine.policy import OutOfDomainPolicy, policy_report
from dpcube.errors import DataError
from dpcube.schema import Nominal, Ordinal, Schema, Spatial

BELOW, NULL, ABOVE = -1, -2, -3


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL engines."""

    name: str
    #: Column types (upper case, without parameters) that hold numbers.
    numeric_types: tuple[str, ...]
    #: The numeric types that hold whole numbers only.
    integer_types: tuple[str, ...] = ()

    def ident(self, name: str) -> str:
        if self.name == "spark":
            return "`" + name.replace("`", "``") + "`"
        return '"' + name.replace('"', '""') + '"'

    def literal(self, value: str) -> str:
        if self.name == "spark":
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + value.replace("'", "''") + "'"

    @property
    def text_type(self) -> str:
        """The type to CAST a value to for its text."""
        return "STRING" if self.name == "spark" else "VARCHAR"

    def text(self, expr: str) -> str:
        """SQL for the text of ``expr``.

        >>> SPARK.text("x"), DUCKDB.text("x")
        ('CAST(x AS STRING)', 'CAST(x AS VARCHAR)')
        """
        return f"CAST({expr} AS {self.text_type})"

    def hash64(self, expr: str) -> str:
        """SQL for a 64-bit hash of ``expr`` (Spark's ``xxhash64``, DuckDB's ``hash``): a
        fixed-width stand-in for a text that aggregates without copying strings; the engines'
        hashes differ, so it never leaves one query plan as a result.

        >>> SPARK.hash64("x"), DUCKDB.hash64("x")
        ('xxhash64(x)', 'hash(x)')
        """
        return f"{'xxhash64' if self.name == 'spark' else 'hash'}({expr})"

    def grouping_id(self, columns: list[str]) -> str:
        """The bit mask of the ``columns`` aggregated away in a GROUPING SETS row, the first column
        the most significant bit (DuckDB's ``GROUPING(a, b)`` is Spark's ``grouping_id(a, b)``).

        >>> SPARK.grouping_id(["b0", "b2"]), DUCKDB.grouping_id([])
        ('grouping_id(b0, b2)', '0')
        """
        if not columns:
            return "0"
        return f"{'grouping_id' if self.name == 'spark' else 'GROUPING'}({', '.join(columns)})"

    def whole_division(self, numerator: str, denominator: int) -> str:
        """SQL for ``floor(numerator / denominator)`` of a non-negative whole ``numerator`` and a
        positive whole ``denominator``, in integer arithmetic (no DECIMAL: Spark reads ``5.0`` as
        a DECIMAL literal and divides row by row in BigDecimal, 2.4x the CPU of the whole binning
        expression at 10M rows).

        >>> SPARK.whole_division("x - 3", 5), DUCKDB.whole_division("x - 3", 5)
        ('(x - 3) div 5', '(x - 3) // 5')
        """
        return f"({numerator}) {'div' if self.name == 'spark' else '//'} {int(denominator)}"

    def category_position(self, column: str, categories: tuple[str, ...]) -> str:
        """0-based position of the column's text among the categories, or -1 (BELOW).

        DuckDB looks the text up in a list. Spark's ``array_position`` compares with each
        category in turn (52 comparisons per row for 52 states), so up to
        :data:`SEARCH_TREE_MAX` categories Spark walks a binary search tree of ``<`` comparisons
        (:func:`category_search_tree`) instead.
        """
        text = f"CAST({column} AS {self.text_type})"
        if self.name == "spark":
            if len(categories) <= SEARCH_TREE_MAX:
                return category_search_tree(text, categories, self)
            cats = ", ".join(self.literal(x) for x in categories)
            return f"array_position(array({cats}), {text}) - 1"
        cats = ", ".join(self.literal(x) for x in categories)
        return f"coalesce(list_position([{cats}], {text}) - 1, {BELOW})"


#: Most categories :meth:`Dialect.category_position` finds by a search tree on Spark (a larger
#: tree makes generated code too large to compile; Spark then interprets the stage).
SEARCH_TREE_MAX = 256


def category_search_tree(text: str, categories: tuple[str, ...], dialect: Dialect) -> str:
    """SQL for the 0-based position of ``text`` among ``categories`` (-1 when absent) by binary
    search: ``CASE WHEN text < pivot`` halves the sorted categories until at most 4 remain,
    which are compared for equality. Strings compare by their UTF-8 bytes in Spark (the default
    ``UTF8_BINARY`` collation), the order of Python's ``sorted`` on the encoded text.

    >>> print(category_search_tree("t", ("b", "a", "c"), SPARK))
    CASE WHEN t = 'a' THEN 1 WHEN t = 'b' THEN 0 WHEN t = 'c' THEN 2 ELSE -1 END
    >>> category_search_tree("t", tuple("edcba"), SPARK).startswith("CASE WHEN t < 'c' THEN CASE")
    True
    """
    ranked = sorted(enumerate(categories), key=lambda item: item[1].encode())

    def search(items: list[tuple[int, str]]) -> str:
        if len(items) <= 4:
            whens = " ".join(f"WHEN {text} = {dialect.literal(c)} THEN {i}" for i, c in items)
            return f"CASE {whens} ELSE {BELOW} END"
        mid = len(items) // 2
        pivot = dialect.literal(items[mid][1])
        return (
            f"CASE WHEN {text} < {pivot} THEN {search(items[:mid])} ELSE {search(items[mid:])} END"
        )

    return search(ranked)


_DUCKDB_INTEGERS = (
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
    "UBIGINT", "UHUGEINT",
)  # fmt: skip
DUCKDB = Dialect(
    "duckdb", (*_DUCKDB_INTEGERS, "FLOAT", "DOUBLE", "REAL", "DECIMAL"), _DUCKDB_INTEGERS
)
_SPARK_INTEGERS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
SPARK = Dialect("spark", (*_SPARK_INTEGERS, "FLOAT", "DOUBLE", "DECIMAL"), _SPARK_INTEGERS)


class Table(Protocol):
    """A data source opened in an engine: SQL in its dialect runs over it as the relation ``src``.

    Each engine adapts its own handle to this (DuckDB's :class:`~dpcube.engine.duckdb_engine.SourceView`,
    Spark's :class:`~dpcube.engine.spark_engine.SparkTable`), so every counting path
    (:mod:`dpcube.engine.counting`) is written once.
    """

    dialect: Dialect

    @property
    def columns(self) -> dict[str, str]:
        """Column name -> SQL type (as the engine spells it)."""
        ...

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        """The (few) result rows of ``query``."""
        ...

    def arrays(self, query: str) -> dict[str, NDArray[Any]]:
        """The result of ``query`` column by column (aggregates only: at most one row per cell)."""
        ...


def schema_column_kinds(schema: Schema) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The columns a schema reads as text (nominal) and as numbers (ordinal, spatial)."""
    nominal = tuple(a.column for a in schema.attributes if isinstance(a, Nominal))
    numeric = tuple(c for a in schema.attributes if not isinstance(a, Nominal) for c in a.columns)
    return nominal, numeric


def _number(x: float) -> str:
    return repr(float(x))


def _is_whole(x: float) -> bool:
    """Whether ``x`` is a whole number small enough for a BIGINT literal (and exact in a double).

    >>> _is_whole(5.0), _is_whole(0.5), _is_whole(1e300)
    (True, False, False)
    """
    return float(x).is_integer() and abs(float(x)) < 2**53


def _whole_number(x: float) -> str:
    """A whole bound as an integer literal (compared with an integer column without a cast).

    >>> _whole_number(99.0)
    '99'
    """
    return str(int(x))


def _missing(column: str) -> str:
    """A numeric value that is missing: NULL, or a float NaN (which would compare as above every
    bound and be clipped into the last bin), so NaN follows the NULL policy."""
    return f"({column} IS NULL OR isnan(CAST({column} AS DOUBLE)))"


#: ``run(sql) -> first row``: how :func:`axis_expressions` counts a text column's non-numbers.
RowQuery = Callable[[str], tuple[Any, ...]]


def unparsable_sql(column: str, dialect: Dialect = DUCKDB) -> str:
    """SQL over ``src``: (rows, values of ``column`` that are not NULL and do not parse as a number).

    >>> unparsable_sql("age")
    'SELECT count(*), count(*) FILTER (WHERE "age" IS NOT NULL AND TRY_CAST("age" AS DOUBLE) IS NULL) FROM src'
    """
    c = dialect.ident(column)
    return (
        f"SELECT count(*), count(*) FILTER (WHERE {c} IS NOT NULL AND "
        f"TRY_CAST({c} AS DOUBLE) IS NULL) FROM src"
    )


def axis_expressions(
    schema: Schema,
    columns: dict[str, str],
    dialect: Dialect = DUCKDB,
    run: RowQuery | None = None,
) -> list[str]:
    """One SQL expression per axis giving the bin index or a negative code (module docstring).

    ``columns`` maps the source's column names to their SQL types; a missing column or a
    non-numeric column under an ordinal or spatial attribute raises :class:`DataError`, which
    says how many of the column's values are not numbers when ``run`` can query the source.
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
                counted = ""
                if run is not None:
                    rows, bad = (int(x) for x in run(unparsable_sql(col, dialect))[:2])
                    counted = f" ({bad:,} of {rows:,} rows hold a value that is not a number)"
                raise DataError(
                    f"column {col!r} has type {columns[col]} but attribute {attr.name!r} is "
                    f"{'ordinal' if isinstance(attr, Ordinal) else 'spatial'} and needs "
                    f"numbers{counted}; clean the column or declare the attribute nominal"
                )
        if isinstance(attr, Ordinal):
            c = dialect.ident(attr.column)
            n = attr.shape[0]
            whole = columns[attr.column].split("(")[0].upper() in dialect.integer_types

            def bound(x: float, whole: bool = whole) -> str:
                return _whole_number(x) if whole and _is_whole(x) else _number(x)

            upper = (
                f"{c} <= {bound(attr.high)}" if attr.high_inclusive else f"{c} < {bound(attr.high)}"
            )
            if attr.width is not None and whole and _is_whole(attr.low) and _is_whole(attr.width):
                # whole numbers in whole-width bins: integer division, exactly floor((c - low) / w)
                # (c >= low in this branch), without DECIMAL or DOUBLE arithmetic per row
                offset = f"CAST({c} AS BIGINT) - {_whole_number(attr.low)}"
                inside = f"LEAST({dialect.whole_division(offset, int(attr.width))}, {n - 1})"
            elif attr.width is not None:
                inside = f"LEAST(CAST(floor(({c} - {_number(attr.low)}) / {_number(attr.width)}) AS BIGINT), {n - 1})"
            else:
                whens = " ".join(
                    f"WHEN {c} < {bound(e)} THEN {i}" for i, e in enumerate(attr.edges[1:])
                )
                inside = f"CASE {whens} ELSE {n - 1} END"
            missing = f"{c} IS NULL" if whole else _missing(c)
            exprs.append(
                f"CASE WHEN {missing} THEN {NULL} WHEN {c} < {bound(attr.low)} THEN {BELOW} "
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


def offending_values_sql(
    columns: tuple[str, ...],
    expr: str,
    code: int,
    dialect: Dialect,
    as_text: tuple[str, ...] = (),
) -> str:
    """SQL over the table ``src`` for the three commonest values that get ``code`` from ``expr``;
    the columns ``as_text`` (timestamps, dates, lists...) come back as their text, so that no
    value needs a Python conversion (a time-zone timestamp's needs pytz)."""
    cols = ", ".join(
        dialect.text(dialect.ident(c)) if c in as_text else dialect.ident(c) for c in columns
    )
    return f"SELECT {cols}, count(*) AS n FROM src WHERE ({expr}) = {code} GROUP BY {cols} ORDER BY n DESC LIMIT 3"


#: ``examples(axis, code) -> [(value, rows), ...]``: the commonest offending values of an axis.
ExampleFinder = Callable[[int, int], list[tuple[Any, int]]]


def _cause(attr: Any, code: int, part: int) -> str:
    """What a negative code on the ``part``-th axis of ``attr`` means, in words."""
    if code == NULL:
        return "NULL"
    if isinstance(attr, Nominal):
        return "not a known category"
    where = "below the range" if code == BELOW else "above the range"
    return f"{attr.columns[part]} {where}" if len(attr.columns) > 1 else where


#: ``(axis, attribute, axis index within the attribute, {code: rows})``.
Problem = tuple[int, Any, int, dict[int, int]]


def out_of_domain_error(
    problems: list[Problem], *, rows: int, affected: int, examples: ExampleFinder | None = None
) -> DataError:
    """One error line naming every attribute with rows the policy does not cover, and every cause.

    ``affected`` is the number of distinct rows concerned, of ``rows`` read. The offending values
    are private data: they are shown only when ``examples`` is given (``show_values=True``,
    ``--show-values``).

    >>> spec = {"name": "age", "kind": "ordinal", "range": [0, 99], "width": 1}
    >>> age = Schema.from_dict({"attributes": [spec]})["age"]
    >>> print(out_of_domain_error([(0, age, 0, {BELOW: 3, ABOVE: 2, NULL: 1})], rows=10, affected=6))
    6 of 10 rows cannot be counted: column age (attribute 'age'): 6 rows are outside the domain or NULL (3 below the range, 2 above the range, 1 NULL); drop them with on_out_of_domain='drop' (--on-out-of-domain drop) or fix the data (the values are private and not shown; show_values=True or --show-values prints the commonest)
    """
    by_attr: dict[str, list[Problem]] = {}
    for problem in problems:
        by_attr.setdefault(problem[1].name, []).append(problem)
    parts: list[str] = []
    needs_fix = False
    for group in by_attr.values():
        attr = group[0][1]
        causes: list[tuple[int, int, int, int]] = []  # (axis, part, code, rows)
        for axis, _, part, by_code in group:
            for code in (BELOW, ABOVE, NULL):
                seen_null = any(c == NULL for _, _, c, _ in causes)
                if by_code.get(code) and not (code == NULL and seen_null):  # NULL: every axis
                    causes.append((axis, part, code, by_code[code]))
        codes = {code for _, _, code, _ in causes}
        what = (
            "NULL"
            if codes == {NULL}
            else "outside the domain"
            if NULL not in codes
            else "outside the domain or NULL"
        )
        listed = ", ".join(f"{k:,} {_cause(attr, c, part)}" for _, part, c, k in causes)
        # a point can be off the box on both coordinates: then only the causes are counted
        parts_hit = {part for _, part, code, _ in causes if code != NULL}
        total = "" if len(parts_hit) > 1 else f"{sum(k for *_, k in causes):,} "
        text = f"column {', '.join(attr.columns)} (attribute {attr.name!r}): {total}rows are {what} ({listed})"
        if examples is not None:
            shown = "; ".join(
                f"{_cause(attr, c, part)}: "
                + ", ".join(f"{v!r} ({n} rows)" for v, n in examples(axis, c))
                for axis, part, c, _ in causes
            )
            text += f", e.g. {shown}"
        parts.append(text)
        needs_fix = needs_fix or NULL in codes or isinstance(attr, Nominal)
    fix = (
        "drop them with on_out_of_domain='drop' (--on-out-of-domain drop) or fix the data"
        if needs_fix
        else "widen the attribute's range, or choose on_out_of_domain='drop' or 'clip'"
    )
    hint = (
        ""
        if examples is not None
        else " (the values are private and not shown; show_values=True or --show-values prints "
        "the commonest)"
    )
    return DataError(
        f"{affected:,} of {rows:,} rows cannot be counted: {'; '.join(parts)}; {fix}{hint}"
    )


def fill_counts(
    schema: Schema,
    codes: NDArray[np.int64],
    n: NDArray[np.int64],
    policy: OutOfDomainPolicy,
    examples: ExampleFinder | None = None,
) -> tuple[NDArray[np.int64], dict[str, Any]]:
    """Dense counts from grouped codes ``(groups, axes)`` and their sizes, under ``policy``.

    Raises :class:`DataError` (:func:`out_of_domain_error`) naming every attribute with NULL or
    out-of-domain rows that the policy does not cover, with the rows of each cause; the offending
    values are shown only when ``examples`` is given.
    """
    codes = codes.copy()
    shape = np.array(schema.shape, dtype=np.int64)
    axis_attr = [schema[a] for a, _ in schema.axes]
    dropped: dict[str, int] = {}
    clipped: dict[str, int] = {}
    bad = (codes < 0).any(axis=1)
    if bad.any():
        problems: list[Problem] = []
        uncovered = np.zeros(len(n), dtype=bool)
        for axis, attr in enumerate(axis_attr):
            by_code: dict[int, int] = {}
            for code in (NULL, BELOW, ABOVE):
                hit = codes[:, axis] == code
                if not hit.any():
                    continue
                can_clip = code in (BELOW, ABOVE) and not isinstance(attr, Nominal)
                if policy == "error" or (policy == "clip" and not can_clip):
                    by_code[code] = int(n[hit].sum())
                    uncovered |= hit
            if by_code:
                problems.append((axis, attr, schema.axes[axis][1], by_code))
        if problems:
            raise out_of_domain_error(
                problems, rows=int(n.sum()), affected=int(n[uncovered].sum()), examples=examples
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
