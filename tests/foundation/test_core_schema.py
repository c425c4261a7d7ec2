"""Schemas: construction from dicts and files, validation errors, hierarchies and query boxes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcube.errors import DomainTooLargeError, QueryError, SchemaError
from dpcube.planning.publication import Publication
from dpcube.schema import Hierarchy, Nominal, Ordinal, Schema, Spatial, default_max_cells

README_SCHEMA: dict[str, Any] = {
    "attributes": [
        {"name": "age", "kind": "ordinal", "range": [0, 100], "width": 1},
        {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
        {
            "name": "occupation",
            "kind": "nominal",
            "hierarchy": {
                "Professional": {"Engineer": None, "Doctor": None},
                "Service": {"Cook": None, "Driver": None},
            },
        },
        {
            "name": "loc",
            "kind": "spatial",
            "columns": ["lat", "lon"],
            "bbox": [33.7, -118.7, 34.4, -117.8],
            "resolution": [1024, 1024],
        },
    ]
}

YAML_TEXT = """
attributes:
  - {name: age, kind: ordinal, range: [0, 100], width: 1}     # or edges: [0, 18, 65, 101]
  - {name: sex, kind: nominal, categories: [F, M]}
  - name: occupation
    kind: nominal
    hierarchy: {Professional: {Engineer: null, Doctor: null}, Service: {Cook: null, Driver: null}}
  - {name: loc, kind: spatial, columns: [lat, lon], bbox: [33.7, -118.7, 34.4, -117.8], resolution: [1024, 1024]}
"""


def one(attr: dict[str, Any]) -> Schema:
    return Schema.from_dict({"attributes": [attr]})


# ---------------------------------------------------------------------------------------------
# Construction and files
# ---------------------------------------------------------------------------------------------


def test_readme_schema_shape_and_axes() -> None:
    s = Schema.from_dict(README_SCHEMA)
    assert s.shape == (101, 2, 4, 1024, 1024)
    assert s.size == 101 * 2 * 4 * 1024 * 1024
    assert s.names == ("age", "sex", "occupation", "loc")
    assert s.axes == (("age", 0), ("sex", 0), ("occupation", 0), ("loc", 0), ("loc", 1))
    assert s.axis_slice("loc") == slice(3, 5)
    occ = s["occupation"]
    assert isinstance(occ, Nominal) and occ.categories == ("Engineer", "Doctor", "Cook", "Driver")
    age = s["age"]
    assert isinstance(age, Ordinal) and age.labels[:3] == ("0", "1", "2")


def test_yaml_and_json_files_agree(tmp_path: Path) -> None:
    y = tmp_path / "s.yaml"
    y.write_text(YAML_TEXT)
    j = tmp_path / "s.json"
    j.write_text(json.dumps(README_SCHEMA))
    a, b = Schema.from_file(y), Schema.from_file(j)
    assert a == b == Schema.from_dict(README_SCHEMA)
    # to_dict round-trips through both formats.
    y2 = tmp_path / "t.yml"
    y2.write_text(yaml.safe_dump(a.to_dict(), sort_keys=False))  # order is meaningful
    assert Schema.from_file(y2) == a
    assert Schema.from_dict(json.loads(json.dumps(a.to_dict()))) == a


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="cannot read schema file"):
        Schema.from_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SchemaError, match="not valid JSON"):
        Schema.from_file(bad)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("attributes: [\n")
    with pytest.raises(SchemaError, match="not valid YAML"):
        Schema.from_file(bad_yaml)
    empty = tmp_path / "empty.yaml"
    empty.write_text("just a string")
    with pytest.raises(SchemaError, match="list under 'attributes'"):
        Schema.from_file(empty)


# ---------------------------------------------------------------------------------------------
# Validation errors: each a one-line SchemaError naming what is wrong
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attr", "pattern"),
    [
        (
            {"name": "x", "kind": "interval"},
            r"unknown kind 'interval'.*ordinal, nominal or spatial",
        ),
        ({"name": "x"}, r"unknown kind None"),
        ({"kind": "ordinal"}, r"needs a 'name'"),
        (
            {"name": "x", "kind": "nominal", "categories": ["a", "b", "a"]},
            r"duplicate category 'a'",
        ),
        ({"name": "x", "kind": "nominal", "categories": []}, r"at least one category"),
        ({"name": "x", "kind": "nominal"}, r"needs categories or a hierarchy"),
        ({"name": "x", "kind": "ordinal", "edges": [0, 10, 10, 20]}, r"empty bin \[10.0, 10.0\)"),
        ({"name": "x", "kind": "ordinal", "edges": [0, 20, 10]}, r"empty bin|strictly increase"),
        ({"name": "x", "kind": "ordinal", "edges": [5]}, r"at least one bin"),
        ({"name": "x", "kind": "ordinal", "range": [0, 10], "width": 0}, r"width must be positive"),
        (
            {"name": "x", "kind": "ordinal", "range": [10, 0], "width": 1},
            r"range \[10.0, 0.0\] is empty",
        ),
        (
            {"name": "x", "kind": "ordinal", "range": [0, 10]},
            r"needs 'edges' or 'range' with 'width'",
        ),
        (
            {
                "name": "x",
                "kind": "nominal",
                "categories": ["a", "b", "c"],
                "hierarchy": {"g": ["a", "b"]},
            },
            r"hierarchy leaves do not match the categories \(categories not leaves: \['c'\]; leaves not categories: \[\]\)",
        ),
        (
            {"name": "x", "kind": "nominal", "categories": ["a"], "hierarchy": {"g": ["a", "z"]}},
            r"leaves not categories: \['z'\]",
        ),
        (
            {"name": "x", "kind": "nominal", "hierarchy": {"g": ["a"], "h": ["a"]}},
            r"node 'a' appears twice",
        ),
        (
            {"name": "x", "kind": "nominal", "hierarchy": {"g": {}}},
            r"node 'g' has an empty set of children",
        ),
        (
            {"name": "x", "kind": "nominal", "hierarchy": {"g": 3}},
            r"children must be a mapping, a list or null",
        ),
        (
            {
                "name": "p",
                "kind": "spatial",
                "columns": ["lat", "lon"],
                "bbox": [34.4, -118.7, 33.7, -117.8],
                "resolution": 8,
            },
            r"bbox \[34.4, -118.7, 33.7, -117.8\] must be \[lat_min, lon_min, lat_max, lon_max\] with min < max",
        ),
        (
            {
                "name": "p",
                "kind": "spatial",
                "columns": ["lat", "lon"],
                "bbox": [0, 5, 1, 5],
                "resolution": 8,
            },
            r"with min < max",
        ),
        (
            {
                "name": "p",
                "kind": "spatial",
                "columns": ["lat", "lon"],
                "bbox": [0, 0, 1, 1],
                "resolution": [8, 0],
            },
            r"resolution \[rows, cols\] must be at least 1",
        ),
        (
            {"name": "p", "kind": "spatial", "columns": ["lat", "lon"], "resolution": 8},
            r"needs 'bbox'",
        ),
    ],
)
def test_validation_errors(attr: dict[str, Any], pattern: str) -> None:
    with pytest.raises(SchemaError, match=pattern) as info:
        one(attr)
    assert "\n" not in str(info.value)


def test_schema_level_errors() -> None:
    with pytest.raises(SchemaError, match="at least one attribute"):
        Schema.from_dict({"attributes": []})
    with pytest.raises(SchemaError, match="duplicate attribute name 'a'"):
        Schema.from_dict(
            {"attributes": [{"name": "a", "kind": "nominal", "categories": ["x"]}] * 2}
        )
    with pytest.raises(SchemaError, match="list under 'attributes'"):
        Schema.from_dict({"attributes": {"name": "a"}})


def test_too_large_domain_gives_its_size() -> None:
    s = Schema.from_dict(README_SCHEMA)
    with pytest.raises(DomainTooLargeError) as info:
        s.check_materialisable()
    message = str(info.value)
    assert "847,249,408 cells (101 x 2 x 4 x 1024 x 1024)" in message
    assert f"more than the {default_max_cells():,}" in message and "\n" not in message
    assert isinstance(info.value, SchemaError)
    s.check_materialisable(max_cells=s.size)  # exactly the limit is fine


# ---------------------------------------------------------------------------------------------
# Ordinal bins and hierarchies
# ---------------------------------------------------------------------------------------------


def test_ordinal_edges_from_range_and_width() -> None:
    a = Ordinal.from_range("age", 0, 100, 10)
    assert (
        a.shape == (11,)
        and a.edges[0] == 0
        and a.edges[-1] == 110
        and a.high == 100
        and a.high_inclusive
    )
    b = Ordinal.from_range("x", 0, 99, 10)  # 99 sits in the last bin [90, 100)
    assert b.shape == (10,)
    c = Ordinal.from_edges("inc", [0, 18, 65, 101])
    assert c.shape == (3,) and not c.high_inclusive and c.high == 101
    assert c.labels == ("[0, 18)", "[18, 65)", "[65, 101)")
    d = Ordinal.from_range("f", 0.0, 1.0, 0.25)
    assert d.shape == (5,) and d.labels[0] == "[0, 0.25)"


def test_hierarchy_intervals() -> None:
    h = Hierarchy.from_mapping(
        {"Prof": {"Eng": None, "Doc": None}, "Svc": ["Cook", "Driver"], "Other": None}, root="All"
    )
    assert h.leaves == ("Eng", "Doc", "Cook", "Driver", "Other")
    assert h.interval("All") == (0, 4)
    assert (
        h.interval("Prof") == (0, 1)
        and h.interval("Svc") == (2, 3)
        and h.interval("Other") == (4, 4)
    )
    assert h.nodes == ("All", "Prof", "Eng", "Doc", "Svc", "Cook", "Driver", "Other")
    assert h.height == 3
    with pytest.raises(QueryError, match="no node 'Nope'"):
        h.interval("Nope")
    back = Hierarchy.from_mapping(h.to_mapping(), root="All")
    assert back.intervals == h.intervals


@st.composite
def trees(draw: st.DrawFn, depth: int = 3) -> dict[str, Any]:
    """Random nested mappings with unique node names."""
    counter = iter(range(10**6))

    def build(level: int) -> dict[str, Any]:
        n = draw(st.integers(1, 4))
        out: dict[str, Any] = {}
        for _ in range(n):
            name = f"n{next(counter)}"
            out[name] = build(level + 1) if level < depth and draw(st.booleans()) else None
        return out

    return build(1)


@settings(max_examples=60, deadline=None)
@given(trees())
def test_every_hierarchy_node_is_a_contiguous_interval(tree: dict[str, Any]) -> None:
    h = Hierarchy.from_mapping(tree)

    def leaves_under(sub: Any) -> list[str]:
        if sub is None:
            return []
        out: list[str] = []
        for k, v in sub.items():
            out.extend([k] if v is None else leaves_under(v))
        return out

    def check(name: str, sub: Any) -> None:
        lo, hi = h.interval(name)
        expected = [name] if sub is None else leaves_under(sub)
        assert list(h.leaves[lo : hi + 1]) == expected
        if sub:
            for k, v in sub.items():
                check(k, v)

    assert h.interval("*") == (0, len(h.leaves) - 1)
    assert list(h.leaves) == leaves_under(tree)
    for k, v in tree.items():
        check(k, v)


# ---------------------------------------------------------------------------------------------
# Queries to boxes
# ---------------------------------------------------------------------------------------------


def test_query_boxes() -> None:
    s = Schema.from_dict(README_SCHEMA)
    full = ((0, 100), (0, 1), (0, 3), (0, 1023), (0, 1023))
    assert s.box({}) == full
    assert s.box({"age": [18, 64]}) == ((18, 64), *full[1:])
    assert s.box({"age": (3.0, 3)}) == ((3, 3), *full[1:])
    assert s.box({"sex": "M"})[1] == (1, 1)
    assert s.box({"occupation": "Service"})[2] == (2, 3)
    assert s.box({"occupation": "Doctor"})[2] == (1, 1)
    assert s.box({"occupation": "*"})[2] == (0, 3)
    assert s.box({"occupation": ["Doctor", "Cook"]})[2] == (1, 2)
    assert s.box({"occupation": {"bins": [1, 2]}})[2] == (1, 2)
    assert s.box({"loc": {"bins": [[10, 20], [0, 1023]]}})[3:] == ((10, 20), (0, 1023))
    # the whole box in latitude/longitude: every row and column
    assert s.box({"loc": [[33.7, 34.4], [-118.7, -117.8]]})[3:] == ((0, 1023), (0, 1023))


@pytest.mark.parametrize(
    ("query", "pattern"),
    [
        (
            {"height": [0, 1]},
            r"unknown attribute 'height' in query; the schema has age, sex, occupation, loc",
        ),
        ({"sex": "X"}, r"attribute 'sex' has no category 'X' \(categories: F, M\)"),
        ({"occupation": "Pilot"}, r"attribute 'occupation' has no category 'Pilot'"),
        ({"age": [50, 101]}, r"range 50..101 is not inside the domain 0..100"),
        ({"age": [-1, 3]}, r"is not inside the domain 0..100"),
        ({"age": [5, 4]}, r"range \[5, 4\] is reversed"),
        ({"age": [1.5, 3]}, r"does not fall on bin edges; the nearest ranges that do are 2..3"),
        ({"age": "x"}, r"expected a number, got 'x'"),
        ({"age": {"bins": [50, 101]}}, r"interval \[50, 101\] is not inside \[0, 100\]"),
        ({"age": {"bins": [1.5, 3]}}, r"expected an inclusive index interval"),
        ({"age": {"bin": [1, 3]}}, r"unknown key 'bin'"),
        (
            {"loc": {"bins": [[0, 2000], [0, 3]]}},
            r"attribute 'loc' rows: interval \[0, 2000\] is not inside \[0, 1023\]",
        ),
        ({"loc": {"bins": [[0, 1], [5, 2]]}}, r"attribute 'loc' columns"),
        ({"loc": [[33.7, 34.4], [-117.0, -118.0]]}, r"attribute 'loc' longitude: range"),
        ({"loc": [[30.0, 34.4], [-118.7, -117.8]]}, r"latitude: range 30..34.4 is not inside"),
        ({"loc": [0, 1]}, r"latitude: range 0..0 is not inside the domain 33.7..34.4"),
        ({"loc": [[0, 1]]}, r"expected a box"),
    ],
)
def test_query_errors(query: dict[str, Any], pattern: str) -> None:
    s = Schema.from_dict(README_SCHEMA)
    with pytest.raises(QueryError, match=pattern) as info:
        s.box(query)
    assert "\n" not in str(info.value)
    with pytest.raises(QueryError, match="a query is a mapping"):
        s.box([("age", [0, 1])])  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    data=st.data(),
)
def test_box_property(shape: list[int], data: st.DataObject) -> None:
    """The box of the empty query is the full domain; named intervals land on their own axis."""
    s = Schema.from_dict(
        {
            "attributes": [
                {"name": f"a{i}", "kind": "ordinal", "range": [0, n - 1], "width": 1}
                for i, n in enumerate(shape)
            ]
        }
    )
    assert s.box({}) == tuple((0, n - 1) for n in shape)
    query = {}
    for i, n in enumerate(shape):
        if data.draw(st.booleans()):
            lo = data.draw(st.integers(0, n - 1))
            hi = data.draw(st.integers(lo, n - 1))
            query[f"a{i}"] = [lo, hi]
    box = s.box(query)
    for i, n in enumerate(shape):
        assert box[i] == (tuple(query[f"a{i}"]) if f"a{i}" in query else (0, n - 1))


def test_spatial_attribute_properties() -> None:
    sp = Spatial("p", ("lat", "lon"), (0.0, 10.0, 1.0, 12.0), (4, 8))
    assert sp.shape == (4, 8) and sp.columns == ("lat", "lon")
    assert Schema((sp,)).to_dict()["attributes"][0]["resolution"] == [4, 8]
    s = one(
        {
            "name": "p",
            "kind": "spatial",
            "columns": ["a", "b"],
            "bbox": [0, 0, 1, 1],
            "resolution": 16,
        }
    )
    assert s.shape == (16, 16)


@pytest.mark.parametrize(
    ("text", "where", "key", "closest"),
    [
        (
            "attributes:\n  - {name: sex, kind: nominal, categories: [F, M], colum: gender}\n",
            "attribute 'sex'",
            "colum",
            "column",
        ),
        (
            "attributes:\n  - {name: age, kind: ordinal, range: [0, 9], widht: 1, width: 1}\n",
            "attribute 'age'",
            "widht",
            "width",
        ),
        (
            "attributes:\n  - {name: sex, knd: nominal, categories: [F, M]}\n",
            "attribute 'sex'",
            "knd",
            "kind",
        ),
        (
            "attribute: []\nattributes:\n  - {name: sex, kind: nominal, categories: [F, M]}\n",
            "top level",
            "attribute",
            "attributes",
        ),
    ],
)
def test_unknown_schema_keys_are_refused(
    tmp_path: Path, text: str, where: str, key: str, closest: str
) -> None:
    """A misspelt key is an error naming the file, the attribute, the key and the fix, never
    ignored (``colum: gender`` would otherwise read the column ``sex``)."""
    path = tmp_path / "schema.yaml"
    path.write_text(text)
    with pytest.raises(SchemaError) as info:
        Schema.from_file(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and where in message
    assert f"unknown key {key!r} (did you mean {closest!r}?)" in message
    assert "accepted keys: " in message


def test_every_schema_file_of_the_project_loads() -> None:
    """The examples and docs schemas (and publication files) use only accepted keys."""
    root = Path(__file__).resolve().parents[2]
    files = sorted([*root.glob("examples/*/*.yaml"), *root.glob("docs/examples/*.yaml")])
    assert len(files) >= 5
    for path in files:
        if "tables" in (yaml.safe_load(path.read_text()) or {}):
            Publication.from_file(path)  # a publication of several tables, not a schema
        else:
            Schema.from_file(path)
