"""Hypothesis strategies for the fuzzing suite: schemas, data files, queries and CLI argument lists.

Every strategy draws from small domains (a few bins, a few rows) so that one example runs in
milliseconds. Generators that may produce invalid input say so in what they return (``valid``
flags, :class:`Rows` with its expected outcome), so that the properties can check both halves:
what must be accepted is accepted, and what must be refused is refused with a DPCubeError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

# -- text -------------------------------------------------------------------------------------

#: Characters that break naive SQL, CSV or shell handling.
SPECIAL = ['"', "'", ";", "--", ",", "\n", "\\", "`", "/*", "*/", "%", " ", "\t", "$", "{", "}"]
UNICODE = ["é", "ß", "東京", "Ωμέγα", "🙂", "\u200b", "ﬁ", "İ", "Ä"]

#: Names: plain, unicode, and SQL/CSV-special. Never empty (an empty name is its own class below).
name_text = st.one_of(
    st.text(alphabet="abcdefghij_", min_size=1, max_size=6),
    st.lists(st.sampled_from(["a", "b", "x", *SPECIAL, *UNICODE]), min_size=1, max_size=4).map(
        "".join
    ),
    st.sampled_from(["select", "DROP TABLE src; --", "a'b", 'a"b', "count(*)", "NULL", "1"]),
)


def _printable(s: str) -> bool:
    """True for names that survive a CSV header (no line breaks, no surrounding space)."""
    return s == s.strip() and "\n" not in s and "\r" not in s and s != ""


#: Category values: always a string here; the schema stores categories as text.
category_text = st.one_of(
    st.text(alphabet="ABCDxyz", min_size=1, max_size=4),
    st.lists(st.sampled_from(["A", "b", *SPECIAL, *UNICODE]), min_size=1, max_size=3).map("".join),
    st.sampled_from(["NULL", "null", "NaN", "true", "01", "1", "-", "DROP TABLE src; --"]),
)

# -- schemas ----------------------------------------------------------------------------------


@st.composite
def ordinal_dict(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """A valid ordinal attribute with 1-6 bins: range/width or explicit edges."""
    if draw(st.booleans()):
        lo = draw(st.integers(-5, 5))
        width = draw(st.sampled_from([1, 2, 0.5, 2.5]))
        bins = draw(st.integers(1, 6))
        hi = lo + width * bins - draw(st.sampled_from([width, width / 2]))
        return {"name": name, "kind": "ordinal", "range": [lo, hi], "width": width}
    edges = sorted(draw(st.sets(st.integers(-10, 10), min_size=2, max_size=6)))
    return {"name": name, "kind": "ordinal", "edges": [float(e) for e in edges]}


@st.composite
def nominal_dict(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """A valid nominal attribute: 1-4 unique categories, or a small hierarchy over them."""
    cats = draw(st.lists(category_text, min_size=1, max_size=4, unique=True))
    if len(cats) >= 2 and draw(st.booleans()):
        cut = draw(st.integers(1, len(cats) - 1))
        used = set(cats)
        groups = [f"G{i}" for i in range(2)]
        groups = [g if g not in used else g + "_" for g in groups]
        tree = {groups[0]: cats[:cut], groups[1]: cats[cut:]}
        return {"name": name, "kind": "nominal", "hierarchy": tree}
    return {"name": name, "kind": "nominal", "categories": cats}


@st.composite
def spatial_dict(draw: st.DrawFn, name: str) -> dict[str, Any]:
    lat0 = draw(st.integers(-10, 10))
    lon0 = draw(st.integers(-10, 10))
    return {
        "name": name,
        "kind": "spatial",
        "columns": [f"{name}_lat", f"{name}_lon"],
        "bbox": [lat0, lon0, lat0 + draw(st.integers(1, 5)), lon0 + draw(st.integers(1, 5))],
        "resolution": [draw(st.integers(1, 3)), draw(st.integers(1, 3))],
    }


@st.composite
def valid_schema_dict(
    draw: st.DrawFn, max_attributes: int = 3, spatial: bool = True, names: Any = None
) -> dict[str, Any]:
    """A valid schema dict with 1..max_attributes attributes of small domains."""
    names = draw(
        st.lists(
            name_text if names is None else names, min_size=1, max_size=max_attributes, unique=True
        ).filter(lambda ns: len({n.lower() for n in ns}) == len(ns))
    )
    kinds = [ordinal_dict, nominal_dict, *([spatial_dict] if spatial else [])]
    attributes = [draw(st.sampled_from(kinds).flatmap(lambda k, n=n: k(n))) for n in names]
    return {"attributes": attributes}


#: Values of the wrong type (for any field of a schema).
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.just(float("nan")),
    st.just(float("inf")),
    st.just(-float("inf")),
    st.just(1e308),
    st.just(-1),
    st.just(0),
    st.text(max_size=3),
    st.lists(st.integers(-2, 2), max_size=5),
    st.dictionaries(st.text(max_size=2), st.integers(0, 2), max_size=2),
)

#: Mutations that make a valid attribute dict invalid (or strange): key -> bad values.
ATTRIBUTE_MUTATIONS: dict[str, Any] = {
    "name": junk,
    "kind": st.one_of(junk, st.sampled_from(["Ordinal", "categorical", "", "spatial "])),
    "range": st.one_of(
        junk,
        st.tuples(st.integers(0, 10), st.integers(-10, -1)).map(list),  # inverted
        st.lists(
            st.sampled_from([0.0, 1.0, float("nan"), float("inf"), -float("inf")]), max_size=3
        ),
    ),
    "width": st.one_of(junk, st.sampled_from([0, -1, 1e-300, float("nan")])),
    "edges": st.one_of(
        junk,
        st.lists(
            st.sampled_from([0.0, 1.0, 1.0, -1.0, float("nan"), float("inf"), "x", None]),
            max_size=4,
        ),
    ),
    "categories": st.one_of(junk, st.just([]), st.just(["a", "a"]), st.just([None, 1, 1.0])),
    "hierarchy": st.one_of(junk, st.just({"a": {"a": None}}), st.just({})),
    "columns": st.one_of(junk, st.just(["only_one"]), st.just([])),
    "bbox": st.one_of(
        junk,
        st.just([1, 1, 0, 0]),
        st.just([0, 0, 1]),
        st.just([0, 0, float("nan"), 1]),
        st.just([0, 0, float("inf"), 1]),
    ),
    "resolution": st.one_of(junk, st.just([0, 1]), st.just([2]), st.just("2x2"), st.just(-3)),
    "column": junk,
    "root": junk,
}

#: Domains too large to materialise, built from a few moderate attributes.
huge_schema = st.integers(4, 7).map(
    lambda k: {
        "attributes": [
            {"name": f"h{i}", "kind": "ordinal", "range": [0, 999], "width": 1} for i in range(k)
        ]
    }
)


@st.composite
def any_schema_dict(draw: st.DrawFn) -> tuple[Any, bool]:
    """(schema dict or junk, generated_valid): valid, mutated, structurally broken, or huge."""
    choice = draw(st.integers(0, 9))
    if choice <= 3:
        return draw(valid_schema_dict()), True
    if choice <= 7:
        d = draw(valid_schema_dict())
        for _ in range(draw(st.integers(1, 2))):
            attr = draw(st.sampled_from(d["attributes"]))
            key = draw(st.sampled_from(sorted(ATTRIBUTE_MUTATIONS)))
            if draw(st.integers(0, 5)) == 0:
                attr.pop(key, None)
            else:
                attr[key] = draw(ATTRIBUTE_MUTATIONS[key])
        return d, False
    if choice == 8:
        return draw(huge_schema), True
    broken = draw(
        st.one_of(
            junk,
            st.just({}),
            st.just({"attributes": []}),
            st.just({"attributes": "age"}),
            st.builds(lambda x: {"attributes": [x]}, junk),
            st.just({"attributes": [{"name": "a", "kind": "ordinal"}]}),
            st.just(
                {
                    "attributes": [
                        {"name": "a", "kind": "nominal", "categories": ["x"]},
                        {"name": "a", "kind": "nominal", "categories": ["y"]},
                    ]
                }
            ),
        )
    )
    return broken, False


# -- data -------------------------------------------------------------------------------------


@dataclass
class Table:
    """A generated data table: column name -> list of cell values (None = NULL)."""

    columns: dict[str, list[Any]]
    #: Column names of the schema's attributes that were deliberately given wrong-typed values.
    wrong_type: set[str] = field(default_factory=set)

    @property
    def rows(self) -> int:
        return len(next(iter(self.columns.values()), []))


def _inside_value(attr: dict[str, Any]) -> st.SearchStrategy[Any]:
    if attr["kind"] == "ordinal":
        if "edges" in attr:
            lo, hi = attr["edges"][0], attr["edges"][-1]
            return st.one_of(
                st.sampled_from([lo, *attr["edges"][1:-1]]),
                st.floats(lo, hi, exclude_max=True),
            )
        lo, hi = attr["range"]
        return st.one_of(st.sampled_from([lo, hi]), st.floats(lo, hi))
    return st.sampled_from(_categories(attr))


def _categories(attr: dict[str, Any]) -> list[str]:
    if "categories" in attr:
        return [str(c) for c in attr["categories"]]
    out: list[str] = []
    for leaves in attr["hierarchy"].values():
        out.extend(leaves)
    return out


def _outside_value(attr: dict[str, Any]) -> st.SearchStrategy[Any]:
    if attr["kind"] == "ordinal":
        lo = attr["edges"][0] if "edges" in attr else attr["range"][0]
        hi = attr["edges"][-1] if "edges" in attr else attr["range"][1]
        above = [hi] if "edges" in attr else [hi + 0.25, hi + 7]
        return st.sampled_from([lo - 1, lo - 0.5, *above])
    cats = set(_categories(attr))
    return category_text.filter(lambda c: c not in cats)


@st.composite
def table_for(draw: st.DrawFn, schema: dict[str, Any], dirty: bool) -> Table:
    """0-8 rows for the schema's columns; dirty tables add NULLs, out-of-domain values, wrong types
    and extra columns."""
    n = draw(st.integers(0 if dirty else 1, 8))
    cols: dict[str, list[Any]] = {}
    wrong: set[str] = set()
    for attr in schema["attributes"]:
        if attr["kind"] == "spatial":
            lat0, lon0, lat1, lon1 = attr["bbox"]
            for col, lo, hi in zip(attr["columns"], (lat0, lon0), (lat1, lon1), strict=True):
                values = draw(st.lists(st.floats(lo, hi), min_size=n, max_size=n))
                if dirty and n and draw(st.booleans()):
                    i = draw(st.integers(0, n - 1))
                    values[i] = draw(st.sampled_from([None, lo - 1, hi + 1]))
                cols[col] = values
            continue
        inside = _inside_value(attr)
        values = draw(st.lists(inside, min_size=n, max_size=n))
        if dirty and n:
            for i in range(n):
                roll = draw(st.integers(0, 9))
                if roll == 0:
                    values[i] = None
                elif roll == 1:
                    values[i] = draw(_outside_value(attr))
            if attr["kind"] == "ordinal" and draw(st.integers(0, 5)) == 0:
                i = draw(st.integers(0, n - 1))
                values[i] = draw(st.sampled_from(["abc", "1,5", "'; DROP TABLE src; --", "½"]))
                wrong.add(attr.get("column", attr["name"]))
        cols[attr.get("column", attr["name"])] = values
    if dirty and draw(st.booleans()):
        extra = draw(name_text.filter(lambda s: s not in cols))
        cols[extra] = draw(
            st.lists(st.sampled_from(["x", "é", "a,b", 'q"q']), min_size=n, max_size=n)
        )
    return Table(cols, wrong)


# -- queries ----------------------------------------------------------------------------------


@st.composite
def query_for(draw: st.DrawFn, schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(query dict, generated_valid) against a schema of ordinal and nominal attributes."""
    query: dict[str, Any] = {}
    valid = True
    for attr in schema["attributes"]:
        if not draw(st.booleans()):
            continue
        size = _size(attr)
        roll = draw(st.integers(0, 9))
        if roll <= 5:
            if attr["kind"] == "nominal" and draw(st.booleans()):
                names = _categories(attr) + list(attr.get("hierarchy", {}))
                query[attr["name"]] = draw(st.sampled_from(names))
            else:
                lo = draw(st.integers(0, size - 1))
                hi = draw(st.integers(lo, size - 1))
                query[attr["name"]] = {
                    "bins": [lo, hi]
                }  # bins by number (values: tests/foundation)
        else:
            valid = False
            query[attr["name"]] = draw(
                st.one_of(
                    st.integers(1, 3).map(lambda k, s=size: [s - 1 + k, s + k]),  # out of range
                    st.integers(0, 3).map(lambda k: [-1 - k, 0]),
                    st.just([size - 1, 0]) if size > 1 else st.just([0, -1]),  # reversed
                    st.sampled_from([True, False, None, [0.5, 1], [0, 1, 2], "no such category!"]),
                ).map(lambda c: c if isinstance(c, str) else {"bins": c})
            )
    if draw(st.integers(0, 7)) == 0:
        query[draw(st.sampled_from(["nope", "AGE", "", "'; --"]))] = [0, 0]
        valid = False
    return query, valid


def _size(attr: dict[str, Any]) -> int:
    if attr["kind"] == "nominal":
        return len(_categories(attr))
    if "edges" in attr:
        return len(attr["edges"]) - 1
    lo, hi = attr["range"]
    return math.floor((hi - lo) / attr["width"]) + 1


def attribute_size(attr: dict[str, Any]) -> int:
    return _size(attr)


def categories(attr: dict[str, Any]) -> list[str]:
    return _categories(attr)


# -- CLI argument lists ---------------------------------------------------------------------

EPSILONS_OK = ["0.1", "0.5", "1", "1e-3"]
EPSILONS_BAD = ["0", "-1", "nan", "inf", "-inf", "1e-300", "abc", "", "1e309", "0x1"]
MECHANISMS_OK = ["identity", "privelet"]
MECHANISMS_BAD = ["Identity", "nosuch", "", "identity;rm -rf"]
PARAMS_OK = ["noise=laplace"]
PARAMS_BAD = ["nosuch=1", "noise=cauchy", "=1", "noise", "levels=-1", "noise=gaussian"]
OUT_TARGETS = ["fresh", "nested", "data_dir", "existing_file", "foreign_dir", "data_file", "home"]


@dataclass(frozen=True)
class CliCase:
    """A generated command: argument pieces with placeholders resolved by the harness."""

    argv: tuple[str, ...]
    command: str
    #: Pieces the grammar knows to be invalid (used to count acceptances, not to predict).
    invalid: tuple[str, ...]


@st.composite
def release_argv(draw: st.DrawFn) -> CliCase:
    bad: list[str] = []
    argv = ["release", draw(st.sampled_from(["{data}", "{data}", "{data}", "{missing}"]))]
    if argv[1] == "{missing}":
        bad.append("missing data")
    if draw(st.integers(0, 9)):
        argv += [
            "--schema",
            draw(st.sampled_from(["{schema}"] * 6 + ["{bad_schema}", "{missing}"])),
        ]
        if argv[-1] != "{schema}":
            bad.append("bad schema")
    else:
        bad.append("no schema")
    if draw(st.integers(0, 7)):
        mech = draw(st.sampled_from(MECHANISMS_OK * 3 + MECHANISMS_BAD))
        argv += ["--mechanism", mech]
        if mech not in MECHANISMS_OK:
            bad.append("mechanism")
    else:
        bad.append("no mechanism")
    eps = draw(st.sampled_from(EPSILONS_OK * 3 + EPSILONS_BAD))
    if eps not in EPSILONS_OK:
        bad.append("epsilon")
    argv += [f"--epsilon={eps}"]
    if draw(st.integers(0, 3)) == 0:
        param = draw(st.sampled_from(PARAMS_OK + PARAMS_BAD))
        argv += ["--param", param]
        if param not in PARAMS_OK:
            bad.append("param")
    if draw(st.integers(0, 5)) == 0:
        delta = draw(st.sampled_from(["1e-6", "0", "1", "-0.1", "nan"]))
        argv += [f"--delta={delta}"]
        if delta not in ("1e-6", "0"):
            bad.append("delta")
    target = draw(st.sampled_from(OUT_TARGETS[:2] * 3 + OUT_TARGETS[2:]))
    if target not in OUT_TARGETS[:2]:
        bad.append("out")
    argv += ["--out", "{out:" + target + "}"]
    argv += ["--ledger-dir", "{ledger_dir}"]
    total = draw(st.sampled_from(["1", "1", "1", "0.05", "none", "nan", "-1"]))
    if total != "none":
        argv += [f"--total-epsilon={total}"]
    if total in ("nan", "-1", "none"):
        bad.append("total")
    if draw(st.integers(0, 5)) == 0:
        policy = draw(st.sampled_from(["drop", "clip", "explode"]))
        argv += ["--on-out-of-domain", policy]
    if draw(st.integers(0, 5)) == 0:
        argv += ["--seed", draw(st.sampled_from(["1", "-1", "x"]))]
    if draw(st.integers(0, 9)) == 0:
        argv.append(draw(st.sampled_from(["--nosuch", "extra", "--epsilon"])))
        bad.append("extra")
    return CliCase(tuple(argv), "release", tuple(bad))


@st.composite
def query_argv(draw: st.DrawFn) -> CliCase:
    bad: list[str] = []
    rel = draw(st.sampled_from(["{release}"] * 4 + ["{missing}", "{foreign_dir}", "{data}"]))
    if rel != "{release}":
        bad.append("release")
    where = draw(
        st.sampled_from(
            [
                "",
                "x=0..1",
                "x=1",
                "y=a",
                "x=0..1, y=a",
                '{"x": [0, 1]}',
                "x=2..0",
                "x=0..99",
                "x=0..1, x=1..1",
                "nosuch=1",
                "x=true",
                '{"x": true}',
                '{"x": [0, 1, 2]}',
                "[1, 2]",
                "{bad json",
                "x",
                "x=a..b",
                "y=nosuch",
                '{"x": null}',
                "x=0..1:0..1",
            ]
        )
    )
    argv = ["query", rel, "--where", where]
    if draw(st.booleans()):
        argv.append("--json")
    return CliCase(tuple(argv), "query", tuple(bad))


@st.composite
def budget_argv(draw: st.DrawFn) -> CliCase:
    bad: list[str] = []
    data = draw(st.sampled_from(["{data}", "{data}", "{missing}", "{foreign_dir}"]))
    argv = ["budget", data, "--ledger-dir", "{ledger_dir}"]
    if data != "{data}":
        bad.append("data")
    if draw(st.booleans()):
        total = draw(st.sampled_from(["2", "0.5", "0", "-1", "nan", "inf", "abc"]))
        argv += [f"--set-total={total}"]
        if total not in ("2", "0.5"):
            bad.append("total")
    if draw(st.booleans()):
        argv.append("--json")
    return CliCase(tuple(argv), "budget", tuple(bad))


@st.composite
def demo_argv(draw: st.DrawFn) -> CliCase:
    rows = draw(st.sampled_from(["20", "1", "0", "-1", "abc", "1e3"]))
    argv = ["demo", f"--rows={rows}", "--out", "{out:" + draw(st.sampled_from(OUT_TARGETS)) + "}"]
    eps = draw(st.sampled_from(["0.5", "0.5", "0", "nan", "2"]))
    argv += [f"--epsilon={eps}"]
    bad = [] if rows in ("20", "1") and eps == "0.5" else ["rows/epsilon"]
    return CliCase(tuple(argv), "demo", tuple(bad))


@st.composite
def plan_argv(draw: st.DrawFn) -> CliCase:
    workload = draw(
        st.sampled_from(
            [
                "allrange:8",
                "prefix:16",
                "allrange:4x4",
                "allrange:0",
                "allrange:-3",
                "prefix:abc",
                "nosuch:8",
                "allrange",
                "",
                "allrange:99999999999",
                "{missing}",
                "{data}",
            ]
        )
    )
    eps = draw(st.sampled_from(EPSILONS_OK + EPSILONS_BAD))
    argv = ["plan", "--workload", workload, f"--epsilon={eps}"]
    if draw(st.integers(0, 3)) == 0:
        argv += ["--strategies", draw(st.sampled_from(["identity", "nosuch", ",", "lsa"]))]
    bad = (
        []
        if workload in ("allrange:8", "prefix:16", "allrange:4x4") and eps in EPSILONS_OK
        else ["x"]
    )
    return CliCase(tuple(argv), "plan", tuple(bad))


def cli_argv() -> st.SearchStrategy[CliCase]:
    """Any command of the grammar, demo less often (it is 50x slower than the others)."""
    return st.one_of(
        release_argv(),
        release_argv(),
        release_argv(),
        query_argv(),
        budget_argv(),
        plan_argv(),
        st.integers(0, 9).flatmap(lambda k: demo_argv() if k == 0 else release_argv()),
    )


__all__ = [
    "CliCase",
    "Table",
    "any_schema_dict",
    "attribute_size",
    "categories",
    "cli_argv",
    "name_text",
    "query_for",
    "table_for",
    "valid_schema_dict",
]
