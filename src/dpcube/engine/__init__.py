"""Engines that turn data sources into counts: DuckDB (embedded, the default) and Spark.

Every counting path (:mod:`dpcube.engine.counting`) runs on either; a Spark DataFrame is counted
on Spark unless an engine is named.
"""

from __future__ import annotations

from typing import Any

from dpcube.engine.base import POLICIES, Engine, OutOfDomainPolicy, is_spark_frame
from dpcube.errors import DataError

ENGINES: tuple[str, ...] = ("duckdb", "spark")


def get_engine(name: str | Engine | None = None, source: Any = None) -> Engine:
    """The engine called ``name`` (``"duckdb"`` or ``"spark"``), or ``name`` itself if it is one.

    With ``name=None`` the engine suits ``source``: Spark for a Spark DataFrame, else DuckDB.
    """
    if isinstance(name, Engine):
        return name
    if name is None:
        name = "spark" if is_spark_frame(source) else "duckdb"
    if name == "duckdb":
        from dpcube.engine.duckdb_engine import DuckDBEngine

        return DuckDBEngine()
    if name == "spark":
        from dpcube.engine.spark_engine import SparkEngine

        return SparkEngine()
    raise DataError(f"unknown engine {name!r}; available: {', '.join(ENGINES)}")


def fingerprint(source: Any) -> str:
    """The identity of a data set's records (:func:`dpcube.engine.duckdb_engine.fingerprint`);
    a Spark DataFrame's is computed on Spark to the same definition."""
    if is_spark_frame(source):
        from dpcube.engine.spark_engine import fingerprint as _spark_fingerprint

        return _spark_fingerprint(source)
    from dpcube.engine.duckdb_engine import fingerprint as _fingerprint

    return _fingerprint(source)


__all__ = [
    "ENGINES",
    "POLICIES",
    "Engine",
    "OutOfDomainPolicy",
    "fingerprint",
    "get_engine",
    "is_spark_frame",
]
