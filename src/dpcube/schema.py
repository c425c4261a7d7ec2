"""The schema: what is counted.

A schema is an ordered list of attributes; the domain is their product. Each attribute maps the
values of one or two columns to consecutive integer *axes* of the frequency matrix:

- :class:`Ordinal`: a numeric column cut into bins (explicit edges, or a width over a range);
- :class:`Nominal`: categories, optionally the leaves of a :class:`Hierarchy` (a tree whose every
  node covers a contiguous interval of leaves, because leaves are ordered depth-first);
- :class:`Spatial`: a latitude/longitude pair mapped to a rows x cols grid over a bounding box
  (two axes: row = latitude band, column = longitude band).

A *query* is a dict from attribute name to a constraint given by value: an inclusive range in an
ordinal attribute's unit (:class:`BinScale` says how it maps to bins), a category, a hierarchy node
name, or for a spatial attribute a latitude/longitude box; ``{"bins": ...}`` names bins by number.
:meth:`Schema.box` turns it into one inclusive index interval per axis. Attributes that a query
does not name are unconstrained.

>>> s = Schema.from_dict({"attributes": [
...     {"name": "age", "kind": "ordinal", "range": [0, 100], "width": 10},
...     {"name": "sex", "kind": "nominal", "categories": ["F", "M"]}]})
>>> s.shape
(11, 2)
>>> s.box({"age": [20, 49], "sex": "M"})
((2, 4), (1, 1))
>>> s.box({"age": {"bins": [2, 4]}})
((2, 4), (0, 1))
"""

from __future__ import annotations

import bisect
import difflib
import functools
import json
import math
import numbers
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from dpcube.errors import DomainTooLargeError, QueryError, SchemaError


def _memory_bytes() -> int:
    """Physical memory of this machine (8 GiB where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 8 * 2**30


def _memory_limit() -> int:
    # A dense int64 array and a few working copies of it (prefix sums, noise, answers): 64 bytes
    # a cell, so the default uses at most about an eighth of memory per copy.
    return max(2**20, _memory_bytes() // 64)


#: Largest number of cells materialised by default on this machine (memory / 64 bytes, at least
#: 2**20); the environment variable ``DPCUBE_MAX_CELLS`` overrides it (see :func:`default_max_cells`).
DEFAULT_MAX_CELLS = _memory_limit()


def default_max_cells() -> int:
    """The domain limit: ``$DPCUBE_MAX_CELLS`` if set, else :data:`DEFAULT_MAX_CELLS`."""
    env = os.environ.get("DPCUBE_MAX_CELLS", "").strip()
    if not env:
        return DEFAULT_MAX_CELLS
    try:
        value = int(env.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise SchemaError(f"DPCUBE_MAX_CELLS={env!r} must be a positive integer number of cells")
    return value


def _limit_source(limit: int) -> str:
    if os.environ.get("DPCUBE_MAX_CELLS", "").strip():
        return f"the {limit:,} set by DPCUBE_MAX_CELLS"
    if limit == DEFAULT_MAX_CELLS:
        gib = _memory_bytes() / 2**30
        return (
            f"the {limit:,} that may be materialised (the default, sized to this machine's "
            f"{gib:.0f} GiB of memory; set DPCUBE_MAX_CELLS to raise it)"
        )
    return f"the {limit:,} that may be materialised (max_cells; DPCUBE_MAX_CELLS sets the default)"


# -- one validator for every schema field ------------------------------------------------------


def _is_number(x: Any) -> bool:
    """A real number (Python or numpy), not a boolean and not text."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and type(x).__name__ != "bool_"


def _field_number(value: Any, attribute: str, field_name: str) -> float:
    """A finite real number (not a boolean, not a string) for ``attribute``'s ``field_name``."""
    if not _is_number(value):
        raise SchemaError(f"attribute {attribute!r}: {field_name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise SchemaError(f"attribute {attribute!r}: {field_name} must be finite, got {value!r}")
    return float(value)


def _field_list(
    value: Any, attribute: str, field_name: str, what: str, count: int | None = None
) -> list[Any]:
    """A list (or tuple) for a field, of exactly ``count`` items when given."""
    expected = f"a list of {count} {what}" if count else f"a list of {what}"
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise SchemaError(
            f"attribute {attribute!r}: {field_name} must be {expected}, got {value!r}"
        )
    if count is not None and len(value) != count:
        raise SchemaError(
            f"attribute {attribute!r}: {field_name} must be {expected}, got {len(value)}: {list(value)!r}"
        )
    return list(value)


def _field_numbers(
    value: Any, attribute: str, field_name: str, count: int | None = None
) -> tuple[float, ...]:
    items = _field_list(value, attribute, field_name, "numbers", count)
    return tuple(_field_number(x, attribute, f"{field_name} item {i}") for i, x in enumerate(items))


def _field_integers(value: Any, attribute: str, field_name: str, count: int) -> tuple[int, ...]:
    """``count`` whole numbers >= 1; a single number stands for all of them."""
    items = [value] * count if _is_number(value) or isinstance(value, bool) else value
    items = _field_list(items, attribute, field_name, "positive integers", count)
    out: list[int] = []
    for x in items:
        if not _is_number(x) or not math.isfinite(x) or not float(x).is_integer():
            raise SchemaError(
                f"attribute {attribute!r}: {field_name} must be whole numbers (integers), got {x!r}"
            )
        if x < 1:
            raise SchemaError(
                f"attribute {attribute!r}: {field_name} must be at least 1, got {x!r}"
            )
        out.append(int(x))
    return tuple(out)


def _field_names(
    value: Any, attribute: str, field_name: str, count: int | None = None
) -> tuple[str, ...]:
    """Names (columns, categories): scalars read as the text written."""
    items = _field_list(value, attribute, field_name, "names", count)
    for x in items:
        if isinstance(x, Mapping | list | tuple):
            raise SchemaError(
                f"attribute {attribute!r}: {field_name} must be scalar names, got {x!r}"
            )
    return tuple(str(x) for x in items)


Interval: TypeAlias = tuple[int, int]
Box: TypeAlias = tuple[Interval, ...]


def _name_list(values: Iterable[Any], what: str, attribute: str) -> tuple[str, ...]:
    names = tuple(str(v) for v in values)
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SchemaError(
                f"attribute {attribute!r}: duplicate {what} {name!r}; names must be unique"
            )
        seen.add(name)
    return names


def _interval(value: Any, size: int, attribute: str, axis: str = "") -> Interval:
    where = f"attribute {attribute!r}{' ' + axis if axis else ''}"
    if (
        not isinstance(value, Sequence)
        or isinstance(value, str)
        or len(value) != 2
        or not all(_is_number(v) and math.isfinite(v) and float(v).is_integer() for v in value)
    ):
        raise QueryError(
            f"{where}: expected an inclusive index interval [lo, hi] of two integers, got {value!r}"
        )
    lo, hi = int(value[0]), int(value[1])
    if lo > hi:
        raise QueryError(f"{where}: interval [{lo}, {hi}] is reversed; write it as [{hi}, {lo}]")
    if not 0 <= lo <= hi < size:
        raise QueryError(f"{where}: interval [{lo}, {hi}] is not inside [0, {size - 1}]")
    return lo, hi


# -- query values: from the attribute's unit to bins --------------------------------------------


def _query_number(x: Any, where: str) -> float:
    """A finite number from a query (a number, or text that reads as one: the CLI passes text)."""
    if isinstance(x, str):
        try:
            value = float(x.strip())
        except ValueError:
            raise QueryError(f"{where}: expected a number, got {x!r}") from None
    elif _is_number(x):
        value = float(x)
    else:
        raise QueryError(f"{where}: expected a number, got {x!r}")
    if not math.isfinite(value):
        raise QueryError(f"{where}: expected a finite number, got {x!r}")
    return value


def _value_pair(value: Any, where: str) -> tuple[float, float]:
    """``v`` (meaning ``v..v``) or ``[lo, hi]`` as two numbers, not reversed."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != 2:
            raise QueryError(
                f"{where}: expected a value or an inclusive range [lo, hi] of two values, got {value!r}"
            )
        lo, hi = _query_number(value[0], where), _query_number(value[1], where)
    else:
        lo = hi = _query_number(value, where)
    if lo > hi:
        raise QueryError(
            f"{where}: range [{lo:g}, {hi:g}] is reversed; write it as [{hi:g}, {lo:g}]"
        )
    return lo, hi


def _fmt(x: float) -> str:
    """A value as a user writes it: ``30`` rather than ``30.0``, ``33.8`` rather than
    ``33.800000000000004`` (12 significant digits).

    >>> _fmt(30.0), _fmt(33.800000000000004), _fmt(-0.25)
    ('30', '33.8', '-0.25')
    """
    r = float(f"{x:.12g}")
    return str(int(r)) if r.is_integer() and abs(r) < 2**53 else repr(r)


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
class Hierarchy:
    """A tree over categories; leaves are the categories, ordered depth-first.

    Every node covers the contiguous interval of leaves below it, so a node is a range query.
    The root is named ``root`` (``"*"`` by default) and covers every leaf.

    >>> h = Hierarchy.from_mapping({"Prof": {"Eng": None, "Doc": None}, "Svc": ["Cook"]})
    >>> h.leaves
    ('Eng', 'Doc', 'Cook')
    >>> h.interval("Prof"), h.interval("Cook"), h.interval("*")
    ((0, 1), (2, 2), (0, 2))
    """

    children: Mapping[str, tuple[str, ...]]
    root: str = "*"
    leaves: tuple[str, ...] = field(init=False)
    intervals: Mapping[str, Interval] = field(init=False)

    def __post_init__(self) -> None:
        leaves: list[str] = []
        intervals: dict[str, Interval] = {}

        def visit(node: str, depth: int) -> None:
            if depth > 64:
                raise SchemaError(f"hierarchy deeper than 64 levels at {node!r} (a cycle?)")
            kids = self.children.get(node, ())
            start = len(leaves)
            if not kids:
                leaves.append(node)
            for kid in kids:
                visit(kid, depth + 1)
            intervals[node] = (start, len(leaves) - 1)

        visit(self.root, 0)
        object.__setattr__(self, "leaves", tuple(leaves))
        object.__setattr__(self, "intervals", intervals)

    @classmethod
    def from_mapping(cls, tree: Mapping[str, Any], root: str = "*") -> Hierarchy:
        """Build from a nested mapping ``{node: {child: ...} | [leaf, ...] | None}``."""
        children: dict[str, tuple[str, ...]] = {}
        seen: set[str] = {root}

        def add(parent: str, sub: Any) -> None:
            if sub is None:
                return
            if isinstance(sub, Mapping):
                names = [str(k) for k in sub]
                items: list[tuple[str, Any]] = [(str(k), v) for k, v in sub.items()]
            elif isinstance(sub, Sequence) and not isinstance(sub, str):
                names = [str(k) for k in sub]
                items = [(n, None) for n in names]
            else:
                raise SchemaError(
                    f"hierarchy node {parent!r}: children must be a mapping, a list or null, "
                    f"got {sub!r}"
                )
            if not names:
                raise SchemaError(f"hierarchy node {parent!r} has an empty set of children")
            for name in names:
                if name in seen:
                    raise SchemaError(
                        f"hierarchy node {name!r} appears twice; names must be unique"
                    )
                seen.add(name)
            children[parent] = tuple(names)
            for name, value in items:
                add(name, value)

        add(root, tree)
        return cls(children=children, root=root)

    def to_mapping(self, node: str | None = None) -> Any:
        node = self.root if node is None else node
        kids = self.children.get(node, ())
        if not kids:
            return None
        return {kid: self.to_mapping(kid) for kid in kids}

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every node, root first, in depth-first order."""
        return tuple(self._preorder())

    def _preorder(self) -> Iterable[str]:
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(self.children.get(node, ())))

    def interval(self, node: str) -> Interval:
        try:
            return self.intervals[node]
        except KeyError:
            raise QueryError(f"hierarchy has no node {node!r}") from None

    @property
    def height(self) -> int:
        """Number of levels (a root with leaf children has height 2)."""

        def h(node: str) -> int:
            kids = self.children.get(node, ())
            return 1 + max((h(k) for k in kids), default=0)

        return h(self.root)


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
        edges = tuple(lo + i * width for i in range(bins + 1))
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

    def constraint(self, value: Any) -> tuple[Interval, ...]:
        """A category, a hierarchy node, a range of categories ``[first, last]`` in schema
        order, or categories by position ``{"bins": [i, j]}``."""
        where = f"attribute {self.name!r}"
        if isinstance(value, Mapping):
            opts = _constraint_options(value, where, ("bins",))
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
                    f"{where}: category range {list(value)!r} is reversed (the schema lists "
                    f"{self.categories[hi]!r} first)"
                )
            return ((lo, hi),)
        raise QueryError(
            f"{where}: expected a category, a hierarchy node, [first, last] categories or "
            f"{{'bins': [i, j]}}, got {value!r}"
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
            BinScale.of_edges(
                [lat0 + (lat1 - lat0) * i / rows for i in range(rows + 1)], lat1, True, False
            ),
            BinScale.of_edges(
                [lon0 + (lon1 - lon0) * i / cols for i in range(cols + 1)], lon1, True, False
            ),
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


#: The keys a schema may use, at each level: any other key is refused (a misspelt ``colum``
#: would otherwise be ignored and the attribute read from the wrong column).
SCHEMA_KEYS = ("attributes",)
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


class BoxedQuery(dict[str, Any]):
    """A query dict that carries its box, resolved once for many queries at a time
    (:func:`dpcube.release.tables.grid_cells` builds one per row of a table): ``box_array`` is
    an int array (axes, 2) of inclusive bins. Only for the schema it was resolved against."""

    def __init__(self, query: Mapping[str, Any], box_array: Any) -> None:
        super().__init__(query)
        self.box_array = box_array


class BoxedQueries(Sequence[BoxedQuery]):
    """Many queries given by their boxes at once (the rows of a labelled table): ``box_array``
    is an int array (q, axes, 2); each query dict is built only when it is asked for, so that a
    release answers a table of a million rows from the boxes alone
    (:meth:`dpcube.release.base.Release.boxes` reads ``box_array``).

    ``row(k)`` gives query ``k``'s own constraints (added to ``where``).
    """

    def __init__(
        self,
        box_array: Any,
        where: Mapping[str, Any],
        row: Any,
    ) -> None:
        self.box_array = box_array
        self._where = dict(where)
        self._row = row

    def __len__(self) -> int:
        return len(self.box_array)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        return BoxedQuery({**self._where, **self._row(k)}, self.box_array[k])


@dataclass(frozen=True)
class Schema:
    """An ordered tuple of attributes; the domain is their product."""

    attributes: tuple[Attribute, ...]

    def __post_init__(self) -> None:
        if not self.attributes:
            raise SchemaError("a schema needs at least one attribute")
        _name_list((a.name for a in self.attributes), "attribute name", "schema")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, source: str | None = None) -> Schema:
        """Build from ``{"attributes": [...]}`` (the YAML/JSON layout of the README).

        A key that is not one of :data:`SCHEMA_KEYS` or, for its kind, :data:`ATTRIBUTE_KEYS` is
        refused (``source``, the file read, is named in the message).
        """
        if not isinstance(d, Mapping) or not isinstance(d.get("attributes"), list):
            raise SchemaError("a schema is a mapping with a list under 'attributes'")
        _refuse_unknown_keys(d, SCHEMA_KEYS, "top level", source)
        return cls(tuple(_attribute_from_dict(a, source) for a in d["attributes"]))

    @classmethod
    def from_file(cls, path: str | Path) -> Schema:
        """Read a YAML or JSON schema file."""
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise SchemaError(f"cannot read schema file {str(p)!r}: {exc.strerror}") from None
        # PyYAML is imported here only: a release's schema is JSON, and ``dpcube query`` must
        # not pay for a YAML parser it never uses.
        import yaml

        from dpcube.schema_yaml import load_yaml, yaml_error_line

        try:
            data = json.loads(text) if p.suffix == ".json" else load_yaml(text)
        except json.JSONDecodeError as exc:
            raise SchemaError(
                f"schema file {str(p)!r} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                f"column {exc.colno}"
            ) from None
        except yaml.YAMLError as exc:
            raise SchemaError(
                f"schema file {str(p)!r} is not valid YAML: {yaml_error_line(exc)}"
            ) from None
        return cls.from_dict(data, source=str(p))

    def to_dict(self) -> dict[str, Any]:
        return {"attributes": [a.to_dict() for a in self.attributes]}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def __getitem__(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise QueryError(f"unknown attribute {name!r}; the schema has {', '.join(self.names)}")

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the frequency matrix (a spatial attribute contributes two axes)."""
        return tuple(n for a in self.attributes for n in a.shape)

    @property
    def size(self) -> int:
        """Number of cells of the domain (an exact Python int, never overflows)."""
        return math.prod(self.shape)

    @property
    def axes(self) -> tuple[tuple[str, int], ...]:
        """(attribute name, axis index) for every axis of the frequency matrix."""
        out: list[tuple[str, int]] = []
        for a in self.attributes:
            out.extend((a.name, i) for i in range(len(a.shape)))
        return tuple(out)

    def axis_slice(self, name: str) -> slice:
        """The axes of the frequency matrix that belong to attribute ``name``."""
        start = 0
        for a in self.attributes:
            if a.name == name:
                return slice(start, start + len(a.shape))
            start += len(a.shape)
        raise QueryError(f"unknown attribute {name!r}; the schema has {', '.join(self.names)}")

    def check_materialisable(self, max_cells: int | None = None) -> None:
        """Refuse a domain of more than ``max_cells`` cells (default :func:`default_max_cells`)."""
        limit = default_max_cells() if max_cells is None else max_cells
        if self.size > limit:
            dims = " x ".join(str(n) for n in self.shape)
            raise DomainTooLargeError(
                f"the domain has {self.size:,} cells ({dims}), more than {_limit_source(limit)}; "
                "use coarser bins or fewer attributes"
            )

    def box(self, query: Mapping[str, Any]) -> Box:
        """Turn a query dict into one inclusive index interval per axis.

        Constraints are values (see each attribute's ``constraint``): an ordinal range in the
        attribute's unit, a category or hierarchy node, a latitude/longitude box; ``{"bins":
        ...}`` names bins by number.
        """
        if isinstance(query, BoxedQuery):
            return tuple((int(lo), int(hi)) for lo, hi in query.box_array.tolist())
        if not isinstance(query, Mapping):
            raise QueryError(
                f"a query is a mapping from attribute name to constraint, got {query!r}"
            )
        names = self.names
        unknown = [k for k in query if k not in names]
        if unknown:
            raise QueryError(
                f"unknown attribute {unknown[0]!r} in query; the schema has {', '.join(names)}"
            )
        out: list[Interval] = []
        for a in self.attributes:
            if a.name in query:
                out.extend(a.constraint(query[a.name]))
            else:
                out.extend((0, n - 1) for n in a.shape)
        return tuple(out)

    def coverage(self, query: Mapping[str, Any]) -> dict[str, str]:
        """What the answer to ``query`` covers, per constrained attribute, in values.

        >>> s = Schema.from_dict({"attributes": [
        ...     {"name": "income", "kind": "ordinal", "edges": [0, 25000, 50000, 100000]}]})
        >>> s.coverage({"income": {"values": [30000, 60000], "overlapping": True}})
        {'income': '25000..99999'}
        """
        box = self.box(query)
        out: dict[str, str] = {}
        for a in self.attributes:
            if a.name in query:
                out[a.name] = a.describe(box[self.axis_slice(a.name)])
        return out

    def with_overlapping(self, query: Mapping[str, Any]) -> dict[str, Any]:
        """``query`` with every ordinal and spatial value constraint answered by the bins it
        overlaps (``{"values": ..., "overlapping": True}``); bins by number stay as they are."""
        out = dict(query)
        for name, value in query.items():
            attribute = self[name]
            if isinstance(attribute, Nominal) or (isinstance(value, Mapping) and "bins" in value):
                continue
            if isinstance(attribute, Ordinal):
                inner = value.get("values") if isinstance(value, Mapping) else value
                out[name] = {"values": inner, "overlapping": True}
            elif isinstance(value, Mapping):
                out[name] = {**value, "overlapping": True}
            elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
                out[name] = {"lat": value[0], "lon": value[1], "overlapping": True}
        return out
