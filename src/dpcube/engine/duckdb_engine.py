"""The embedded engine: binning and counting pushed into DuckDB.

The binning is the shared SQL of :mod:`dpcube.engine.sql`; one ``GROUP BY`` of the bin codes
counts every cell in one pass over the data, and the raw rows never reach Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpcube.engine.base import Engine, OutOfDomainPolicy
from dpcube.engine.counting import ContributionBound, histogram_counts, unit_size_bins
from dpcube.engine.sql import DUCKDB, axis_expressions, schema_column_kinds
from dpcube.errors import DataError
from dpcube.schema import Schema

__all__ = [
    "SQL",
    "DuckDBEngine",
    "SourceView",
    "axis_expressions",
    "fingerprint",
    "open_source",
]


@dataclass(frozen=True)
class SQL:
    """A SQL query as a data source: ``dpcube.histogram(SQL("SELECT ..."), schema)``.

    ``connection`` is the DuckDB connection to run it on (a new in-memory one by default).
    """

    query: str
    connection: duckdb.DuckDBPyConnection | None = None


class SourceView:
    """A data source opened in DuckDB: run SQL over it as the relation ``src``
    (a :class:`dpcube.engine.sql.Table`)."""

    dialect = DUCKDB

    def __init__(self, con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation) -> None:
        self.con = con
        self.relation = relation

    def sql(self, query: str) -> duckdb.DuckDBPyRelation:
        """Run ``query`` in which the data is the table ``src``."""
        result = self.relation.query("src", query)
        assert result is not None, "a SELECT always yields a relation"
        return result

    @property
    def columns(self) -> dict[str, str]:
        return dict(zip(self.relation.columns, (str(t) for t in self.relation.types), strict=True))

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        return self.sql(query).fetchall()

    def arrays(self, query: str) -> dict[str, NDArray[Any]]:
        return {k: np.asarray(v) for k, v in self.sql(query).fetchnumpy().items()}


#: DuckDB's CSV error for a value that does not fit its column's sniffed type.
_CSV_CONVERSION = re.compile(
    r"CSV Error on Line: (\d+).*?converting column \"((?:[^\"]|\"\")*)\".*?to '([^']+)'", re.S
)
#: Parts of DuckDB's messages that quote the data (private): a whole row, a value.
_QUOTED_ROW = re.compile(r"^\s*Original Line:.*$", re.M)
_QUOTED_VALUE = re.compile(r"(string) \"(?:[^\"]|\"\")*\"")


def _library_message(exc: BaseException) -> str:
    """A library's error message on one line, with the errors that caused it (DuckDB's Python
    layer puts the cause, e.g. a failed import, in ``__cause__`` and ends its own text with a
    colon), and without the data it quotes (a row, a value: private).

    A CSV value that does not fit the type DuckDB sniffed for its column is translated (line,
    column, type, and the fix); other messages keep their first paragraph (DuckDB's hints and
    reader settings follow a blank line).
    """
    parts: list[str] = []
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen and len(parts) < 4:
        seen.add(id(error))
        raw = str(error)
        found = _CSV_CONVERSION.search(raw)
        if found:
            line, column, sql_type = found.groups()
            parts.append(
                f"line {line}: column {column.replace(chr(34) * 2, chr(34))!r} holds a value "
                f"that is not {sql_type}, the type DuckDB inferred from the first rows (the "
                "value is not shown: it is data); fix that value, or make the column text "
                "(a nominal attribute reads its column as text)"
            )
            break
        head, traceback, tail = raw.partition("Traceback (most recent call last):")
        if traceback:  # a Python traceback quoted in the message: its last line says it all
            raw = head.rstrip() + " " + ([ln for ln in tail.splitlines() if ln.strip()] or [""])[-1]
        paragraph = _QUOTED_VALUE.sub(r"\1 (not shown)", _QUOTED_ROW.sub("", raw))
        paragraph = re.split(r"\n\s*\n", paragraph.strip(), maxsplit=1)[0]
        text = " ".join(line.strip() for line in paragraph.splitlines() if line.strip())
        parts.append(text.rstrip(":").strip() or type(error).__name__)
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    return ": ".join(dict.fromkeys(parts))


@contextmanager
def reading(source: Any, name_errors: bool = True) -> Iterator[None]:
    """Turn DuckDB's errors while reading ``source`` into one :class:`DataError` naming it;
    a path's :class:`DataError` gets the path in front (when ``name_errors``)."""
    name = f"data file {str(source)!r}" if isinstance(source, str | os.PathLike) else "the data"
    try:
        yield
    except duckdb.Error as exc:
        fmt = _format_of(Path(source)) if isinstance(source, str | os.PathLike) else ""
        raise DataError(
            f"{name} is not readable{' as ' + fmt if fmt else ''}: {_library_message(exc)}"
        ) from exc
    except DataError as exc:
        if not name_errors or not isinstance(source, str | os.PathLike) or str(source) in str(exc):
            raise
        raise DataError(f"{name}: {exc}") from exc


def _format_of(path: Path) -> str:
    name = path.name.lower()
    if path.is_dir() or name.endswith((".parquet", ".pq")):
        return "Parquet"
    if name.endswith((".csv", ".csv.gz", ".tsv", ".txt", ".txt.gz")):
        return "CSV"
    if name.endswith((".json", ".jsonl", ".ndjson")):
        return "JSON"
    return ""


def _read_path(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    text_columns: tuple[str, ...] = (),
    numeric_columns: tuple[str, ...] = (),
    sniff_all: bool = False,
) -> duckdb.DuckDBPyRelation:
    where = repr(str(path))
    if not path.exists():
        raise DataError(f"data file {where} does not exist")
    if path.is_dir():
        if next(path.rglob("*.parquet"), None) is None:
            raise DataError(
                f"directory {where} holds no .parquet files; give a CSV or Parquet file, "
                "or a directory of Parquet files"
            )
        return con.read_parquet(str(path / "**" / "*.parquet"), hive_partitioning=True)
    if path.stat().st_size == 0:
        raise DataError(f"data file {where} is empty (0 bytes); it needs at least a header row")
    fmt = _format_of(path)
    if fmt == "Parquet":
        return con.read_parquet(str(path))
    if fmt == "CSV":
        if not path.name.lower().endswith(".gz"):
            with path.open("rb") as f:
                if b"\x00" in f.read(8192):
                    raise DataError(
                        f"data file {where} is not a CSV text file (it holds binary data); "
                        "give a CSV or Parquet file"
                    )
        # The CSV sniffer would type a column of "F" as BOOLEAN and "01" as INTEGER; columns read
        # as categories keep their text.
        # Quoting is RFC 4180 ('"', doubled to escape): left to the sniffer, a column of "'"
        # values makes it pick "'" as the quote and silently merge rows.
        # A .csv is comma-separated and a .tsv tab-separated, whatever one row of ';' suggests.
        name = path.name.lower()
        options: dict[str, Any] = {
            "header": True,
            "quotechar": '"',
            "escapechar": '"',
            "delimiter": "\t" if ".tsv" in name else "," if ".csv" in name else None,
        }
        if sniff_all:  # types from every row, not the first 20,480 (a full extra pass)
            options["sample_size"] = -1
        relation = con.read_csv(str(path), **options)
        header = relation.columns
        dtype = {c: "VARCHAR" for c in text_columns if c in header}
        # Whether there is a row, without converting any value to Python (a TIMESTAMPTZ value
        # would need pytz; DuckDB converts only what is fetched).
        if not relation.limit(1).aggregate("count(*)").fetchall()[0][0]:
            # A header and no rows: zero records is legitimate data, but the sniffer has no
            # values to type the numeric columns by.
            dtype |= {c: "DOUBLE" for c in numeric_columns if c in header and c not in dtype}
        return con.read_csv(str(path), dtype=dtype, **options) if dtype else relation
    if fmt == "JSON":
        return con.read_json(str(path))
    raise DataError(f"cannot tell the format of {where}: use a .csv, .parquet or .json file")


@contextmanager
def open_source(
    source: Any,
    text_columns: tuple[str, ...] = (),
    numeric_columns: tuple[str, ...] = (),
    sniff_all: bool = False,
) -> Iterator[SourceView]:
    """Open a path, DataFrame, Arrow table, DuckDB relation or :class:`SQL` as a :class:`SourceView`.

    ``text_columns`` are read as text from a CSV file (the columns of nominal attributes);
    ``numeric_columns`` as numbers from a CSV file with a header and no rows; ``sniff_all``
    types a CSV file's columns from all its rows.
    """
    if isinstance(source, duckdb.DuckDBPyRelation):
        yield SourceView(con=duckdb.connect(), relation=source)
        return
    if isinstance(source, SQL):
        con = source.connection or duckdb.connect()
        yield SourceView(con, con.sql(source.query))
        return
    con = duckdb.connect()
    try:
        # Values with a time zone render (and bin, and hash) in UTC on every machine.
        con.execute("SET TimeZone = 'UTC'")
        threads = os.environ.get("DPCUBE_THREADS")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        if isinstance(source, str | os.PathLike):
            with reading(source):
                relation = _read_path(con, Path(source), text_columns, numeric_columns, sniff_all)
        else:
            module = type(source).__module__.split(".")[0]
            if module == "pyspark":
                raise DataError(
                    "DuckDB cannot read a Spark DataFrame: count it on Spark (engine='spark', "
                    "or leave engine unset), or pass a path or a pandas/Polars DataFrame"
                )
            if module not in ("pandas", "polars", "pyarrow"):
                raise DataError(
                    f"cannot read a {type(source).__name__} as data: pass a path (CSV/Parquet), a pandas or "
                    "Polars DataFrame, an Arrow table, a DuckDB relation or dpcube.SQL(query)"
                )
            con.register("dpcube_source", source)
            relation = con.table("dpcube_source")
        yield SourceView(con, relation)
    finally:
        con.close()


class DuckDBEngine(Engine):
    """Counts with an embedded DuckDB: the default engine."""

    name = "duckdb"

    @contextmanager
    def open(
        self, source: Any, text_columns: tuple[str, ...] = (), numeric_columns: tuple[str, ...] = ()
    ) -> Iterator[SourceView]:
        """``source`` as a :class:`SourceView`; DuckDB's errors, then and while it is read, become
        one :class:`DataError` naming it (:func:`reading`)."""
        with (
            reading(source, name_errors=False),
            open_source(source, text_columns, numeric_columns) as view,
        ):
            yield view

    def histogram(
        self,
        source: Any,
        schema: Schema,
        *,
        on_out_of_domain: OutOfDomainPolicy = "error",
        show_values: bool = False,
        bound: ContributionBound | None = None,
    ) -> tuple[NDArray[np.int64], dict[str, Any]]:
        with reading(source), self.open(source, *schema_column_kinds(schema)) as view:
            return histogram_counts(view, schema, on_out_of_domain, show_values, bound)

    def unit_sizes(
        self, source: Any, column: str, bits: int
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        with reading(source), self.open(source) as table:
            return unit_size_bins(table, column, bits)


# -- data set identity --------------------------------------------------------------------------

#: Version of the fingerprint's normalisation; part of every fingerprint.
FINGERPRINT_VERSION = "dpcube-fp-1"
_NULL = "'N'"
#: Types whose VARCHAR cast depends on the session's time zone.
_ZONED_TYPES = frozenset({"TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"})


def _normalised(column: str, sql_type: str) -> str:
    """SQL text of one value of ``column``: length-prefixed so no two rows collide by concatenation.

    Numbers whose value is integral (``3``, ``3.0``) read as their integer text so that a CSV's
    inferred BIGINT and a Parquet DOUBLE agree; other numbers as DuckDB's shortest double text;
    a timestamp with time zone as its UTC text (``2013-01-01 05:00:00+00``) whatever the
    machine's time zone; everything else (dates, times, intervals, decimals, lists, structs,
    maps, blobs, text of any length) as its VARCHAR cast, computed in SQL so that no value
    reaches Python; NULL as ``N`` (a non-NULL value starts with a digit).
    """
    ident = '"' + column.replace('"', '""') + '"'
    base = sql_type.split("(")[0].upper()
    if base in DUCKDB.numeric_types:
        d = f"CAST({ident} AS DOUBLE)"
        text = (
            f"CASE WHEN isfinite({d}) AND {d} = round({d}) AND abs({d}) < 1e18 "
            f"THEN CAST(CAST({d} AS BIGINT) AS VARCHAR) ELSE CAST({d} AS VARCHAR) END"
        )
    elif base in _ZONED_TYPES:
        # In UTC whatever the session's time zone (a DuckDB cast renders it in the session's).
        text = (
            f"CASE WHEN isfinite({ident}) THEN CAST(timezone('UTC', {ident}) AS VARCHAR) || '+00' "
            f"ELSE CAST({ident} AS VARCHAR) END"
        )
    else:
        text = f"CAST({ident} AS VARCHAR)"
    return f"coalesce(CAST(length({text}) AS VARCHAR) || ':' || {text}, {_NULL})"


def _fingerprint_scan(source: Any, sniff_all: bool) -> tuple[list[tuple[str, str]], Any, Any, Any]:
    """The sorted (column, type) pairs, the two MD5 half sums and the row count of ``source``."""
    with open_source(source, sniff_all=sniff_all) as view:
        columns = sorted(view.columns.items())
        if not columns:
            raise DataError("the data has no columns, so it has no identity to charge a budget to")
        row = " || '|' || ".join(_normalised(c, t) for c, t in columns)
        # One MD5 per row (a subquery), split into its two 64-bit halves and summed exactly.
        ((upper, lower, n),) = view.sql(
            "SELECT coalesce(sum(CAST(h >> 64 AS HUGEINT)), 0), "
            "coalesce(sum(CAST(h & 18446744073709551615 AS HUGEINT)), 0), count(*) "
            f"FROM (SELECT md5_number({row}) AS h FROM src)"
        ).fetchall()
    return columns, upper, lower, n


def fingerprint(source: Any) -> str:
    """The identity of a data set's records: ``"sha256:<hex>"``, in one scan of ``source``.

    Order-independent (each row's normalised values, columns in sorted-name order, are hashed
    with MD5; the sums of both 64-bit halves modulo 2^64 and the row count are combined with the
    sorted column names through SHA-256), so a copy, a rename, a shuffle or a CSV-to-Parquet
    conversion of the same records gives the same fingerprint and one changed value another.
    ``source`` is anything :func:`open_source` reads. It identifies the data set to its ledger
    and must never be published (it would let anyone with a candidate table test it).
    """
    try:
        with reading(source):
            columns, upper, lower, n = _fingerprint_scan(source, sniff_all=False)
    except DataError as exc:
        # A CSV value beyond the rows DuckDB typed its column from (a column the release may
        # not even use): the types are taken from every row instead. Files read the first way
        # keep their identity; this one has one identity, the same on every read.
        if not isinstance(exc.__cause__, duckdb.ConversionException) or not isinstance(
            source, str | os.PathLike
        ):
            raise
        with reading(source):
            columns, upper, lower, n = _fingerprint_scan(source, sniff_all=True)
    payload = json.dumps(
        [FINGERPRINT_VERSION, [c for c, _ in columns], int(upper) % 2**64, int(lower) % 2**64, n]
    )
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()
