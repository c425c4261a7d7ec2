"""Minimal examples the fuzzing found, kept as plain regression tests."""

from __future__ import annotations

from pathlib import Path

from dpcube.histogram import histogram
from dpcube.schema import Schema


def test_csv_column_of_single_quotes_is_read_row_by_row(tmp_path: Path) -> None:
    # Found by test_csv_histogram_with_plain_column_names (long run): the DuckDB sniffer took "'"
    # as the quote character and read the two rows as one value "\n" (dropped under 'drop').
    path = tmp_path / "data.csv"
    path.write_text("c\n'\n'\n")
    schema = Schema.from_dict(
        {"attributes": [{"name": "c", "kind": "nominal", "categories": ["'"]}]}
    )
    for policy in ("error", "drop"):
        assert histogram(path, schema, on_out_of_domain=policy).counts.tolist() == [2]


def test_csv_is_comma_separated_whatever_a_value_holds(tmp_path: Path) -> None:
    # Found by the same property: one row "DROP TABLE src; --" made the sniffer split on ";".
    path = tmp_path / "data.csv"
    path.write_text("c\nDROP TABLE src; --\n")
    cats = ["DROP TABLE src; --"]
    schema = Schema.from_dict(
        {"attributes": [{"name": "c", "kind": "nominal", "categories": cats}]}
    )
    assert histogram(path, schema).counts.tolist() == [1]
