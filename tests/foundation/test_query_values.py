"""Queries by value: ordinal ranges in the attribute's unit, category ranges,
latitude/longitude boxes, bins by number under an explicit syntax, overlapping bins on request."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpcube.cli.main import parse_where
from dpcube.errors import QueryError
from dpcube.schema import Schema

SCHEMA = Schema.from_dict(
    {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [17, 90], "width": 1},
            {"name": "decade", "kind": "ordinal", "range": [0, 100], "width": 10},
            {
                "name": "income",
                "kind": "ordinal",
                "edges": [0, 25000, 50000, 100000, 150000, 200000],
            },
            {"name": "ratio", "kind": "ordinal", "edges": [0, 0.5, 1.25, 2]},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M", "X"]},
            {
                "name": "loc",
                "kind": "spatial",
                "columns": ["lat", "lon"],
                "bbox": [30.0, -120.0, 34.0, -116.0],
                "resolution": [4, 8],
            },
        ]
    }
)


def axis(query: dict[str, Any], name: str) -> tuple[tuple[int, int], ...]:
    return SCHEMA.box(query)[SCHEMA.axis_slice(name)]


@pytest.mark.parametrize(
    ("name", "value", "bins"),
    [
        ("age", [20, 39], (3, 22)),  # the contract: ages 20 to 39 on range [17, 90]
        ("age", 17, (0, 0)),
        ("age", "90", (73, 73)),  # text from the CLI; 90 is the domain's top, held by the last bin
        ("decade", [20, 49], (2, 4)),  # whole numbers: bin [40, 50) ends at 49
        ("decade", [100, 100], (10, 10)),  # the last bin holds only the range's top, 100
        ("decade", [0, 100], (0, 10)),
        ("income", [50000, 149999], (2, 3)),
        ("income", [0, 24999], (0, 0)),
        ("ratio", [0.5, 1.25], (1, 1)),  # real edges: the upper edge stands for the bin's end
        ("ratio", [0, 2], (0, 2)),
        ("age", {"bins": [3, 22]}, (3, 22)),
        ("income", {"values": [30000, 60000], "overlapping": True}, (1, 2)),
        ("ratio", {"values": [0.6, 0.7], "overlapping": True}, (1, 1)),
    ],
)
def test_ordinal_values_map_to_bins(name: str, value: Any, bins: tuple[int, int]) -> None:
    assert axis({name: value}, name) == (bins,)


@pytest.mark.parametrize(
    ("query", "pattern"),
    [
        # the example: 150000 lies in the next bin; the nearest ranges on edges are named
        (
            {"income": [50000, 150000]},
            r"range 50000..150000 does not fall on bin edges; the nearest ranges that do are "
            r"50000..149999 \(inside\) or 50000..\d+ \(covering\)",
        ),
        ({"income": [50001, 99999]}, r"nearest ranges that do are 50000..99999 \(covering\)"),
        ({"decade": [25, 25]}, r"nearest ranges that do are 20..29 \(covering\)"),
        ({"ratio": [0.5, 1.0]}, r"nearest ranges that do are 0.5..1.25 \(covering\)"),
        ({"age": [10, 20]}, r"range 10..20 is not inside the domain 17..90"),
        ({"age": [40, 20]}, r"reversed; write it as \[20, 40\]"),
        ({"age": {"values": [20, 30], "overlapping": "yes"}}, r"'overlapping' must be true"),
        ({"age": {"bins": [0, 1], "overlapping": True}}, r"'bins' names bins by number"),
        (
            {"sex": ["M", "F"]},
            r"\['M', 'F'\] is a range \[first, last\] of categories.*sex in \(M, F\)",
        ),
        ({"sex": [0, 1]}, r"has no category 0"),
        ({"loc": [[30.5, 32.0], [-120.0, -116.0]]}, r"latitude: range 30.5..32 does not fall"),
    ],
)
def test_misaligned_or_bad_values_are_one_line_errors(query: dict[str, Any], pattern: str) -> None:
    with pytest.raises(QueryError, match=pattern) as info:
        SCHEMA.box(query)
    assert "\n" not in str(info.value)


def test_misaligned_error_offers_the_overlapping_option_and_bin_syntax() -> None:
    with pytest.raises(QueryError) as info:
        SCHEMA.box({"income": [50000, 150000]})
    assert "--overlapping" in str(info.value) and "#i..j" in str(info.value)


def test_nominal_labels_ranges_and_bins() -> None:
    assert axis({"sex": "M"}, "sex") == ((1, 1),)
    assert axis({"sex": ["M", "X"]}, "sex") == ((1, 2),)
    assert axis({"sex": {"bins": [0, 1]}}, "sex") == ((0, 1),)
    tree = Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "job",
                    "kind": "nominal",
                    "hierarchy": {"Prof": ["Eng", "Doc"], "Svc": ["Cook", "Driver"], "Other": None},
                }
            ]
        }
    )
    assert tree.box({"job": ["Doc", "Svc"]}) == ((1, 3),)  # Doc .. the last leaf under Svc
    assert tree.box({"job": ["Prof", "Cook"]}) == ((0, 2),)


def test_spatial_boxes_in_degrees() -> None:
    # rows are 1 degree of latitude, columns half a degree of longitude
    assert axis({"loc": [[31.0, 33.0], [-119.0, -118.0]]}, "loc") == ((1, 2), (2, 3))
    assert axis({"loc": {"lat": [30.0, 31.0]}}, "loc") == ((0, 0), (0, 7))
    assert axis({"loc": {"lon": [-116.5, -116.0]}}, "loc") == ((0, 3), (7, 7))
    assert axis(
        {"loc": {"lat": [30.2, 30.4], "lon": [-119.9, -119.6], "overlapping": True}}, "loc"
    ) == ((0, 0), (0, 0))
    assert axis({"loc": {"bins": [[1, 2], [3, 4]]}}, "loc") == ((1, 2), (3, 4))


def test_coverage_says_what_overlapping_bins_answer() -> None:
    query = SCHEMA.with_overlapping(
        {"income": [30000, 60000], "sex": "F", "loc": [[30.2, 30.4], [-119.9, -119.6]]}
    )
    assert SCHEMA.coverage(query) == {
        "income": "25000..99999",
        "sex": "F",
        "loc": "lat 30..31, lon -120..-119.5",
    }
    # a query already on the edges covers exactly what it asks
    assert SCHEMA.coverage(SCHEMA.with_overlapping({"age": [20, 39]})) == {"age": "20..39"}


def test_values_agree_with_counting_in_the_engine() -> None:
    """A value range counts the rows whose values lie in it: checked against the binning of
    the data engine on every value of a small integer column."""
    import pandas as pd

    from dpcube import histogram

    schema = Schema.from_dict(
        {"attributes": [{"name": "v", "kind": "ordinal", "range": [3, 40], "width": 5}]}
    )
    values = np.arange(3, 41)
    counts = histogram(pd.DataFrame({"v": values}), schema, dataset="t").counts
    prefix = np.concatenate([[0], np.cumsum(counts)])
    for lo in range(3, 41, 5):
        for hi in [h for h in range(lo, 41) if (h - 3) % 5 == 4 or h == 40]:
            (i, j), *_ = schema.box({"v": [lo, hi]})
            assert prefix[j + 1] - prefix[i] == np.sum((values >= lo) & (values <= hi))


def test_cli_where_spellings() -> None:
    assert parse_where("income=50000..149999, sex=F..M") == {
        "income": [50000, 149999],
        "sex": ["F", "M"],
    }
    assert parse_where("age=#3..22, loc=#1..2:3..4") == {
        "age": {"bins": [3, 22]},
        "loc": {"bins": [[1, 2], [3, 4]]},
    }
    assert parse_where("ratio=0.5..1.25, age=#3") == {
        "ratio": [0.5, 1.25],
        "age": {"bins": [3, 3]},
    }
    with pytest.raises(QueryError, match="must be two integers"):
        parse_where("age=#1.5..3")
