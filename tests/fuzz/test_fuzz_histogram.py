"""Property (b): a generated CSV or Parquet file and a schema give, through dpcube.histogram,
counts equal to a pure-Python reference count, or a DPCubeError. Clean files (in-domain values
of the right type, no NULLs) must be accepted, whatever their names and categories hold
(unicode, quotes, commas, newlines, SQL-special text); files that break the policy must be
refused."""

from __future__ import annotations

import bisect
import csv
import math
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fuzz_harness import cases
from fuzz_strategies import Table, categories, table_for, valid_schema_dict
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from dpcube.errors import DPCubeError
from dpcube.histogram import histogram
from dpcube.schema import Schema

BAD = object()  # a value the attribute cannot take under any policy (wrong type)


def _code(attr: dict[str, Any], value: Any) -> tuple[str, int]:
    """("ok" | "null" | "below" | "above" | "wrong", bin) of one value under one attribute."""
    if value is None:
        return "null", -1
    if attr["kind"] == "nominal":
        cats = categories(attr)
        return ("ok", cats.index(value)) if value in cats else ("below", -1)
    if isinstance(value, str):
        return "wrong", -1
    if "edges" in attr:
        edges = attr["edges"]
        if value < edges[0]:
            return "below", -1
        if value >= edges[-1]:
            return "above", -1
        return "ok", bisect.bisect_right(edges, value) - 1
    lo, hi = attr["range"]
    width = attr["width"]
    n = math.floor((hi - lo) / width) + 1
    if value < lo:
        return "below", -1
    if value > hi:
        return "above", -1
    return "ok", min(math.floor((value - lo) / width), n - 1)


def _spatial(attr: dict[str, Any], lat: Any, lon: Any) -> list[tuple[str, int]]:
    if lat is None or lon is None:
        return [("null", -1), ("null", -1)]
    lat0, lon0, lat1, lon1 = attr["bbox"]
    out = []
    for v, lo, hi, n in (
        (lat, lat0, lat1, attr["resolution"][0]),
        (lon, lon0, lon1, attr["resolution"][1]),
    ):
        if v < lo:
            out.append(("below", -1))
        elif v > hi:
            out.append(("above", -1))
        else:
            out.append(("ok", min(math.floor((v - lo) / (hi - lo) * n), n - 1)))
    return out


def reference(
    schema_d: dict[str, Any], table: Table, policy: str
) -> dict[tuple[int, ...], int] | None:
    """Counts per cell (sparse), or None where the file must be refused."""
    if table.wrong_type:
        return None
    counts: Counter[tuple[int, ...]] = Counter()
    for i in range(table.rows):
        codes: list[tuple[str, int]] = []
        clip_ok = True
        for attr in schema_d["attributes"]:
            if attr["kind"] == "spatial":
                lat, lon = (table.columns[c][i] for c in attr["columns"])
                codes.extend((*c, attr) for c in _spatial(attr, lat, lon))  # type: ignore[misc]
                continue
            codes.append((*_code(attr, table.columns[attr.get("column", attr["name"])][i]), attr))  # type: ignore[arg-type]
        cells: list[int] = []
        drop = False
        for what, b, attr in codes:  # type: ignore[misc]
            if what == "ok":
                cells.append(b)
                continue
            if policy == "drop":
                drop = True
                continue
            if policy == "clip" and what in ("below", "above") and attr["kind"] != "nominal":
                cells.append(0 if what == "below" else _axis_size(attr, len(cells), codes) - 1)
                continue
            clip_ok = False
        if not clip_ok:
            return None
        if not drop:
            counts[tuple(cells)] += 1
    return dict(counts)


def _axis_size(attr: dict[str, Any], axis: int, codes: list[Any]) -> int:
    if attr["kind"] == "spatial":
        first = next(i for i, c in enumerate(codes) if c[2] is attr)
        return int(attr["resolution"][axis - first])
    if "edges" in attr:
        return len(attr["edges"]) - 1
    lo, hi = attr["range"]
    return math.floor((hi - lo) / attr["width"]) + 1


def write(table: Table, path: Path, fmt: str) -> None:
    if fmt == "csv":
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(list(table.columns))
            for i in range(table.rows):
                w.writerow(
                    [
                        "" if c[i] is None else (repr(c[i]) if isinstance(c[i], float) else c[i])
                        for c in table.columns.values()
                    ]
                )
        return
    arrays = {}
    for name, values in table.columns.items():
        kinds = {type(v) for v in values if v is not None}
        if kinds <= {int}:
            arrays[name] = pa.array(values, type=pa.int64())
        elif kinds <= {int, float}:
            arrays[name] = pa.array(
                [None if v is None else float(v) for v in values], type=pa.float64()
            )
        else:
            arrays[name] = pa.array(
                [None if v is None else str(v) for v in values], type=pa.string()
            )
    pq.write_table(pa.table(arrays), path)


def schema_and_table() -> st.SearchStrategy[tuple[dict[str, Any], Table, bool]]:
    return valid_schema_dict().flatmap(
        lambda d: st.booleans().flatmap(
            lambda dirty: table_for(d, dirty).map(lambda t: (d, t, dirty))
        )
    )


def _columns_distinct(d: dict[str, Any]) -> bool:
    cols = [
        c
        for a in d["attributes"]
        for c in (a["columns"] if a["kind"] == "spatial" else [a["name"]])
    ]
    return len(set(cols)) == len(cols) and len({c.lower() for c in cols}) == len(cols)


def _check(fmt: str, seen: Counter[str], only_plain_names: bool) -> None:
    @settings(max_examples=cases(100))
    @given(schema_and_table(), st.sampled_from(["error", "drop", "clip"]))
    def prop(case: tuple[dict[str, Any], Table, bool], policy: str) -> None:
        d, table, dirty = case
        assume(_columns_distinct(d))
        if only_plain_names:
            assume(all(c.isidentifier() for c in table.columns))
        schema = Schema.from_dict(d)
        expected = reference(d, table, policy)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"data.{fmt}"
            write(table, path, fmt)
            try:
                hist = histogram(path, schema, on_out_of_domain=policy)  # type: ignore[arg-type]
            except DPCubeError as exc:
                seen["refused"] += 1
                event("refused")
                # DuckDB's CSV reader cannot read a header whose names hold line breaks, trims the
                # spaces around names and calls a blank header cell column0: such a file is refused
                # in one line naming the column (documented in docs/reliability.md section 7).
                broken_header = fmt == "csv" and any(
                    "\n" in c or "\r" in c or c != c.strip() or not c for c in table.columns
                )
                assert expected is None or dirty or table.rows == 0 or broken_header, (
                    f"a clean {fmt} file was refused: {exc}"
                )
                return
        assert expected is not None, "a file that breaks the policy was accepted"
        got = {
            tuple(int(i) for i in k): int(hist.counts[k])
            for k in zip(*hist.counts.nonzero(), strict=True)
        }
        assert got == expected
        seen["accepted"] += 1
        event("accepted")

    prop()
    total = sum(seen.values())
    assert seen["accepted"] >= 0.25 * total and seen["refused"] >= 0.05 * total, seen


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_histogram_equals_reference_or_dpcube_error(fmt: str) -> None:
    _check(fmt, Counter(), only_plain_names=False)


def test_csv_histogram_with_plain_column_names() -> None:
    """The CSV half of the property over identifier-like column names (passes today)."""
    _check("csv", Counter(), only_plain_names=True)
