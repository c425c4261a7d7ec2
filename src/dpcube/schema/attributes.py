"""The attribute kinds: :class:`Ordinal` (a numeric column cut into bins), :class:`Nominal`
(categories, optionally the leaves of a :class:`~dpcube.schema.hierarchy.Hierarchy`) and
:class:`Spatial` (a latitude/longitude pair on a grid), with :class:`BinScale` (how values in an
attribute's unit map to its bins) and the reading of one attribute from a schema file's mapping."""

from __future__ import annotations

import bisect
import difflib
import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from dpcube.errors import DomainTooLargeError, QueryError, SchemaError
from dpcube.schema._common import (
    Interval,
    _field_integers,
    _field_names,
    _field_number,
    _field_numbers,
    _fmt,
    _interval,
    _limit_source,
    _name_list,
    _value_pair,
    default_max_cells,
    split_edges,
    stepped_edges,
)
from dpcube.schema.hierarchy import Hierarchy


@dataclass(frozen=True)
class BinScale:
    """How values in an attribute's unit map to its bins (one axis).

    Bin ``i`` holds the values ``[edges[i], edges[i+1])``; ``tops[i]`` is the largest value a
    query's inclusive upper bound may name to end at bin ``i``: ``edges[i+1] - 1`` when every edge
    is a whole number (the values are read as whole numbers: ages 20 to 39 are the bins
    ``[20, 21) ... [39, 40)``), else ``edges[i+1]`` itself (a real-valued bin has no largest value,
    so its upper edge stands for its end). The last bin ends at the domain's top, ``high``.

    >>> s = BinScale.of_edges((0.0, 10.0, 20.0, 30.0), high=30.0, high_inclusive=False)
    >>> s.tops, s.bins(10, 19, "x"), s.bins(0, 29, "x")
    ((9.0, 19.0, 29.0), (1, 1), (0, 2))
    >>> s.bins(5, 19, "x", overlapping=True)
    (0, 1)
    >>> BinScale.of_edges((0.0, 0.5, 1.0), high=1.0, high_inclusive=False).bins(0.5, 1.0, "y")
    (1, 1)
    """

    edges: tuple[float, ...]
    tops: tuple[float, ...]
    whole: bool

    @classmethod
    def of_edges(
        cls,
        edges: Sequence[float],
        high: float,
        high_inclusive: bool,
        whole: bool | None = None,
    ) -> BinScale:
        """The scale of bins ``[edges[i], edges[i+1])`` over a domain ending at ``high``;
        ``whole``: values are whole numbers (default: when every edge is one)."""
        edges_t = tuple(float(e) for e in edges)
        if whole is None:
            whole = all(e.is_integer() for e in edges_t)
        tops = [e - 1 if whole else e for e in edges_t[1:]]
        if high_inclusive:
            tops[-1] = float(math.floor(high)) if whole else float(high)
        return cls(edges_t, tuple(tops), whole)

    def _close(self, x: float, y: float) -> bool:
        span = self.edges[-1] - self.edges[0]
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9 * span)

    def span(self, i: int, j: int) -> str:
        """The values bins ``i..j`` cover, as an inclusive range ``lo..hi``."""
        return f"{_fmt(self.edges[i])}..{_fmt(self.tops[j])}"

    def bins(
        self, lo: float, hi: float, where: str, *, overlapping: bool = False
    ) -> tuple[int, int]:
        """The bins ``i..j`` an inclusive value range covers.

        A range must start on a bin's lower edge and end on a bin's top (see the class); else it
        is an error naming the nearest ranges that do, or, with ``overlapping=True``, it is
        answered with every bin it overlaps.
        """
        n = len(self.tops)
        first, last = self.edges[0], self.tops[-1]
        if (lo < first and not self._close(lo, first)) or (hi > last and not self._close(hi, last)):
            raise QueryError(
                f"{where}: range {_fmt(lo)}..{_fmt(hi)} is not inside the domain "
                f"{_fmt(first)}..{_fmt(last)}"
            )
        i = min(max(bisect.bisect_right(self.edges, lo) - 1, 0), n - 1)
        if self._close(lo, self.edges[min(i + 1, n)]) and i + 1 < n:
            i += 1
        # The bin holding hi: [lower edge, next edge) for whole numbers; (lower edge, upper edge]
        # for real values, whose upper edge stands for the bin's end.
        j = (bisect.bisect_right if self.whole else bisect.bisect_left)(self.edges, hi) - 1
        j = min(max(j, 0), n - 1)
        if j > 0 and self._close(hi, self.tops[j - 1]):
            j -= 1
        j = max(j, i)
        if overlapping or (self._close(lo, self.edges[i]) and self._close(hi, self.tops[j])):
            return i, j
        inner_i = i if self._close(lo, self.edges[i]) else i + 1
        inner_j = j if self._close(hi, self.tops[j]) else j - 1
        inside = f"{self.span(inner_i, inner_j)} (inside) or " if inner_i <= inner_j else ""
        raise QueryError(
            f"{where}: range {_fmt(lo)}..{_fmt(hi)} does not fall on bin edges; the nearest "
            f"ranges that do are {inside}{self.span(i, j)} (covering); or answer with the "
            "overlapping bins (CLI --overlapping; Python {'values': [lo, hi], 'overlapping': "
            "True}, for a box 'overlapping': True beside 'lat'/'lon'), or name bins by number "
            "(CLI #i..j; Python {'bins': ...})"
        )


def _constraint_options(value: Any, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The keys of a constraint written as a mapping (``bins``, ``values``, ``overlapping``...)."""
    unknown = [k for k in value if k not in allowed]
    if "in" in unknown:
        raise QueryError(
            f"{where}: a set {{'in': [...]}} selects categories of a nominal attribute; for "
            "this attribute give a range [lo, hi] (or several queries)"
        )
    if unknown:
        raise QueryError(
            f"{where}: unknown key {unknown[0]!r} in the constraint; expected {', '.join(allowed)}"
        )
    if "bins" in value and len(value) > 1:
        raise QueryError(f"{where}: 'bins' names bins by number and takes no other key")
    overlapping = value.get("overlapping", False)
    if not isinstance(overlapping, bool):
        raise QueryError(f"{where}: 'overlapping' must be true or false, got {overlapping!r}")
    return dict(value)


@dataclass(frozen=True)
class Ordinal:
    """A numeric column cut into bins ``[edges[i], edges[i+1])``.

    Built either from ``range: [lo, hi]`` and ``width: w`` (bins of width w starting at lo; the
    domain is lo <= v <= hi, so the last bin holds hi) or from explicit ``edges`` (the domain is
    edges[0] <= v < edges[-1]).
    """

    name: str
    edges: tuple[float, ...]
    high: float
    high_inclusive: bool
    column: str = ""
    width: float | None = None

    def __post_init__(self) -> None:
        if not self.column:
            object.__setattr__(self, "column", self.name)
        if len(self.edges) < 2:
            raise SchemaError(f"attribute {self.name!r}: needs at least one bin (two edges)")
        for a, b in zip(self.edges, self.edges[1:], strict=False):
            if not b > a:
                raise SchemaError(
                    f"attribute {self.name!r}: empty bin [{a}, {b}); edges must strictly increase"
                )

    @classmethod
    def from_range(cls, name: str, lo: float, hi: float, width: float, column: str = "") -> Ordinal:
        lo, hi = _field_numbers((lo, hi), name, "range", 2)
        width = _field_number(width, name, "width")
        if not width > 0:
            raise SchemaError(f"attribute {name!r}: width must be positive, got {width}")
        if not hi >= lo:
            raise SchemaError(f"attribute {name!r}: range [{lo}, {hi}] is empty (hi < lo)")
        bins = math.floor((hi - lo) / width) + 1
        limit = default_max_cells()
        if bins > limit:
            # Checked before the edges are built: a huge range would exhaust memory.
            raise DomainTooLargeError(
                f"attribute {name!r}: range [{lo:g}, {hi:g}] with width {width:g} gives {bins:,} bins, "
                f"more than {_limit_source(limit)}; use a wider 'width' or a narrower 'range'"
            )
        edges = stepped_edges(lo, width, bins)
        return cls(name, edges, high=hi, high_inclusive=True, column=column, width=width)

    @classmethod
    def from_edges(cls, name: str, edges: Sequence[float], column: str = "") -> Ordinal:
        edges_t = _field_numbers(edges, name, "edges")
        if len(edges_t) >= 2 and edges_t[-1] <= edges_t[0]:
            raise SchemaError(
                f"attribute {name!r}: edges must strictly increase, got {list(edges)}"
            )
        return cls(
            name, edges_t, high=edges_t[-1] if edges_t else 0.0, high_inclusive=False, column=column
        )

    @property
    def low(self) -> float:
        return self.edges[0]

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.edges) - 1,)

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    @property
    def labels(self) -> tuple[str, ...]:
        def fmt(x: float) -> str:
            return str(int(x)) if float(x).is_integer() else repr(x)

        if (
            self.width is not None
            and all(float(e).is_integer() for e in self.edges)
            and self.width == 1
        ):
            return tuple(fmt(e) for e in self.edges[:-1])
        return tuple(
            f"[{fmt(a)}, {fmt(b)})" for a, b in zip(self.edges, self.edges[1:], strict=False)
        )

    @functools.cached_property
    def scale(self) -> BinScale:
        """How values map to bins (:class:`BinScale`)."""
        return BinScale.of_edges(self.edges, self.high, self.high_inclusive)

    def constraint(self, value: Any) -> tuple[Interval, ...]:
        """Bins of a value ``v``, an inclusive value range ``[lo, hi]``, ``{"values": [lo, hi],
        "overlapping": true}`` or bins by number ``{"bins": [i, j]}`` (see :class:`BinScale`)."""
        where = f"attribute {self.name!r}"
        overlapping = False
        if isinstance(value, Mapping):
            opts = _constraint_options(value, where, ("bins", "values", "overlapping"))
            if "bins" in opts:
                return (_interval(opts["bins"], self.shape[0], self.name),)
            if "values" not in opts:
                raise QueryError(f"{where}: a constraint mapping needs 'values' or 'bins'")
            value, overlapping = opts["values"], opts.get("overlapping", False)
        lo, hi = _value_pair(value, where)
        return (self.scale.bins(lo, hi, where, overlapping=overlapping),)

    def describe(self, box: Sequence[Interval]) -> str:
        """The values a constraint's bins cover, ``lo..hi`` inclusive."""
        (i, j), *_ = box
        return self.scale.span(i, j)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": "ordinal"}
        if self.width is not None:
            d.update(range=[self.low, self.high], width=self.width)
        else:
            d["edges"] = list(self.edges)
        if self.column != self.name:
            d["column"] = self.column
        return d


@dataclass(frozen=True)
class Nominal:
    """Categories, optionally the leaves of a hierarchy (then ordered depth-first)."""

    name: str
    categories: tuple[str, ...]
    hierarchy: Hierarchy | None = None
    column: str = ""

    def __post_init__(self) -> None:
        if not self.column:
            object.__setattr__(self, "column", self.name)
        if not self.categories:
            raise SchemaError(f"attribute {self.name!r}: needs at least one category")
        _name_list(self.categories, "category", self.name)

    @classmethod
    def build(
        cls,
        name: str,
        categories: Sequence[Any] | None = None,
        hierarchy: Mapping[str, Any] | Hierarchy | None = None,
        column: str = "",
    ) -> Nominal:
        tree = None
        if hierarchy is not None:
            tree = (
                hierarchy if isinstance(hierarchy, Hierarchy) else Hierarchy.from_mapping(hierarchy)
            )
        if categories is None:
            if tree is None:
                raise SchemaError(
                    f"attribute {name!r}: a nominal attribute needs categories or a hierarchy"
                )
            return cls(name, tree.leaves, tree, column)
        cats = _name_list(_field_names(categories, name, "categories"), "category", name)
        if tree is not None:
            missing = sorted(set(cats) - set(tree.leaves))
            extra = sorted(set(tree.leaves) - set(cats))
            if missing or extra:
                raise SchemaError(
                    f"attribute {name!r}: hierarchy leaves do not match the categories "
                    f"(categories not leaves: {missing}; leaves not categories: {extra})"
                )
            cats = tree.leaves
        return cls(name, cats, tree, column)

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.categories),)

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    @property
    def labels(self) -> tuple[str, ...]:
        return self.categories

    def index(self, category: Any) -> int:
        try:
            return self.categories.index(str(category))
        except ValueError:
            raise QueryError(
                f"attribute {self.name!r} has no category {category!r} "
                f"(categories: {', '.join(self.categories[:10])}{', ...' if len(self.categories) > 10 else ''})"
            ) from None

    def members(self, value: Any) -> tuple[Interval, ...]:
        """The categories a constraint selects, as disjoint intervals in schema order (adjacent
        ones merged): one interval for a category, a node, a range or bins; for a set
        ``{"in": [a, b, ...]}`` of categories and hierarchy nodes (a node counts as its leaves),
        as many as the set has separate runs. A set naming a category twice (itself, or inside
        a node it also names) is refused: its answer would count those records twice.

        >>> a = Nominal.build("c", ["UA", "B6", "EV", "DL"])
        >>> a.members({"in": ["UA", "DL"]}), a.members({"in": ["EV", "DL"]})
        (((0, 0), (3, 3)), ((2, 3),))
        """
        where = f"attribute {self.name!r}"
        if not (isinstance(value, Mapping) and "in" in value):
            return self.constraint(value)
        if len(value) > 1:
            raise QueryError(f"{where}: 'in' lists a set of categories and takes no other key")
        listed = value["in"]
        if (
            isinstance(listed, str | bytes)
            or not isinstance(listed, Sequence)
            or not listed
            or any(isinstance(v, bool) or not isinstance(v, str | int) for v in listed)
        ):
            raise QueryError(
                f"{where}: 'in' takes a non-empty list of categories or hierarchy nodes, "
                f"got {listed!r}"
            )
        spans = sorted((self._member(v), str(v)) for v in listed)
        merged: list[list[int]] = []
        last = ""
        for (lo, hi), name in spans:
            if merged and lo <= merged[-1][1]:
                raise QueryError(
                    f"{where}: the set names {name!r} and {last!r}, which share categories "
                    "(a node counts as all its leaves); name each category once"
                )
            if merged and lo == merged[-1][1] + 1:
                merged[-1][1] = hi
            else:
                merged.append([lo, hi])
            last = name
        return tuple((lo, hi) for lo, hi in merged)

    def _member(self, value: Any) -> Interval:
        """The interval of one member of a set: a category or a hierarchy node."""
        key = str(value)
        if key in self.categories:
            i = self.categories.index(key)
            return (i, i)
        if self.hierarchy is not None and key in self.hierarchy.intervals:
            return self.hierarchy.interval(key)
        self.index(value)  # raises the line naming the categories
        raise AssertionError("unreachable")  # pragma: no cover

    def constraint(self, value: Any) -> tuple[Interval, ...]:
        """A category, a hierarchy node, a range of categories ``[first, last]`` in schema
        order, categories by position ``{"bins": [i, j]}``, or a set ``{"in": [...]}`` whose
        categories are one run (a set of separate runs is several boxes: :meth:`members`)."""
        where = f"attribute {self.name!r}"
        if isinstance(value, Mapping) and "in" in value:
            runs = self.members(value)
            if len(runs) > 1:
                raise QueryError(
                    f"{where}: the set {list(value['in'])!r} is {len(runs)} separate runs of "
                    "categories; a release answers it as their sum (Release.answer), not as one box"
                )
            return runs
        if isinstance(value, Mapping):
            opts = _constraint_options(value, where, ("bins", "in"))
            if "bins" not in opts:
                raise QueryError(f"{where}: a constraint mapping needs 'bins'")
            return (_interval(opts["bins"], self.shape[0], self.name),)
        if isinstance(value, str | int) and not isinstance(value, bool):
            key = str(value)
            if key in self.categories:
                i = self.categories.index(key)
                return ((i, i),)
            if self.hierarchy is not None and key in self.hierarchy.intervals:
                return (self.hierarchy.interval(key),)
            self.index(value)
        if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
            if any(isinstance(v, bool) or not isinstance(v, str | int) for v in value):
                raise QueryError(f"{where}: a category range is [first, last], got {value!r}")
            ((lo, _),) = self.constraint(value[0])  # a category or a hierarchy node
            ((_, hi),) = self.constraint(value[1])
            if lo > hi:
                raise QueryError(
                    f"{where}: {list(value)!r} is a range [first, last] of categories in the "
                    f"schema's order, and the schema lists {self.categories[hi]!r} first; for "
                    f'the set of these categories write {{"in": {json.dumps(list(value))}}} '
                    f"(--where: {self.name} in ({', '.join(map(str, value))}))"
                )
            return ((lo, hi),)
        raise QueryError(
            f"{where}: expected a category, a hierarchy node, [first, last] categories, a set "
            f"{{'in': [...]}} or {{'bins': [i, j]}}, got {value!r}"
        )

    def describe(self, box: Sequence[Interval]) -> str:
        """The categories a constraint covers."""
        (i, j), *_ = box
        if i == j:
            return self.categories[i]
        return f"{self.categories[i]}..{self.categories[j]}"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": "nominal"}
        if self.hierarchy is not None:
            d["hierarchy"] = self.hierarchy.to_mapping()
            if self.hierarchy.root != "*":
                d["root"] = self.hierarchy.root
        else:
            d["categories"] = list(self.categories)
        if self.column != self.name:
            d["column"] = self.column
        return d


@dataclass(frozen=True)
class Spatial:
    """A (latitude, longitude) pair on a rows x cols grid over ``bbox = (lat_min, lon_min, lat_max, lon_max)``.

    Row i holds latitudes in ``[lat_min + i*h, lat_min + (i+1)*h)`` with ``h = (lat_max-lat_min)/rows``
    (the last row also holds ``lat_max``); columns likewise for longitude.
    """

    name: str
    columns: tuple[str, str]
    bbox: tuple[float, float, float, float]
    resolution: tuple[int, int]

    def __post_init__(self) -> None:
        columns = _field_names(self.columns, self.name, "columns [lat, lon]", 2)
        bbox = _field_numbers(self.bbox, self.name, "bbox [lat_min, lon_min, lat_max, lon_max]", 4)
        resolution = _field_integers(self.resolution, self.name, "resolution [rows, cols]", 2)
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "bbox", bbox)
        object.__setattr__(self, "resolution", resolution)
        lat0, lon0, lat1, lon1 = bbox
        if not (lat1 > lat0 and lon1 > lon0):
            raise SchemaError(
                f"attribute {self.name!r}: bbox {list(self.bbox)} must be [lat_min, lon_min, lat_max, lon_max] "
                "with min < max"
            )

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.resolution[0]), int(self.resolution[1]))

    @property
    def labels(self) -> tuple[str, ...]:
        return ()

    @functools.cached_property
    def scales(self) -> tuple[BinScale, BinScale]:
        """Latitude bands (rows) and longitude bands (columns) as :class:`BinScale`s."""
        lat0, lon0, lat1, lon1 = self.bbox
        rows, cols = self.shape
        return (
            BinScale.of_edges(split_edges(lat0, lat1, rows), lat1, True, False),
            BinScale.of_edges(split_edges(lon0, lon1, cols), lon1, True, False),
        )

    def constraint(self, value: Any) -> tuple[Interval, ...]:
        """A latitude/longitude box ``[[lat_lo, lat_hi], [lon_lo, lon_hi]]`` (or ``{"lat": [..],
        "lon": [..]}``, either optional, with ``"overlapping": true`` to take every grid cell the
        box overlaps), or grid cells by number ``{"bins": [[row_lo, row_hi], [col_lo, col_hi]]}``."""
        where = f"attribute {self.name!r}"
        overlapping = False
        bounds: list[Any]
        if isinstance(value, Mapping):
            opts = _constraint_options(value, where, ("bins", "lat", "lon", "overlapping"))
            if "bins" in opts:
                cells = opts["bins"]
                if not isinstance(cells, Sequence) or isinstance(cells, str) or len(cells) != 2:
                    raise QueryError(
                        f"{where}: 'bins' must be [[row_lo, row_hi], [col_lo, col_hi]], got {cells!r}"
                    )
                return (
                    _interval(cells[0], self.shape[0], self.name, "rows"),
                    _interval(cells[1], self.shape[1], self.name, "columns"),
                )
            bounds = [opts.get("lat"), opts.get("lon")]
            overlapping = opts.get("overlapping", False)
        elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
            bounds = list(value)
        else:
            raise QueryError(
                f"{where}: expected a box [[lat_lo, lat_hi], [lon_lo, lon_hi]] or grid cells "
                f"{{'bins': [[row_lo, row_hi], [col_lo, col_hi]]}}, got {value!r}"
            )
        out: list[Interval] = []
        for scale, bound, axis in zip(self.scales, bounds, ("latitude", "longitude"), strict=True):
            if bound is None:
                out.append((0, len(scale.tops) - 1))
                continue
            lo, hi = _value_pair(bound, f"{where} {axis}")
            out.append(scale.bins(lo, hi, f"{where} {axis}", overlapping=overlapping))
        return tuple(out)

    def describe(self, box: Sequence[Interval]) -> str:
        """The latitude and longitude bounds a constraint's grid cells cover."""
        lat, lon = self.scales
        (r0, r1), (c0, c1) = box[0], box[1]
        return f"lat {lat.span(r0, r1)}, lon {lon.span(c0, c1)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "spatial",
            "columns": list(self.columns),
            "bbox": list(self.bbox),
            "resolution": list(self.resolution),
        }


Attribute: TypeAlias = Ordinal | Nominal | Spatial


#: The keys an attribute of each kind may use: any other key is refused (a misspelt ``colum``
#: would otherwise be ignored and the attribute read from the wrong column).
ATTRIBUTE_KEYS = {
    "ordinal": ("name", "kind", "column", "edges", "range", "width"),
    "nominal": ("name", "kind", "column", "categories", "hierarchy", "root"),
    "spatial": ("name", "kind", "columns", "bbox", "resolution"),
}


def _refuse_unknown_keys(
    d: Mapping[str, Any], accepted: Sequence[str], where: str, source: str | None
) -> None:
    """One line naming the file, the place, the unknown key, the closest accepted key and all."""
    for key in d:
        if key in accepted:
            continue
        close = difflib.get_close_matches(str(key), accepted, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        prefix = f"schema file {source!r}, " if source else "schema: "
        raise SchemaError(
            f"{prefix}{where}: unknown key {key!r}{hint}; accepted keys: {', '.join(accepted)}"
        )


def _attribute_from_dict(d: Mapping[str, Any], source: str | None = None) -> Attribute:
    if not isinstance(d, Mapping) or "name" not in d:
        if isinstance(d, Mapping):
            every = tuple(dict.fromkeys(k for keys in ATTRIBUTE_KEYS.values() for k in keys))
            _refuse_unknown_keys(d, every, "an attribute", source)
        raise SchemaError(f"each attribute needs a 'name'; got {d!r}")
    name = str(d["name"])
    kind = d.get("kind")
    if isinstance(kind, str) and kind in ATTRIBUTE_KEYS:
        _refuse_unknown_keys(d, ATTRIBUTE_KEYS[kind], f"attribute {name!r}", source)
    else:
        every = tuple(dict.fromkeys(k for keys in ATTRIBUTE_KEYS.values() for k in keys))
        _refuse_unknown_keys(d, every, f"attribute {name!r}", source)
    column = str(d.get("column", ""))
    if kind == "ordinal":
        if "edges" in d:
            return Ordinal.from_edges(name, d["edges"], column)
        if "range" in d and "width" in d:
            lo, hi = _field_numbers(d["range"], name, "range", 2)
            return Ordinal.from_range(name, lo, hi, d["width"], column)
        raise SchemaError(
            f"attribute {name!r}: an ordinal attribute needs 'edges' or 'range' with 'width'"
        )
    if kind == "nominal":
        hierarchy = d.get("hierarchy")
        tree = (
            Hierarchy.from_mapping(hierarchy, str(d.get("root", "*")))
            if hierarchy is not None
            else None
        )
        return Nominal.build(name, d.get("categories"), tree, column)
    if kind == "spatial":
        for key in ("columns", "bbox", "resolution"):
            if key not in d:
                raise SchemaError(f"attribute {name!r}: a spatial attribute needs {key!r}")
        return Spatial(name, d["columns"], d["bbox"], d["resolution"])
    raise SchemaError(f"attribute {name!r}: unknown kind {kind!r}; use ordinal, nominal or spatial")
