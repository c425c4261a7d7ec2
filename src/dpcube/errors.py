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


class BudgetError(DPCubeError):
    """A privacy parameter is invalid, or a release would overspend the data set's budget."""


class QueryError(DPCubeError):
    """A query names an unknown attribute or category, or an interval outside the domain."""


class ReleaseError(DPCubeError):
    """A release directory is missing, incomplete or of an unknown kind."""
