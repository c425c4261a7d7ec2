"""Time ``dpcube.histogram`` against a plain DuckDB ``GROUP BY`` on the same Parquet file.

The script writes a synthetic person table (``--rows``, default 10 million; columns age, sex,
occupation, income, state) as Parquet into a temporary directory, then times, in the same run and
on the same file, best of ``--repeat``:

- ``dpcube.histogram(path, schema)``: the dense int64 frequency matrix, with every value checked
  against the domain (NULLs and out-of-domain values are counted and reported);
- the baseline: one plain DuckDB query that bins the same columns the obvious way and groups by
  them (``SELECT age, sex, occupation, <income bin>, state, count(*) ... GROUP BY ALL``), fetched
  to numpy; no domain checks, no dense matrix.

    .venv/bin/python benchmarks/foundation/bench_histogram.py
    .venv/bin/python benchmarks/foundation/bench_histogram.py --rows 20000000 --keep /tmp/people.parquet
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import dpcube
from dpcube.histogram import histogram

OCCUPATIONS = {
    "Professional": ["Engineer", "Doctor", "Teacher", "Lawyer"],
    "Service": ["Cook", "Driver", "Cleaner"],
    "Manual": ["Builder", "Farmer", "Mechanic"],
    "Not working": ["Student", "Retired", "Unemployed"],
}
LEAVES = [leaf for group in OCCUPATIONS.values() for leaf in group]
STATES = ["Aurora", "Borealis", "Cascadia", "Deltana", "Eldora", "Fenwick"]
INCOME_EDGES = [0, 10_000, 20_000, 30_000, 45_000, 60_000, 80_000, 100_000, 150_000, 250_000, 10**9]

SCHEMA = dpcube.Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 100], "width": 1},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
            {"name": "occupation", "kind": "nominal", "hierarchy": OCCUPATIONS},
            {"name": "income", "kind": "ordinal", "edges": INCOME_EDGES},
            {"name": "state", "kind": "nominal", "categories": STATES},
        ]
    }
)


def write_people(path: Path, rows: int, seed: int = 0, chunk: int = 2_000_000) -> None:
    """A seeded synthetic person table, written in row groups of ``chunk`` rows."""
    rng = np.random.default_rng(seed)
    state_weights = np.array([0.3, 0.1, 0.25, 0.05, 0.2, 0.1])
    writer: pq.ParquetWriter | None = None
    try:
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            age = np.clip(rng.normal(40, 22, n), 0, 100).astype(np.int16)
            occupation = np.array(LEAVES)[rng.integers(0, len(LEAVES), n)]
            income = np.round(rng.lognormal(10.4, 0.8, n), 2)
            table = pa.table(
                {
                    "age": pa.array(age),
                    "sex": pa.array(np.where(rng.random(n) < 0.51, "F", "M")).dictionary_encode(),
                    "occupation": pa.array(occupation).dictionary_encode(),
                    "income": pa.array(np.minimum(income, 10**9 - 1)),
                    "state": pa.array(
                        np.array(STATES)[rng.choice(6, n, p=state_weights)]
                    ).dictionary_encode(),
                }
            )
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def plain_group_by(path: Path) -> int:
    """The baseline: bin and count with one plain DuckDB query, fetched to numpy."""
    whens = " ".join(f"WHEN income < {e} THEN {i}" for i, e in enumerate(INCOME_EDGES[1:]))
    con = duckdb.connect()
    try:
        result = con.sql(
            f"SELECT age, sex, occupation, CASE {whens} END AS income_bin, state, count(*) AS n "
            f"FROM read_parquet('{path}') GROUP BY ALL"
        ).fetchnumpy()
    finally:
        con.close()
    return int(np.asarray(result["n"]).sum())


def best(f: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the Parquet file here and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "people.parquet"
        if not path.exists():
            start = time.perf_counter()
            write_people(path, args.rows)
            print(f"wrote {args.rows:,} rows to {path} in {time.perf_counter() - start:.1f} s")
        size = path.stat().st_size / 2**20
        print(
            f"file: {size:.0f} MiB; schema {' x '.join(map(str, SCHEMA.shape))} = {SCHEMA.size:,} cells"
        )
        print(f"cores: {os.cpu_count()}, duckdb {duckdb.__version__}, best of {args.repeat}")
        h = histogram(path, SCHEMA)
        assert h.total == plain_group_by(path) == args.rows, "the two counts disagree"
        t_dpcube = best(lambda: histogram(path, SCHEMA), args.repeat)
        t_plain = best(lambda: plain_group_by(path), args.repeat)
        print(f"dpcube.histogram : {t_dpcube:7.3f} s")
        print(f"plain GROUP BY   : {t_plain:7.3f} s")
        print(f"ratio            : {t_dpcube / t_plain:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
