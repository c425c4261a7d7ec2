"""The embedded engine: binning and counting pushed into DuckDB.

The binning is the shared SQL of :mod:`dpcube.engine.sql`; one ``GROUP BY`` of the bin codes
counts every cell in one pass over the data, and the raw rows never reach Python.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpcube.engine.base import Engine, OutOfDomainPolicy
from dpcube.engine.sql import DUCKDB, axis_expressions, fill_counts, offending_values_sql
from dpcube.errors import DataError
from dpcube.schema import Nominal, Schema

__all__ = ["SQL", "DuckDBEngine", "SourceView", "axis_expressions", "open_source"]


@dataclass(frozen=True)
class SQL:
    """A SQL query as a data source: ``dpcube.histogram(SQL("SELECT ..."), schema)``.

    ``connection`` is the DuckDB connection to run it on (a new in-memory one by default).
    """

    query: str
    connection: duckdb.DuckDBPyConnection | None = None


class SourceView:
    """A data source opened in DuckDB: run SQL over it as the relation ``src``."""

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


def _read_path(
    con: duckdb.DuckDBPyConnection, path: Path, text_columns: tuple[str, ...] = ()
) -> duckdb.DuckDBPyRelation:
    if not path.exists():
        raise DataError(f"data file {str(path)!r} does not exist")
    name = path.name.lower()
    if path.is_dir():
        return con.read_parquet(str(path / "**" / "*.parquet"), hive_partitioning=True)
    if name.endswith((".parquet", ".pq")):
        return con.read_parquet(str(path))
    if name.endswith((".csv", ".csv.gz", ".tsv", ".txt", ".txt.gz")):
        # The CSV sniffer would type a column of "F" as BOOLEAN and "01" as INTEGER; columns read
        # as categories keep their text.
        # Quoting is RFC 4180 ('"', doubled to escape): left to the sniffer, a column of "'"
        # values makes it pick "'" as the quote and silently merge rows.
        # A .csv is comma-separated and a .tsv tab-separated, whatever one row of ';' suggests.
        q = '"'
        sep = "\t" if ".tsv" in name else "," if ".csv" in name else None
        header = con.read_csv(str(path), quotechar=q, escapechar=q, delimiter=sep).columns
        text = {c: "VARCHAR" for c in text_columns if c in header}
        if text:
            return con.read_csv(str(path), dtype=text, quotechar=q, escapechar=q, delimiter=sep)
        return con.read_csv(str(path), quotechar=q, escapechar=q, delimiter=sep)
    if name.endswith((".json", ".jsonl", ".ndjson")):
        return con.read_json(str(path))
    raise DataError(f"cannot tell the format of {str(path)!r}: use a .csv, .parquet or .json file")


@contextmanager
def open_source(source: Any, text_columns: tuple[str, ...] = ()) -> Iterator[SourceView]:
    """Open a path, DataFrame, Arrow table, DuckDB relation or :class:`SQL` as a :class:`SourceView`.

    ``text_columns`` are read as text from a CSV file (the columns of nominal attributes).
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
        threads = os.environ.get("DPCUBE_THREADS")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        if isinstance(source, str | os.PathLike):
            relation = _read_path(con, Path(source), text_columns)
        else:
            module = type(source).__module__.split(".")[0]
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

    def histogram(
        self, source: Any, schema: Schema, *, on_out_of_domain: OutOfDomainPolicy = "error"
    ) -> tuple[NDArray[np.int64], dict[str, Any]]:
        nominal = tuple(a.column for a in schema.attributes if isinstance(a, Nominal))
        with open_source(source, nominal) as view:
            exprs = axis_expressions(schema, view.columns)
            select = ", ".join(f"{e} AS a{i}" for i, e in enumerate(exprs))
            keys = ", ".join(f"a{i}" for i in range(len(exprs)))
            result = view.sql(
                f"SELECT {select}, count(*) AS n FROM src GROUP BY {keys}"
            ).fetchnumpy()
            codes = np.stack(
                [np.asarray(result[f"a{i}"], dtype=np.int64) for i in range(len(exprs))], axis=1
            )
            n = np.asarray(result["n"], dtype=np.int64)

            def examples(axis: int, code: int) -> list[tuple[Any, int]]:
                attr_columns = schema[schema.axes[axis][0]].columns
                rows = view.sql(
                    offending_values_sql(attr_columns, exprs[axis], code, DUCKDB)
                ).fetchall()
                return [
                    (r[0] if len(attr_columns) == 1 else tuple(r[:-1]), int(r[-1])) for r in rows
                ]

            return fill_counts(schema, codes, n, on_out_of_domain, examples)
