"""Real files read: every column type DuckDB infers is read and fingerprinted.

A column the schema does not use must never stop a release, whatever its type: the values are
normalised in SQL (cast to text inside DuckDB), so no Python conversion of a timestamp with time
zone (which needs pytz), an interval, a list or a blob is ever made.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

import dpcube
from dpcube.cli.main import main
from dpcube.engine import fingerprint
from dpcube.engine.duckdb_engine import _library_message, open_source
from dpcube.errors import DataError
from dpcube.schema import Schema

#: One row per value: every type DuckDB infers or a Parquet file holds, with NULLs.
ALL_TYPES_SQL = """
SELECT i AS a,
  TIMESTAMPTZ '2013-01-01 05:00:00+00' + i * INTERVAL 1 HOUR AS zoned,
  TIMESTAMP '2013-01-01 05:00:00.25' AS stamp,
  TIMESTAMP_NS '2013-01-01 05:00:00.123456789' AS stamp_ns,
  DATE '2013-01-01' + CAST(i AS INTEGER) AS day,
  TIME '05:00:00' AS clock,
  INTERVAL (i) DAY AS span,
  CAST(i / 7 AS DECIMAL(18, 3)) AS amount,
  [i, i + 1] AS list,
  {'x': i, 'y': 'a'} AS record,
  MAP {'k': i} AS mapping,
  CAST('ab' AS BLOB) AS bytes,
  repeat('x', 100000) || CAST(i AS VARCHAR) AS long_text,
  CASE WHEN i % 2 = 0 THEN NULL ELSE i END AS sometimes,
  CAST(NULL AS VARCHAR) AS never,
  CAST(i AS UTINYINT) AS small
FROM range(5) t(i)
"""

#: The CSV the report gave: a UTC timestamp column the schema does not use.
ZONED_CSV = "a,when,x\n1,2013-01-01T05:00:00Z,3\n2,2013-01-02T05:00:00Z,4\n0,,5\n"

SCHEMA = {"attributes": [{"name": "a", "kind": "ordinal", "range": [0, 5], "width": 1}]}


def _files(tmp_path: Path) -> dict[str, Path]:
    parquet = tmp_path / "all.parquet"
    duckdb.sql(f"COPY ({ALL_TYPES_SQL}) TO '{parquet}' (FORMAT parquet)")
    typed_csv = tmp_path / "typed.csv"
    # A CSV of the types a CSV can carry as text (DuckDB's sniffer infers them back).
    duckdb.sql(
        "COPY (SELECT a, zoned, stamp, day, clock, amount, long_text, sometimes, never "
        f"FROM ({ALL_TYPES_SQL})) TO '{typed_csv}' (HEADER)"
    )
    zoned = tmp_path / "zoned.csv"
    zoned.write_text(ZONED_CSV)
    return {"parquet": parquet, "typed_csv": typed_csv, "zoned_csv": zoned}


def test_every_column_type_is_read_and_fingerprinted(tmp_path: Path) -> None:
    files = _files(tmp_path)
    with open_source(files["typed_csv"]) as view:
        types = view.columns
    # The CSV sniffer infers the types the issue names (so the test reads what a user's file gives).
    assert types["zoned"] == "TIMESTAMP WITH TIME ZONE" and types["day"] == "DATE"
    assert types["stamp"] == "TIMESTAMP" and types["clock"] == "TIME"
    for name, path in files.items():
        identity = fingerprint(path)
        assert identity.startswith("sha256:") and identity == fingerprint(str(path)), name
        h = dpcube.histogram(str(path), Schema.from_dict(SCHEMA), on_out_of_domain="drop")
        assert h.counts.sum() == (3 if name == "zoned_csv" else 5), name
    # A changed value of an unusual type changes the identity (it is hashed, not skipped).
    other = tmp_path / "other.parquet"
    duckdb.sql(
        f"COPY (SELECT * REPLACE (CASE WHEN a = 4 THEN INTERVAL 9 DAY ELSE span END AS span) "
        f"FROM ({ALL_TYPES_SQL})) TO '{other}' (FORMAT parquet)"
    )
    assert fingerprint(other) != fingerprint(files["parquet"])


def test_zoned_timestamps_fingerprint_in_utc_whatever_the_machine(tmp_path: Path) -> None:
    """The same instants written in two zones are the same records; the identity does not
    depend on the time zone of the machine that computes it."""
    utc, shifted = tmp_path / "utc.csv", tmp_path / "shifted.csv"
    utc.write_text("i,t\n1,2013-01-01T05:00:00Z\n2,2013-01-01T06:30:00.5Z\n")
    shifted.write_text("i,t\n1,2013-01-01T00:00:00-05:00\n2,2013-01-01T01:30:00.5-05:00\n")
    assert fingerprint(utc) == fingerprint(shifted)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'America/New_York'")
    relation = con.sql("SELECT * FROM read_csv($path, header = true)", params={"path": str(utc)})
    assert fingerprint(relation) == fingerprint(utc)


def test_fingerprint_of_existing_types_is_unchanged(tmp_path: Path) -> None:
    """Integers, floats, text, dates, plain timestamps and NULLs keep the identity the previous
    normalisation gave (a changed one would open a fresh budget for an existing data set). The
    figures were computed with the previous code on these exact files."""
    parquet = tmp_path / "pin.parquet"
    duckdb.sql(
        "COPY (SELECT * FROM (VALUES (1, 2.5, 'a', DATE '2013-01-02', TIMESTAMP '2013-01-01 05:00:00'), "
        "(2, 3.0, NULL, NULL, NULL), (NULL, -1e300, 'long text, with comma', DATE '1999-12-31', "
        "TIMESTAMP '2013-01-01 05:00:00.25')) t(i, x, s, d, ts)) "
        f"TO '{parquet}' (FORMAT parquet)"
    )
    zoned = tmp_path / "pintz.parquet"
    duckdb.sql(
        "COPY (SELECT * FROM (VALUES (1, TIMESTAMPTZ '2013-01-01 05:00:00+00'), "
        "(2, TIMESTAMPTZ '2013-01-01 05:00:00.5+00')) t(i, tz)) "
        f"TO '{zoned}' (FORMAT parquet)"
    )
    csv = tmp_path / "pin.csv"
    csv.write_text('i,x,s\n1,2.5,a\n2,3.0,\n,-1e300,"long text, with comma"\n')
    assert fingerprint(parquet) == (
        "sha256:3f8e840fe62bf7908cbd1e47bc07dee9be208f896f481a625a599221f60ef59e"
    )
    assert fingerprint(csv) == (
        "sha256:b9f0b7c7d23d9dc9862827176b807ab50d0abaf2809804cc99a4a24c8cf70719"
    )
    # A UTC machine's figure under the previous code (which on other machines used their zone).
    assert fingerprint(zoned) == (
        "sha256:dbe0a8353c41fd1c5611f6033453631ce4f48eb68fd8d923a7d5543ffbcf22ab"
    )


def test_cli_releases_a_csv_with_a_utc_timestamp(tmp_path: Path) -> None:
    data = tmp_path / "stops.csv"
    data.write_text(ZONED_CSV)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    out = tmp_path / "rel"
    code = main(
        ["release", str(data), "--schema", str(schema), "--mechanism", "identity",
         "--epsilon", "1", "--total-epsilon", "2", "--out", str(out)]
    )  # fmt: skip
    assert code == 0 and (out / "manifest.json").exists()


def test_library_errors_are_shown_whole_with_their_cause() -> None:
    try:
        try:
            raise ModuleNotFoundError("No module named 'pytz'")
        except ModuleNotFoundError as cause:
            raise duckdb.InvalidInputException(
                "Invalid Input Error: Required module 'pytz' failed to import, due to the "
                "following Python exception:\n"
            ) from cause
    except duckdb.Error as exc:
        message = _library_message(exc)
    assert message == (
        "Invalid Input Error: Required module 'pytz' failed to import, due to the following "
        "Python exception: No module named 'pytz'"
    )
    assert "\n" not in _library_message(ValueError("line one\nline two"))


def test_unreadable_file_error_names_the_file_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(DataError) as info:
        fingerprint(bad)
    message = str(info.value)
    assert "bad.parquet" in message and "not readable as Parquet" in message
    assert "\n" not in message


def test_a_late_value_beyond_the_sniffed_type(tmp_path: Path) -> None:
    """DuckDB types a CSV column from its first 20,480 rows; a later value that does not fit
    must not stop a release that does not use the column (the fingerprint reads every column),
    and where the column is used the error names file, line, column and type, not the value."""
    data = tmp_path / "late.csv"
    rows = [f"{i % 5},{i}" for i in range(25_000)] + ["3,secretvalue"]
    data.write_text("a,b\n" + "\n".join(rows) + "\n")
    identity = fingerprint(data)
    assert identity == fingerprint(str(data))  # one identity, the same on every read
    h = dpcube.histogram(str(data), Schema.from_dict(SCHEMA))
    assert int(h.counts.sum()) == 25_001
    uses_b = {"attributes": [{"name": "b", "kind": "ordinal", "range": [0, 30000], "width": 1000}]}
    with pytest.raises(DataError) as info:
        dpcube.histogram(str(data), Schema.from_dict(uses_b))
    message = str(info.value)
    assert "late.csv" in message and "line 25002: column 'b'" in message and "BIGINT" in message
    assert "secretvalue" not in message and "\n" not in message


def test_library_messages_do_not_quote_the_data() -> None:
    error = duckdb.ConversionException(
        'Conversion Error: Could not convert string "Jane Doe" to INT32\n'
        "Original Line: 7,Jane Doe,1980\n\nPossible solutions:\n* something\n"
    )
    message = _library_message(error)
    assert message == "Conversion Error: Could not convert string (not shown) to INT32"


def test_offending_values_of_every_type_are_shown_as_text(tmp_path: Path) -> None:
    """With show_values the commonest offending values are fetched as text computed in SQL (a
    zoned timestamp fetched as a Python value would need pytz)."""
    parquet = _files(tmp_path)["parquet"]
    for column, shown in [("zoned", r"'2013-01-01 0\d:00:00\+00' \(1 rows\)"),
                          ("day", r"'2013-01-0\d' \(1 rows\)"), ("list", r"'\[\d, \d\]'"),
                          ("a", r": \d \(1 rows\)")]:  # fmt: skip
        schema = {"attributes": [{"name": column, "kind": "nominal", "categories": ["x"]}]}
        with pytest.raises(DataError) as info:
            dpcube.histogram(str(parquet), Schema.from_dict(schema), show_values=True)
        assert re.search(shown, str(info.value)) and "pytz" not in str(info.value), column


def test_a_traceback_quoted_in_a_library_message_is_cut_to_its_last_line() -> None:
    error = duckdb.InvalidInputException(
        "Invalid Input Error: Required module 'pytz' failed to import, due to the following "
        'Python exception:\nTraceback (most recent call last):\n  File "x.py", line 1, in f\n'
        "ModuleNotFoundError: No module named 'pytz'\n"
    )
    assert _library_message(error) == (
        "Invalid Input Error: Required module 'pytz' failed to import, due to the following "
        "Python exception: ModuleNotFoundError: No module named 'pytz'"
    )
