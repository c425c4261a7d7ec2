"""One workload on one engine, in its own process (run by ``bench_scale.py``, which measures it).

    python benchmarks/engine/scale_jobs.py --engine duckdb --workload histogram --data PATH

Prints one JSON line: ``seconds`` (the workload, wall, inside this process), ``cpu_s`` (CPU
seconds of this process and its descendants during the workload: the load-independent figure on
a shared machine), ``startup_s``
(DuckDB connection or Spark session) and ``check`` (a digest of the result, equal across engines
when both computed the same thing).

Workloads, all on the person table of :mod:`scale_data`:

* ``histogram``: :func:`dpcube.histogram` of :func:`scale_data.histogram_schema` (12,480 cells).
* ``datacube``: a seeded :class:`dpcube.mechanisms.datacube.DataCube` release (BMax, all 16
  cuboids of :func:`scale_data.cube_schema` published, L2 consistency) of ``CubeSource(source,
  schema)``: the measured cuboids are counted by one ``GROUP BY GROUPING SETS`` on either engine
  (:func:`dpcube.engine.counting.cuboid_counts`). The noise is seeded (not for publication), so
  the two releases are equal when the counts are.
* ``census``: the group-size table (unit -> size -> (county, size), top-coded at ``--max-size``)
  over the hierarchy nation -> state -> county, by :func:`dpcube.group_sizes` on either engine;
  ``--census-path onepass`` runs :func:`spark_group_sizes` below on Spark instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import proc_memory
import scale_data

import dpcube
from dpcube.errors import DataError
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.table import GroupSizeTable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # experiments/ beside src/
from experiments.census_generator import census_hierarchy


def digest(*arrays: Any) -> str:
    """A short digest of arrays (to compare engines' results without printing them)."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    return h.hexdigest()[:16]


def spark_session(cores: int, driver_memory: str, conf: dict[str, str], work_dir: Path) -> Any:
    """The library's local Spark session (:func:`dpcube.engine.spark_engine.spark_session`, with
    its defaults for local masters) with a driver memory cap (local mode: the driver JVM is the
    only executor, so ``spark.driver.memory`` caps the heap of all the counting)."""
    from dpcube.engine.spark_engine import spark_session as library_session

    settings = {
        "spark.driver.memory": driver_memory,
        "spark.local.dir": str(work_dir / "spark-tmp"),
        **conf,
    }
    return library_session(f"local[{cores}]", settings)


def spark_group_sizes(
    frame: Any,
    *,
    unit: str,
    region: str,
    hierarchy: RegionHierarchy,
    max_size: int,
    top_code: bool = False,
) -> GroupSizeTable:
    """Group-size table of a Spark DataFrame of persons, with the checks of
    :func:`dpcube.group_sizes` (NULLs, a unit in two regions, unknown regions, too large a group)
    in the same single job.

    The leaf names are broadcast and joined to give each person an integer region id, so the
    per-unit aggregation ``count, min(id), max(id)`` has fixed-width buffers (Spark's hash
    aggregate, with a map-side partial aggregation: units stored contiguously shrink to one row
    per unit before the shuffle); the units are then grouped by (region, size) and only those
    rows (at most leaves x max_size, plus the error counters) reach the driver.

    (The benchmark's own PySpark job, to compare with ``dpcube.group_sizes`` on Spark, whose SQL
    (:func:`dpcube.engine.counting.group_size_counts`) counts the regions and NULLs in one light
    scan, then the units by a 64-bit hash of the region text in one heavy scan.)
    """
    from pyspark.sql import functions as F

    session = frame.sparkSession
    leaves = [str(n) for n in np.asarray(hierarchy.names)[hierarchy.leaves]]
    ids = session.createDataFrame(list(enumerate(leaves)), "rid INT, leaf STRING")
    persons = frame.select(F.col(unit).alias("u"), F.col(region).cast("string").alias("leaf")).join(
        F.broadcast(ids), on="leaf", how="left"
    )
    units = persons.groupBy("u").agg(
        F.count(F.lit(1)).alias("size"),
        F.count("rid").alias("known"),
        F.min("rid").alias("r0"),
        F.max("rid").alias("r1"),
    )
    bad_unit = F.col("u").isNull()
    unknown = F.col("known") < F.col("size")
    spread = F.col("r0") != F.col("r1")
    size = F.least(F.col("size"), F.lit(max_size)) if top_code else F.col("size")
    rows = (
        units.select(
            F.when(bad_unit | unknown | spread, F.lit(-1)).otherwise(F.col("r0")).alias("rid"),
            size.alias("size"),
            F.col("size").alias("persons"),
            bad_unit.cast("int").alias("null_unit"),
            (unknown & ~bad_unit).cast("int").alias("unknown"),
            (spread & ~unknown & ~bad_unit).cast("int").alias("spread"),
        )
        .groupBy("rid", "size")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.sum("persons").alias("persons"),
            F.sum("null_unit").alias("null_unit"),
            F.sum("unknown").alias("unknown"),
            F.sum("spread").alias("spread"),
        )
        .toPandas()
    )
    bad = rows[rows["rid"] < 0]
    if int(bad["null_unit"].sum()):
        raise DataError(f"some rows have a NULL {unit!r}; drop or fill them")
    if int(bad["unknown"].sum()):
        raise DataError(
            f"{int(bad['unknown'].sum()):,} units have a NULL {region!r} or a value missing from "
            "the hierarchy (values not shown); add them to the hierarchy or fix the data"
        )
    if int(bad["spread"].sum()):
        raise DataError(
            f"{int(bad['spread'].sum()):,} units (column {unit!r}) span several leaf regions of "
            f"column {region!r}; each group must lie in exactly one leaf region"
        )
    good = rows[rows["rid"] >= 0]
    table_frame = good.assign(region=[leaves[i] for i in good["rid"]])[
        ["region", "size", "count", "persons"]
    ]
    table = GroupSizeTable.from_frame(table_frame, hierarchy, max_size=max_size, top_code=top_code)
    table.persons = int(table_frame["persons"].sum())
    return table


#: Rows kept per county by the ``histogram-unit`` workload (counties hold from a few rows to a
#: few percent of the table, so most are cut: every unit's partition is sorted by its keys).
UNIT_BOUND = 100


def tree_cpu() -> float:
    """CPU seconds so far of this process and its descendants (the Spark JVM)."""
    return sum(cpu for cpu, _ in proc_memory.tree(os.getpid()).values())


def run(args: argparse.Namespace) -> dict[str, Any]:
    work_dir = Path(args.work_dir)
    start = time.perf_counter()
    if args.engine == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.execute(f"SET memory_limit = '{args.memory_limit}'")
        con.execute(f"SET threads = {int(args.cores)}")
        con.execute(f"SET temp_directory = '{work_dir / 'duckdb-tmp'}'")
        con.execute("SET enable_progress_bar = false")
        source: Any = dpcube.SQL(f"SELECT * FROM read_parquet('{args.data}')", con)
        engine: Any = "duckdb"
    else:
        conf = dict(item.split("=", 1) for item in args.spark_conf)
        session = spark_session(args.cores, args.driver_memory, conf, work_dir)
        from dpcube.engine.spark_engine import SparkEngine

        source = session.read.parquet(str(args.data))
        engine = SparkEngine(session)
    startup = time.perf_counter() - start
    start = time.perf_counter()
    cpu = tree_cpu()
    if args.workload == "histogram":
        hist = dpcube.histogram(
            source, scale_data.histogram_schema(), engine=engine, dataset="bench-scale"
        )
        check = {"rows": hist.total, "digest": digest(hist.counts)}
    elif args.workload == "histogram-unit":
        # the same histogram, each county (the privacy unit) first bounded to UNIT_BOUND rows in
        # the engine (a window over the unit's partition, dpcube.engine.counting.bounded_rows_sql);
        # a fixed bounding key, so that both engines keep the same rows
        hist = dpcube.histogram(
            source,
            scale_data.histogram_schema(),
            engine=engine,
            dataset="bench-scale",
            privacy_unit="county",
            max_rows_per_unit=UNIT_BOUND,
            bounding_seed="bench-scale",
        )
        check = {"rows": hist.total, "digest": digest(hist.counts)}
    elif args.workload == "datacube":
        from dpcube.mechanisms.datacube.mechanism import CubeSource, DataCube

        schema = scale_data.cube_schema()
        cube = DataCube(1.0, method="bmax", consistency="l2")
        data = CubeSource(source, schema, name="bench-scale")
        release = cube.release(data, random_state=0)
        published = [release.cuboid(list(names)) for names in release.published]
        check = {"cuboids": len(published), "digest": digest(*published)}
    elif args.workload in ("census", "census-full"):
        h = census_hierarchy(0)
        unit, region = ("household", "county") if args.workload == "census" else ("unit", "region")
        top_code = args.workload == "census"
        if args.engine == "spark" and args.census_path == "onepass":
            table = spark_group_sizes(
                source, unit=unit, region=region, hierarchy=h, max_size=args.max_size,
                top_code=top_code,
            )  # fmt: skip
        else:
            parents = {
                n: (None if p < 0 else h.names[p]) for n, p in zip(h.names, h.parent, strict=True)
            }
            table = dpcube.group_sizes(
                source, unit=unit, region=region, hierarchy=parents, max_size=args.max_size,
                top_code=top_code, dataset="bench-scale",
            )  # fmt: skip
        check = {"groups": table.groups, "persons": table.persons, "digest": digest(table.counts)}
    else:
        raise SystemExit(f"unknown workload {args.workload!r}")
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cpu_s": tree_cpu() - cpu,
        "startup_s": startup,
        "check": check,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", choices=["duckdb", "spark"], required=True)
    p.add_argument(
        "--workload",
        choices=["histogram", "histogram-unit", "datacube", "census", "census-full"],
        required=True,
    )
    p.add_argument("--data", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--memory-limit", default="8GB", help="DuckDB memory_limit")
    p.add_argument("--driver-memory", default="6g", help="spark.driver.memory")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--max-size", type=int, default=10)
    p.add_argument("--census-path", choices=["library", "onepass"], default="library")
    print(json.dumps(run(p.parse_args())))


if __name__ == "__main__":
    main()
