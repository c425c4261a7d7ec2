"""Errors that dpcube raises on bad input.

Every error is a :class:`DPCubeError`; its message is one readable line that names what is wrong
(the column, the value, the count) and how to fix it. The CLI prints exactly that line.
"""

from __future__ import annotations


class DPCubeError(Exception):
    """Base class of every error dpcube raises on purpose."""


class SchemaError(DPCubeError):
    """The schema is malformed: unknown kind, duplicate category, empty bin, bad hierarchy."""


class DataError(DPCubeError):
    """The data does not fit the schema: unknown column, NULL, out-of-domain value, wrong type."""


class DomainTooLargeError(SchemaError):
    """The domain has more cells than may be materialised as a dense array."""


class ParameterError(DataError, ValueError):
    """A mechanism parameter is unknown, of the wrong type or outside its declared domain."""


class SpentBudgetError(DPCubeError):
    """A release failed after its budget was charged: the budget is spent, nothing was released.

    Every check that does not depend on the noise runs before the charge, so this means a bug or
    an outside failure (memory taken by another process); the original exception is the cause.
    """


class ResourceError(DPCubeError):
    """A release would need more memory or work than this machine or the declared limits allow."""


class BudgetError(DPCubeError):
    """A privacy parameter is invalid, or a release would overspend the data set's budget."""


class QueryError(DPCubeError):
    """A query names an unknown attribute or category, or an interval outside the domain."""


class ReleaseError(DPCubeError):
    """A release directory is missing, incomplete or of an unknown kind."""


class UsageError(DPCubeError):
    """A command-line argument is malformed: a ``--param`` of the wrong type, a negative size."""


#: Libraries whose exceptions mean bad input (a file they could not read), by top-level module.
_INPUT_LIBRARIES = {
    "duckdb": "DuckDB",
    "_duckdb": "DuckDB",
    "pyarrow": "Arrow",
    "sqlite3": "SQLite",
    "_sqlite3": "SQLite",
    "yaml": "YAML",
}


def library_error_line(exc: BaseException) -> str | None:
    """One line for an exception from a library that reads the user's input (DuckDB, Arrow,
    SQLite, YAML) or from the file system; None for anything else (a bug in dpcube)."""
    if isinstance(exc, OSError):
        path = exc.filename if exc.filename is not None else ""
        reason = exc.strerror or str(exc) or type(exc).__name__
        return f"cannot use {str(path)!r}: {reason}" if path else reason
    library = _INPUT_LIBRARIES.get(type(exc).__module__.split(".")[0])
    if library is None:
        return None
    text = str(exc).strip()
    if library == "YAML":
        from dpcube.schema_yaml import yaml_error_line

        text = yaml_error_line(exc)  # type: ignore[arg-type]
    first = text.splitlines()[0] if text else type(exc).__name__
    return f"{library} could not read the input: {first}"
