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

from dpcube.schema._common import DEFAULT_MAX_CELLS, Box, Interval, default_max_cells
from dpcube.schema.attributes import (
    ATTRIBUTE_KEYS,
    Attribute,
    BinScale,
    Nominal,
    Ordinal,
    Spatial,
)
from dpcube.schema.hierarchy import Hierarchy
from dpcube.schema.schema import SCHEMA_KEYS, BoxedQueries, BoxedQuery, Schema, has_set

__all__ = [
    "ATTRIBUTE_KEYS",
    "DEFAULT_MAX_CELLS",
    "SCHEMA_KEYS",
    "Attribute",
    "BinScale",
    "Box",
    "BoxedQueries",
    "BoxedQuery",
    "Hierarchy",
    "Interval",
    "Nominal",
    "Ordinal",
    "Schema",
    "Spatial",
    "default_max_cells",
    "has_set",
]
