"""Engines that turn data sources into counts: DuckDB (embedded, the default) and Spark."""

from __future__ import annotations

from typing import Any

from dpcube.engine.base import POLICIES, Engine, OutOfDomainPolicy
from dpcube.errors import DataError


def get_engine(name: str | Engine = "duckdb") -> Engine:
    """The engine called ``name`` (``"duckdb"`` or ``"spark"``), or ``name`` itself if it is one."""
    if isinstance(name, Engine):
        return name
    if name == "duckdb":
        from dpcube.engine.duckdb_engine import DuckDBEngine

        return DuckDBEngine()
    if name == "spark":
        from dpcube.engine.spark_engine import SparkEngine

        return SparkEngine()
    raise DataError(f"unknown engine {name!r}; available: duckdb, spark")


def fingerprint(source: Any) -> str:
    """The identity of a data set's records (:func:`dpcube.engine.duckdb_engine.fingerprint`)."""
    from dpcube.engine.duckdb_engine import fingerprint as _fingerprint

    return _fingerprint(source)


__all__ = ["POLICIES", "Engine", "OutOfDomainPolicy", "fingerprint", "get_engine"]
