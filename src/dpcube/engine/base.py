"""The engine interface: how a data source becomes counts.

Mechanisms never touch raw rows; they receive a :class:`dpcube.Histogram` (or, for mechanisms
that need other aggregates, ask an engine). An engine turns a source and a schema into the dense
frequency matrix, applying the out-of-domain policy:

- ``"error"`` (default): NULL or out-of-domain values raise :class:`dpcube.errors.DataError`
  naming every such column with the rows of each cause (below, above, NULL, unknown category);
  example values, which are private data, only with ``show_values=True`` (``--show-values``);
- ``"drop"``: such rows are not counted; the count per attribute goes into the release report;
- ``"clip"``: ordinal and spatial values outside the range are counted in the nearest edge bin;
  the count per attribute is reported (NULLs and unknown categories still raise).

DuckDB (:mod:`dpcube.engine.duckdb_engine`) is the embedded default; a Spark engine implements
the same methods; every counting path runs on either (:mod:`dpcube.engine.counting`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcube.engine.policy import POLICIES as POLICIES
from dpcube.engine.policy import OutOfDomainPolicy as OutOfDomainPolicy
from dpcube.engine.policy import policy_report as policy_report
from dpcube.schema import Schema

if TYPE_CHECKING:
    from dpcube.engine.contribution import ContributionBound
    from dpcube.engine.sql import Table


def is_spark_frame(source: Any) -> bool:
    """Whether ``source`` is a Spark DataFrame (told without importing pyspark).

    >>> is_spark_frame("people.csv")
    False
    """
    return any(
        k.__name__ == "DataFrame" and k.__module__.startswith("pyspark.sql")
        for k in type(source).__mro__
    )


class Engine(ABC):
    name: str

    @abstractmethod
    def open(
        self, source: Any, text_columns: tuple[str, ...] = (), numeric_columns: tuple[str, ...] = ()
    ) -> AbstractContextManager[Table]:
        """``source`` opened as a :class:`~dpcube.engine.sql.Table` (SQL over ``src``).

        ``text_columns`` are read as text from a CSV file (the columns of nominal attributes);
        ``numeric_columns`` as numbers from a CSV file with a header and no rows."""

    @abstractmethod
    def unit_sizes(
        self, source: Any, column: str, bits: int
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Units and their rows per bin of ``floor(log2 rows)`` of each unit of ``column``
        (:func:`dpcube.engine.counting.unit_size_bins`): exact, the curator's only."""

    @abstractmethod
    def histogram(
        self,
        source: Any,
        schema: Schema,
        *,
        on_out_of_domain: OutOfDomainPolicy = "error",
        show_values: bool = False,
        bound: ContributionBound | None = None,
    ) -> tuple[NDArray[np.int64], dict[str, Any]]:
        """Counts in the schema's shape, and the data report (rows, dropped, clipped).

        Rows the policy does not cover raise :func:`dpcube.engine.sql.out_of_domain_error`; the
        offending values (private data) are in its message only when ``show_values``. With
        ``bound`` each privacy unit's rows are bounded first
        (:func:`dpcube.engine.counting.bound_units`)."""
