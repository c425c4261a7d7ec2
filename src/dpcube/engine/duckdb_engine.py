"""The embedded engine: binning and counting pushed into DuckDB.

Each axis of the schema becomes one SQL expression that maps a row to its bin index, or to a
negative code when the row is outside the domain:

==========  ===========================================================
code >= 0   the bin
-1          out of domain (below the range, or an unknown category)
-2          NULL in a column the attribute reads
-3          out of domain above the range (ordinal and spatial only)
==========  ===========================================================

One ``GROUP BY`` of these codes counts every cell in one pass over the data; the raw rows never
reach Python. The few groups with negative codes are then handled by the out-of-domain policy.
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

from dpcube.engine.base import Engine, OutOfDomainPolicy, policy_report
from dpcube.errors import DataError
from dpcube.schema import Nominal, Ordinal, Schema, Spatial

NUMERIC_TYPES = (
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
    "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL",
)  # fmt: skip

BELOW, NULL, ABOVE = -1, -2, -3


@dataclass(frozen=True)
class SQL:
    """A SQL query as a data source: ``dpcube.histogram(SQL("SELECT ..."), schema)``.

    ``connection`` is the DuckDB connection to run it on (a new in-memory one by default).
    """

    query: str
    connection: duckdb.DuckDBPyConnection | None = None


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _number(x: float) -> str:
    return repr(float(x))


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


def _read_path(con: duckdb.DuckDBPyConnection, path: Path) -> duckdb.DuckDBPyRelation:
    if not path.exists():
        raise DataError(f"data file {str(path)!r} does not exist")
    name = path.name.lower()
    if path.is_dir():
        return con.read_parquet(str(path / "**" / "*.parquet"), hive_partitioning=True)
    if name.endswith((".parquet", ".pq")):
        return con.read_parquet(str(path))
    if name.endswith((".csv", ".csv.gz", ".tsv", ".txt", ".txt.gz")):
        return con.read_csv(str(path))
    if name.endswith((".json", ".jsonl", ".ndjson")):
        return con.read_json(str(path))
    raise DataError(f"cannot tell the format of {str(path)!r}: use a .csv, .parquet or .json file")


@contextmanager
def open_source(source: Any) -> Iterator[SourceView]:
    """Open a path, DataFrame, Arrow table, DuckDB relation or :class:`SQL` as a :class:`SourceView`."""
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
            relation = _read_path(con, Path(source))
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


def axis_expressions(schema: Schema, columns: dict[str, str]) -> list[str]:
    """One SQL expression per axis giving the bin index or a negative code (see module docstring)."""
    exprs: list[str] = []
    for attr in schema.attributes:
        needed = attr.columns
        for col in needed:
            if col not in columns:
                raise DataError(
                    f"attribute {attr.name!r} reads column {col!r}, which the data does not have "
                    f"(columns: {', '.join(columns)}); fix the schema's 'column' or the data"
                )
        if isinstance(attr, Ordinal | Spatial):
            for col in needed:
                kind = columns[col].split("(")[0].upper()
                if kind not in NUMERIC_TYPES:
                    raise DataError(
                        f"column {col!r} has type {columns[col]} but attribute {attr.name!r} is "
                        f"{'ordinal' if isinstance(attr, Ordinal) else 'spatial'} and needs numbers; "
                        "clean the column or declare the attribute nominal"
                    )
        if isinstance(attr, Ordinal):
            c = quote_ident(attr.column)
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
                f"CASE WHEN {c} IS NULL THEN {NULL} WHEN {c} < {_number(attr.low)} THEN {BELOW} "
                f"WHEN NOT ({upper}) THEN {ABOVE} ELSE {inside} END"
            )
        elif isinstance(attr, Nominal):
            c = quote_ident(attr.column)
            cats = ", ".join(quote_literal(x) for x in attr.categories)
            exprs.append(
                f"CASE WHEN {c} IS NULL THEN {NULL} "
                f"ELSE coalesce(list_position([{cats}], CAST({c} AS VARCHAR)) - 1, {BELOW}) END"
            )
        else:
            lat, lon = (quote_ident(x) for x in attr.columns)
            lat0, lon0, lat1, lon1 = attr.bbox
            rows, cols = attr.shape
            any_null = f"{lat} IS NULL OR {lon} IS NULL"
            for col, lo, hi, n in ((lat, lat0, lat1, rows), (lon, lon0, lon1, cols)):
                exprs.append(
                    f"CASE WHEN {any_null} THEN {NULL} WHEN {col} < {_number(lo)} THEN {BELOW} "
                    f"WHEN {col} > {_number(hi)} THEN {ABOVE} "
                    f"ELSE LEAST(CAST(floor(({col} - {_number(lo)}) / {_number(hi - lo)} * {n}) AS BIGINT), {n - 1}) END"
                )
    return exprs


def _offending_values(
    view: SourceView, attr_columns: tuple[str, ...], expr: str, code: int
) -> list[tuple[Any, int]]:
    cols = ", ".join(quote_ident(c) for c in attr_columns)
    rows = view.sql(
        f"SELECT {cols}, count(*) AS n FROM src WHERE ({expr}) = {code} GROUP BY ALL ORDER BY n DESC LIMIT 3"
    ).fetchall()
    return [(r[0] if len(attr_columns) == 1 else tuple(r[:-1]), int(r[-1])) for r in rows]


class DuckDBEngine(Engine):
    """Counts with an embedded DuckDB: the default engine."""

    name = "duckdb"

    def histogram(
        self, source: Any, schema: Schema, *, on_out_of_domain: OutOfDomainPolicy = "error"
    ) -> tuple[NDArray[np.int64], dict[str, Any]]:
        with open_source(source) as view:
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
            return self._fill(view, schema, exprs, codes, n, on_out_of_domain)

    def _fill(
        self,
        view: SourceView,
        schema: Schema,
        exprs: list[str],
        codes: NDArray[np.int64],
        n: NDArray[np.int64],
        policy: OutOfDomainPolicy,
    ) -> tuple[NDArray[np.int64], dict[str, Any]]:
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
                        examples = _offending_values(view, attr.columns, exprs[axis], code)
                        what = "NULL" if code == NULL else "outside the domain"
                        shown = ", ".join(f"{v!r} ({c} rows)" for v, c in examples)
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
