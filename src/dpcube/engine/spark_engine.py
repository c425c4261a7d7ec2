"""The scale-out engine: the same binning SQL (:mod:`dpcube.engine.sql`) run by Spark.

For tables that do not fit one machine: ``dpcube.histogram(source, schema, engine="spark")``
where ``source`` is a Spark DataFrame or a path Spark can read (Parquet, CSV, a directory of
them). Only the grouped counts (at most one row per cell) come back to the driver. Requires the
optional dependency ``pyspark`` (``pip install dpcube[spark]``) and a Java runtime.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.engine.base import Engine, OutOfDomainPolicy
from dpcube.engine.sql import SPARK, axis_expressions, fill_counts, offending_values_sql
from dpcube.errors import DataError
from dpcube.schema import Schema


def local_session(cores: int = 2) -> Any:
    """A local Spark session for one machine (web UI off, few shuffle partitions)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise DataError("the Spark engine needs pyspark: pip install 'dpcube[spark]'") from None
    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("dpcube")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(4 * cores))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


class SparkEngine(Engine):
    """Counts with Spark SQL; pass a session, or a local one is started on first use."""

    name = "spark"

    def __init__(self, session: Any = None) -> None:
        self._session = session

    @property
    def session(self) -> Any:
        if self._session is None:
            self._session = local_session()
        return self._session

    def frame(self, source: Any) -> Any:
        """A Spark DataFrame for a DataFrame or a path (Parquet, CSV or a directory of Parquet)."""
        if type(source).__module__.startswith("pyspark"):
            return source
        if isinstance(source, str | Path):
            path = Path(source)
            if not path.exists():
                raise DataError(f"data file {str(path)!r} does not exist")
            name = path.name.lower()
            if path.is_dir() or name.endswith((".parquet", ".pq")):
                return self.session.read.parquet(str(path))
            if name.endswith((".csv", ".csv.gz")):
                return self.session.read.csv(str(path), header=True, inferSchema=True)
            raise DataError(f"the Spark engine reads Parquet or CSV, not {str(path)!r}")
        raise DataError(
            f"the Spark engine cannot read a {type(source).__name__}: pass a Spark DataFrame or a path"
        )

    def histogram(
        self,
        source: Any,
        schema: Schema,
        *,
        on_out_of_domain: OutOfDomainPolicy = "error",
        show_values: bool = False,
    ) -> tuple[NDArray[np.int64], dict[str, Any]]:
        df = self.frame(source)
        columns = {f.name: f.dataType.simpleString().upper() for f in df.schema.fields}
        exprs = axis_expressions(schema, columns, SPARK)
        df.createOrReplaceTempView("src")
        select = ", ".join(f"{e} AS a{i}" for i, e in enumerate(exprs))
        keys = ", ".join(f"a{i}" for i in range(len(exprs)))
        grouped = self.session.sql(
            f"SELECT {select}, count(*) AS n FROM src GROUP BY {keys}"
        ).toArrow()
        codes = np.stack(
            [grouped.column(f"a{i}").to_numpy().astype(np.int64) for i in range(len(exprs))], axis=1
        )
        n = grouped.column("n").to_numpy().astype(np.int64)

        def examples(axis: int, code: int) -> list[tuple[Any, int]]:
            attr_columns = schema[schema.axes[axis][0]].columns
            rows = self.session.sql(
                offending_values_sql(attr_columns, exprs[axis], code, SPARK)
            ).collect()
            return [(r[0] if len(attr_columns) == 1 else tuple(r[:-1]), int(r[-1])) for r in rows]

        return fill_counts(schema, codes, n, on_out_of_domain, examples if show_values else None)
