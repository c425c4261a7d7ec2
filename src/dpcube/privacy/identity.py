"""The identity a ledger is kept under: a curator's name for a data set, or the fingerprint of
the records in a file."""

from __future__ import annotations

import os
from pathlib import Path

from dpcube.errors import BudgetError, DataError


def name_identity(name: str) -> str:
    """The identity of a data set named by its curator."""
    name = str(name).strip()
    if not name:
        raise BudgetError("a data set name must not be empty (--dataset NAME)")
    return name if name.startswith(("name:", "sha256:")) else f"name:{name}"


def identity_of_path(data: str | os.PathLike[str]) -> str:
    """The identity of the records in the file (or Parquet directory) ``data``; a missing path is refused."""
    from dpcube.engine import fingerprint

    if not Path(data).exists():
        raise DataError(
            f"data file {str(data)!r} does not exist; a ledger belongs to existing data"
        )
    return fingerprint(data)
