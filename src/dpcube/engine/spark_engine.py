"""The scale-out engine: the counting SQL of :mod:`dpcube.engine.counting` run by Spark.

For tables that do not fit one machine: ``dpcube.histogram(spark_df, schema)`` (a Spark DataFrame
is counted on Spark without asking), or ``engine="spark"`` with a path Spark can read (Parquet,
CSV, a directory of them). Every counting path runs here as on DuckDB (histograms, data-cube
cuboids, census group sizes, user-level contribution bounding) and only the grouped counts (at
most one row per cell) come back to the driver. Requires the optional dependency ``pyspark``
(``pip install dpcube[spark]``) and a Java runtime.

The session is the DataFrame's own, or one built by :func:`spark_session` from the master URL and
configuration set by :func:`configure` (the CLI's ``--spark-master`` and ``--spark-conf``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.engine.base import Engine, OutOfDomainPolicy, is_spark_frame
from dpcube.engine.counting import ContributionBound, histogram_counts, unit_size_bins
from dpcube.engine.sql import SPARK, schema_column_kinds
from dpcube.errors import DataError
from dpcube.schema import Schema

#: The master URL (``None``: the environment's, else ``local[*]``) and configuration of the
#: sessions :func:`spark_session` builds by default.
_SESSION_DEFAULTS: dict[str, Any] = {"master": None, "conf": {}}


def parse_conf(pairs: Sequence[str]) -> dict[str, str]:
    """``["key=value", ...]`` (``--spark-conf``) as a dict; a pair without ``=`` is refused.

    >>> parse_conf(["spark.executor.memory=2g", "spark.sql.shuffle.partitions=8"])
    {'spark.executor.memory': '2g', 'spark.sql.shuffle.partitions': '8'}
    """
    conf: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise DataError(
                f"--spark-conf {pair!r} is not KEY=VALUE; write e.g. --spark-conf spark.executor.memory=4g"
            )
        conf[key.strip()] = value
    return conf


def configure(master: str | None = None, conf: dict[str, str] | None = None) -> None:
    """Set the master URL and configuration of new Spark sessions (``master=None`` keeps the
    environment's master: :func:`environment_master`, else ``local[*]``)."""
    _SESSION_DEFAULTS["master"] = master
    if conf is not None:
        _SESSION_DEFAULTS["conf"] = dict(conf)


def submit_args_master(submit_args: str) -> str | None:
    """The ``--master`` of a ``PYSPARK_SUBMIT_ARGS`` value (the spark-submit arguments PySpark
    passes when it starts the JVM itself), if any.

    >>> submit_args_master("--master yarn --conf a=b pyspark-shell")
    'yarn'
    >>> submit_args_master("--master=local[3] pyspark-shell"), submit_args_master("pyspark-shell")
    ('local[3]', None)
    """
    words = submit_args.split()
    for i, word in enumerate(words):
        if word == "--master" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--master="):
            return word.partition("=")[2]
    return None


def environment_master() -> str | None:
    """The master this process already has, which a new session must not override: that of a
    running SparkContext, of ``spark-submit`` (which starts the JVM before Python, with
    ``spark.master`` among its system properties, and tells PySpark through
    ``PYSPARK_GATEWAY_PORT``), or of ``PYSPARK_SUBMIT_ARGS``; ``None`` if none is set."""
    from pyspark import SparkConf, SparkContext

    running = SparkContext._active_spark_context
    if running is not None:
        return str(running.master)
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        SparkContext._ensure_initialized()  # connects to spark-submit's JVM (no context yet)
        master = SparkConf(_jvm=SparkContext._jvm).get("spark.master", None)
        if master:
            return str(master)
    return submit_args_master(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))


def local_defaults(master: str) -> dict[str, str]:
    """Settings for a ``local[N]`` master (one JVM is driver and only executor), each overridden
    by the caller's configuration; none for a cluster, whose own defaults stand.

    ``spark.sql.shuffle.partitions`` 4 per core instead of 200: the counting queries shuffle at
    most one row per cell (or per unit and core), and 200 partitions cost 200 tasks and 200
    shuffle files per map task on a machine that runs N at a time (adaptive execution, on by
    default, coalesces small partitions after the shuffle; it stays on).

    >>> local_defaults("local[2]")["spark.sql.shuffle.partitions"]
    '8'
    >>> local_defaults("spark://head:7077")
    {}
    """
    if not master.startswith("local"):
        return {}
    inside = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
    cores = int(inside) if inside.isdigit() else os.cpu_count() or 1
    return {"spark.sql.shuffle.partitions": str(4 * max(cores, 2))}


def _builder() -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise DataError("the Spark engine needs pyspark: pip install 'dpcube[spark]'") from None
    return SparkSession.builder


def spark_session(master: str | None = None, conf: dict[str, str] | None = None) -> Any:
    """A Spark session on ``master`` with ``conf`` passed to the builder.

    The master is ``master``, else :func:`configure`'s (``--spark-master``), else the one the
    process already has (:func:`environment_master`: a running session, ``spark-submit
    --master``, ``PYSPARK_SUBMIT_ARGS``), else ``local[*]``. A master given explicitly that
    differs from the process's own is refused (Spark would silently keep the running one).
    Local masters get :func:`local_defaults`; the web UI is off unless ``conf`` turns it on.
    """
    builder = _builder()
    requested = master or _SESSION_DEFAULTS["master"]
    existing = environment_master()
    if requested is not None and existing is not None and existing != requested:
        raise DataError(
            f"this process already runs Spark on {existing!r} (a running session or "
            f"spark-submit --master), so a session on {requested!r} cannot start; drop "
            "--spark-master (the running master is then used) or stop the running session"
        )
    url = requested or existing or "local[*]"
    if existing is None:
        builder = builder.master(url)  # else the running/submitted master stands untouched
    builder = builder.appName("dpcube")
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **local_defaults(url),
        **_SESSION_DEFAULTS["conf"],
        **(conf or {}),
    }
    if url.startswith("local") and "PYSPARK_PYTHON" not in os.environ:
        # Python workers on this machine run this interpreter (its pandas, pyarrow and dpcube),
        # not whatever `python3` is first on PATH (PySpark reads the variable when the context
        # starts); a cluster's workers keep their own setting
        os.environ["PYSPARK_PYTHON"] = sys.executable
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # Spark start-up failures (no Java, bad master) have many types
        raise DataError(
            f"cannot start Spark on {url!r}: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}"
        ) from exc
    session.sparkContext.setLogLevel("ERROR")
    return session


def local_session(cores: int = 2) -> Any:
    """A local Spark session for one machine (web UI off, few shuffle partitions)."""
    return spark_session(f"local[{cores}]", {"spark.sql.shuffle.partitions": str(4 * cores)})


class SparkTable:
    """A Spark DataFrame as a :class:`dpcube.engine.sql.Table`: SQL runs over it as ``src``."""

    dialect = SPARK

    def __init__(self, frame: Any) -> None:
        self.frame = frame
        self.session = frame.sparkSession

    @property
    def columns(self) -> dict[str, str]:
        return {f.name: f.dataType.simpleString().upper() for f in self.frame.schema.fields}

    def _run(self, query: str) -> Any:
        self.frame.createOrReplaceTempView("src")
        return self.session.sql(query)

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._run(query).collect()]

    def arrays(self, query: str) -> dict[str, NDArray[Any]]:
        table = self._run(query).toArrow()
        return {
            name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names
        }


@contextmanager
def reading(source: Any) -> Iterator[None]:
    """Spark's errors while reading ``source`` as one :class:`DataError` naming it."""
    from pyspark.errors import PySparkException

    name = f"data file {str(source)!r}" if isinstance(source, str | Path) else "the data"
    try:
        yield
    except PySparkException as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{name} could not be counted by Spark: {text}") from exc


class SparkEngine(Engine):
    """Counts with Spark SQL; a Spark DataFrame is counted in its own session, a path in the
    session given here or one started on first use (:func:`spark_session`)."""

    name = "spark"

    def __init__(self, session: Any = None) -> None:
        self._session = session

    @property
    def session(self) -> Any:
        if self._session is None:
            self._session = spark_session()
        return self._session

    def frame(
        self, source: Any, text_columns: tuple[str, ...] = (), numeric_columns: tuple[str, ...] = ()
    ) -> Any:
        """A Spark DataFrame for a DataFrame (Spark, pandas, Arrow) or a path (Parquet, CSV or a
        directory of Parquet). A CSV's ``text_columns`` are read as text (``"01"`` stays
        ``"01"``) and, with no rows, its ``numeric_columns`` as numbers, as on DuckDB."""
        if is_spark_frame(source):
            return source
        module = type(source).__module__.split(".")[0]
        if module in ("pandas", "pyarrow", "polars"):
            import pyarrow as pa

            if module == "pandas":
                source = pa.Table.from_pandas(source, preserve_index=False)
            elif module == "polars":
                source = source.to_arrow()
            return self.session.createDataFrame(source)
        if isinstance(source, str | Path):
            path = Path(source)
            if not path.exists():
                raise DataError(f"data file {str(path)!r} does not exist")
            name = path.name.lower()
            if path.is_dir() or name.endswith((".parquet", ".pq")):
                return self.session.read.parquet(str(path))
            if name.endswith((".csv", ".csv.gz")):
                return self._read_csv(str(path), text_columns, numeric_columns)
            raise DataError(f"the Spark engine reads Parquet or CSV, not {str(path)!r}")
        raise DataError(
            f"the Spark engine cannot read a {type(source).__name__}: pass a Spark, pandas or "
            "Polars DataFrame, an Arrow table or a path (CSV/Parquet)"
        )

    def _read_csv(
        self, path: str, text_columns: tuple[str, ...], numeric_columns: tuple[str, ...]
    ) -> Any:
        from pyspark.sql.types import DoubleType, StringType, StructField, StructType

        # RFC 4180 quoting ('"' doubled to escape), as DuckDB reads it
        reader = self.session.read.options(header=True, quote='"', escape='"')
        frame = reader.csv(path, inferSchema=True)
        empty = not frame.limit(1).collect()
        fields = [
            StructField(f.name, StringType())
            if f.name in text_columns
            else StructField(f.name, DoubleType())
            if empty and f.name in numeric_columns
            else f
            for f in frame.schema.fields
        ]
        if fields == list(frame.schema.fields):
            return frame
        return reader.csv(path, schema=StructType(fields))

    @contextmanager
    def open(
        self, source: Any, text_columns: tuple[str, ...] = (), numeric_columns: tuple[str, ...] = ()
    ) -> Iterator[SparkTable]:
        with reading(source):
            yield SparkTable(self.frame(source, text_columns, numeric_columns))

    def unit_sizes(
        self, source: Any, column: str, bits: int
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        with self.open(source) as table:
            return unit_size_bins(table, column, bits)

    def histogram(
        self,
        source: Any,
        schema: Schema,
        *,
        on_out_of_domain: OutOfDomainPolicy = "error",
        show_values: bool = False,
        bound: ContributionBound | None = None,
    ) -> tuple[NDArray[np.int64], dict[str, Any]]:
        with self.open(source, *schema_column_kinds(schema)) as table:
            return histogram_counts(table, schema, on_out_of_domain, show_values, bound)


# -- data set identity --------------------------------------------------------------------------


def _double_text_udf() -> Any:
    """Python's shortest round-trip text of a double (``repr``), which is DuckDB's CAST(d AS
    VARCHAR) for every finite non-integral double, NaN and infinity (Java's differs: 1.0E-5)."""
    from pyspark.sql.functions import pandas_udf

    # no type hints: pyspark reads them at run time and cannot under postponed annotations
    return pandas_udf(lambda x: x.map(lambda v: repr(float(v))), "string")  # type: ignore[call-overload]


def _normalised(column: str, sql_type: str) -> str:
    """Spark SQL for the text of one value exactly as
    :func:`dpcube.engine.duckdb_engine._normalised` writes it in DuckDB."""
    ident = SPARK.ident(column)
    base = sql_type.split("(")[0].upper()
    if base in SPARK.numeric_types:
        d = f"CAST({ident} AS DOUBLE)"
        text = (
            f"CASE WHEN abs({d}) < 1e18 AND {d} = round({d}) "
            f"THEN CAST(CAST({d} AS BIGINT) AS STRING) ELSE dpcube_double_text({d}) END"
        )
        text = f"CASE WHEN {ident} IS NULL THEN NULL ELSE {text} END"
    else:
        text = f"CAST({ident} AS STRING)"
    return f"coalesce(CAST(length({text}) AS STRING) || ':' || {text}, 'N')"


def _little_endian(hex_digits: str, start: int) -> str:
    """Spark SQL: the unsigned 64-bit little-endian number in 16 hex digits of ``hex_digits``
    from 1-based ``start`` (DuckDB's ``md5_number`` reads the digest's bytes little-endian)."""
    pairs = ", ".join(f"substr({hex_digits}, {start + 2 * k}, 2)" for k in reversed(range(8)))
    return f"CAST(conv(concat({pairs}), 16, 10) AS DECIMAL(38, 0))"


def fingerprint(frame: Any) -> str:
    """:func:`dpcube.engine.duckdb_engine.fingerprint` of a Spark DataFrame, in one Spark scan:
    the same normalised row text, MD5 halves summed and the same SHA-256 payload, so a Spark
    DataFrame and its CSV or Parquet file get the same identity (and the same budget ledger)."""
    from dpcube.engine.duckdb_engine import FINGERPRINT_VERSION

    table = SparkTable(frame)
    columns = sorted(table.columns.items())
    if not columns:
        raise DataError("the data has no columns, so it has no identity to charge a budget to")
    table.session.udf.register("dpcube_double_text", _double_text_udf())
    row = " || '|' || ".join(_normalised(c, t) for c, t in columns)
    ((upper, lower, n),) = table.rows(
        f"SELECT coalesce(sum({_little_endian('h', 17)}), 0), "
        f"coalesce(sum({_little_endian('h', 1)}), 0), count(*) "
        f"FROM (SELECT md5({row}) AS h FROM src) AS hashed"
    )
    payload = json.dumps(
        [FINGERPRINT_VERSION, [c for c, _ in columns], int(upper) % 2**64, int(lower) % 2**64, n]
    )
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()
