"""Every bad input to the library is one clear dpcube error.

One test per class of bad input (schema fields, YAML, domain size, data files, queries, counts).
Each test fails on the behaviour it guards against (a library exception, a wrong count or a hang).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcube import histogram
from dpcube.errors import DataError, DomainTooLargeError, QueryError, SchemaError
from dpcube.histogram import Histogram
from dpcube.schema import Schema, default_max_cells

SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 9], "width": 1},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
        ]
    }
)


def ordinal(**fields: Any) -> dict[str, Any]:
    return {"name": "a", "kind": "ordinal", **fields}


def spatial(**fields: Any) -> dict[str, Any]:
    base = {"name": "loc", "kind": "spatial", "columns": ["lat", "lon"], "bbox": [0, 0, 1, 1]}
    return {**base, "resolution": 4, **fields}


# -- schema fields ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attr", "pattern"),
    [
        (ordinal(range=[10, 0], width=1), r"'a'.*range.*hi < lo"),
        (ordinal(range=[0, float("inf")], width=1), r"'a'.*range.*finite"),
        (ordinal(range=[0, 1, 2], width=1), r"'a'.*range.*2 numbers.*got 3"),
        (ordinal(range=5, width=1), r"'a'.*range.*list of 2 numbers"),
        (ordinal(range=["a", "b"], width=1), r"'a'.*range.*number"),
        (ordinal(range=[0, 9], width="x"), r"'a'.*width.*number"),
        (ordinal(range=[0, 9], width=float("nan")), r"'a'.*width.*finite"),
        (ordinal(edges=["a", "b"]), r"'a'.*edges.*number"),
        (ordinal(edges=[0, float("nan"), 3]), r"'a'.*edges.*finite"),
        (ordinal(edges=[0, True]), r"'a'.*edges.*number"),
        (spatial(bbox=[0, 0, 1]), r"'loc'.*bbox.*4 numbers.*got 3"),
        (spatial(bbox=[0, 0, 1, float("inf")]), r"'loc'.*bbox.*finite"),
        (spatial(columns=["lat"]), r"'loc'.*columns.*2.*got 1"),
        (spatial(columns="lat"), r"'loc'.*columns.*list"),
        (spatial(resolution=2.5), r"'loc'.*resolution.*integer"),
        (spatial(resolution=True), r"'loc'.*resolution.*integer"),
        (spatial(resolution=[4, 0]), r"'loc'.*resolution.*at least 1"),
        (spatial(resolution=[4, 4, 4]), r"'loc'.*resolution.*got 3"),
        ({"name": "c", "kind": "nominal", "categories": "FM"}, r"'c'.*categories.*list"),
        ({"name": "c", "kind": "nominal", "categories": [["x"]]}, r"'c'.*categories.*scalar"),
    ],
)
def test_every_schema_field_is_validated_with_attribute_and_field(
    attr: dict[str, Any], pattern: str
) -> None:
    with pytest.raises(SchemaError, match=pattern):
        Schema.from_dict({"attributes": [attr]})


def test_yaml_category_values_are_the_strings_written(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "attributes:\n"
        "  - name: answer\n    kind: nominal\n    categories: [NO, YES, 01, 1.0, ~, on]\n"
        "  - name: age\n    kind: ordinal\n    range: [0, 0x10]\n    width: 1\n"
    )
    schema = Schema.from_file(path)
    assert schema["answer"].labels == ("NO", "YES", "01", "1.0", "~", "on")
    assert schema["age"].shape == (17,)


def test_yaml_alias_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    lines += ["attributes: *a8"]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SchemaError, match=r"bomb.yaml.*alias"):
        Schema.from_file(path)


def test_domain_size_is_checked_before_allocating_bins() -> None:
    # 10^12 bins: building the edges tuple would exhaust memory.
    with pytest.raises(DomainTooLargeError, match=r"'a'.*1,000,000,000,001 bins.*DPCUBE_MAX_CELLS"):
        Schema.from_dict({"attributes": [ordinal(range=[0, 1e12], width=1)]})


def test_default_domain_limit_is_sized_to_memory_and_stated() -> None:
    limit = default_max_cells()
    assert 2**20 <= limit
    big = Schema.from_dict({"attributes": [spatial(resolution=[2**20, 2**20])]})
    with pytest.raises(DomainTooLargeError, match=rf"{limit:,}.*memory.*DPCUBE_MAX_CELLS"):
        big.check_materialisable()


def test_domain_limit_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPCUBE_MAX_CELLS", "10")
    assert default_max_cells() == 10
    with pytest.raises(DomainTooLargeError, match=r"20 cells.*10"):
        SCHEMA.check_materialisable()
    monkeypatch.setenv("DPCUBE_MAX_CELLS", "lots")
    with pytest.raises(SchemaError, match=r"DPCUBE_MAX_CELLS.*'lots'.*integer"):
        default_max_cells()


# -- data files ---------------------------------------------------------------------------------


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")
    with pytest.raises(DataError, match=r"empty.csv.*is empty"):
        histogram(path, SCHEMA)


def test_header_only_file_is_zero_rows(tmp_path: Path) -> None:
    path = tmp_path / "header.csv"
    path.write_text("age,sex\n")
    h = histogram(path, SCHEMA)
    assert h.total == 0 and h.counts.shape == SCHEMA.shape
    assert h.report["rows"] == 0


def test_header_only_file_still_checks_columns(tmp_path: Path) -> None:
    path = tmp_path / "header.csv"
    path.write_text("age,gender\n")
    with pytest.raises(DataError, match=r"column 'sex'"):
        histogram(path, SCHEMA)


def test_directory_without_parquet_names_the_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(DataError, match=r"directory .*'.*d'.*no \.parquet files"):
        histogram(tmp_path / "d", SCHEMA)


def test_file_that_is_not_parquet(tmp_path: Path) -> None:
    path = tmp_path / "junk.parquet"
    path.write_text("age,sex\n1,F\n")
    with pytest.raises(DataError, match=r"junk.parquet.*not .*Parquet"):
        histogram(path, SCHEMA)


def test_binary_file_named_csv(tmp_path: Path) -> None:
    path = tmp_path / "blob.csv"
    path.write_bytes(b"\x00\x01\x02\x03garbage\x00" * 10)
    with pytest.raises(DataError, match=r"blob.csv.*not a CSV text file"):
        histogram(path, SCHEMA)


def test_malformed_csv_row_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("age,sex\n" + "1,F\n" * 3000 + "x,M\n")
    with pytest.raises(DataError, match=r"bad.csv"):
        histogram(path, SCHEMA)


@pytest.mark.parametrize("policy", ["clip", "error"])
def test_nan_is_missing_not_a_bin(tmp_path: Path, policy: str) -> None:
    path = tmp_path / "nan.csv"
    path.write_text("age,sex\n1,F\nnan,M\n")
    with pytest.raises(DataError, match=r"1 rows are NULL"):
        histogram(path, SCHEMA, on_out_of_domain=policy)  # type: ignore[arg-type]


def test_nan_under_drop_is_dropped() -> None:
    df = pd.DataFrame({"age": [1.0, float("nan")], "sex": ["F", "M"]})
    df.loc[1, "age"] = np.nan
    h = histogram(pa_table_with_nan(), SCHEMA, on_out_of_domain="drop")
    assert h.total == 1 and h.report["dropped"] == {"age": 1}
    assert h.counts[9].sum() == 0


def pa_table_with_nan() -> Any:
    import pyarrow as pa

    # Arrow keeps NaN as a float (pandas would turn it into NULL).
    return pa.table({"age": pa.array([1.0, float("nan")], type=pa.float64()), "sex": ["F", "M"]})


def test_nan_under_clip_does_not_land_in_a_bin() -> None:
    with pytest.raises(DataError, match=r"NULL"):
        histogram(pa_table_with_nan(), SCHEMA, on_out_of_domain="clip")


def test_counts_that_overflow_int64_are_refused() -> None:
    with pytest.raises(DataError, match=r"total.*overflow.*int64"):
        Histogram(SCHEMA, np.full(SCHEMA.shape, 2**62, dtype=np.int64))
    with pytest.raises(DataError, match=r"larger than.*int64"):
        Histogram(SCHEMA, np.full(SCHEMA.shape, 1e19))
    with pytest.raises(DataError, match=r"larger than.*int64"):
        Histogram(SCHEMA, np.full(SCHEMA.shape, 2**63, dtype=np.uint64))


# -- queries ------------------------------------------------------------------------------------


def test_reversed_interval_says_reversed() -> None:
    with pytest.raises(QueryError, match=r"'age'.*\[5, 2\] is reversed"):
        SCHEMA.box({"age": [5, 2]})


@pytest.mark.parametrize("value", [[True, True], True, [0, False]])
def test_booleans_are_not_integers(value: Any) -> None:
    with pytest.raises(QueryError, match=r"'age'"):
        SCHEMA.box({"age": value})


def test_yaml_hierarchy_nodes_are_the_strings_written(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(
        "attributes:\n  - name: yes\n    kind: nominal\n"
        "    hierarchy: {NO: [01, '~'], Off: {a: ~, b: null}}\n"
    )
    attr = Schema.from_file(path)["yes"]
    assert attr.labels == ("01", "~", "a", "b")
    assert attr.hierarchy is not None and set(attr.hierarchy.children["*"]) == {"NO", "Off"}  # type: ignore[union-attr]


def test_numpy_numbers_are_numbers() -> None:
    schema = Schema.from_dict({"attributes": [spatial(resolution=[np.int64(4), np.int32(2)])]})
    assert schema.shape == (4, 2)
