"""Engines that turn data sources into counts (DuckDB embedded; Spark optional)."""

from __future__ import annotations

from dpcube.engine.base import POLICIES, Engine, OutOfDomainPolicy
from dpcube.errors import DataError


def get_engine(name: str | Engine = "duckdb") -> Engine:
    """The engine called ``name`` (``"duckdb"``), or ``name`` itself if it is an engine."""
    if isinstance(name, Engine):
        return name
    if name == "duckdb":
        from dpcube.engine.duckdb_engine import DuckDBEngine

        return DuckDBEngine()
    raise DataError(f"unknown engine {name!r}; available: duckdb")


__all__ = ["POLICIES", "Engine", "OutOfDomainPolicy", "get_engine"]
