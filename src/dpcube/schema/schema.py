"""The :class:`Schema`: an ordered tuple of attributes whose product is the domain, and the
turning of queries into boxes (one inclusive index interval per axis), one at a time
(:meth:`Schema.box`) or many at once (:class:`BoxedQueries`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcube.errors import DomainTooLargeError, QueryError, SchemaError
from dpcube.schema._common import (
    Box,
    Interval,
    _limit_source,
    _name_list,
    default_max_cells,
)
from dpcube.schema.attributes import (
    Attribute,
    Nominal,
    Ordinal,
    _attribute_from_dict,
    _refuse_unknown_keys,
)

#: The keys a schema may use, at each level: any other key is refused (a misspelt ``colum``
#: would otherwise be ignored and the attribute read from the wrong column).
SCHEMA_KEYS = ("attributes",)


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


def _is_set(value: Any) -> bool:
    return isinstance(value, Mapping) and "in" in value


def has_set(query: Any) -> bool:
    """Whether ``query`` selects a set of categories ``{"in": [...]}`` on some attribute (it is
    then a sum of boxes: :meth:`Schema.box_set`).

    >>> has_set({"c": {"in": ["a", "b"]}}), has_set({"c": "a"}), has_set(BoxedQuery({}, None))
    (True, False, False)
    """
    if isinstance(query, BoxedQuery) or not isinstance(query, Mapping):
        return False
    return any(_is_set(v) for v in query.values())


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

    def box_set(self, query: Mapping[str, Any]) -> tuple[tuple[Interval, ...], ...]:
        """The cells a query selects, as disjoint intervals per axis: their product is the
        selection. One interval per axis for a box; a set of categories ``{"in": [...]}`` gives
        its attribute's axis one interval per separate run (:meth:`Nominal.members`), so the
        query is the sum of the boxes of the product, which are disjoint.

        >>> s = Schema.from_dict({"attributes": [
        ...     {"name": "c", "kind": "nominal", "categories": ["UA", "B6", "EV", "DL"]},
        ...     {"name": "x", "kind": "ordinal", "range": [0, 9], "width": 1}]})
        >>> s.box_set({"c": {"in": ["UA", "DL"]}, "x": [2, 3]})
        (((0, 0), (3, 3)), ((2, 3),))
        """
        if not has_set(query):
            return tuple((interval,) for interval in self.box(query))
        self.box({k: v for k, v in query.items() if not _is_set(v)})  # unknown names, errors
        out: list[tuple[Interval, ...]] = []
        for a in self.attributes:
            if a.name in query and isinstance(a, Nominal) and _is_set(query[a.name]):
                out.append(a.members(query[a.name]))
            elif a.name in query:
                out.extend((interval,) for interval in a.constraint(query[a.name]))
            else:
                out.extend(((0, n - 1),) for n in a.shape)
        return tuple(out)

    def coverage(self, query: Mapping[str, Any]) -> dict[str, str]:
        """What the answer to ``query`` covers, per constrained attribute, in values.

        >>> s = Schema.from_dict({"attributes": [
        ...     {"name": "income", "kind": "ordinal", "edges": [0, 25000, 50000, 100000]}]})
        >>> s.coverage({"income": {"values": [30000, 60000], "overlapping": True}})
        {'income': '25000..99999'}
        """
        runs = self.box_set(query)
        out: dict[str, str] = {}
        for a in self.attributes:
            if a.name in query:
                axes = runs[self.axis_slice(a.name)]
                if len(axes) == 1 and len(axes[0]) > 1:  # a set of categories: its runs
                    out[a.name] = "{" + ", ".join(a.describe([run]) for run in axes[0]) + "}"
                else:
                    out[a.name] = a.describe([interval for (interval,) in axes])
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
