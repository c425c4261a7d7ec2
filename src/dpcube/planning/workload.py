"""What is asked: a workload of linear counting queries over a schema's grid.

:func:`resolve_planning_workload` accepts everything ``dpcube plan`` documents:

- the matrix-mechanism specs (``allrange:1024``, ``prefix:64x64``, ``marginals:2:8x8x8``,
  ``random-range:1000:32x32``, ... see :mod:`dpcube.mechanisms.matrix.workloads`);
- the same kinds without the grid, taken from the schema: ``allrange``, ``prefix``,
  ``marginals:K`` (one axis per attribute);
- ``upto:K`` (alias ``queries:K``): every query the schema's attributes allow, on at most K
  attributes at a time (ranges of an ordinal attribute, rectangles of a spatial one, a category or
  the total of a nominal one, every node of a hierarchy), each query counted once
  (:func:`~dpcube.mechanisms.matrix.workloads.attribute_queries`);
- a JSON/CSV file of queries (as ``Release.answer`` takes them), a list of query dicts, or a
  :class:`~dpcube.mechanisms.matrix.workloads.Workload`.

A ``group-sizes`` workload (census group-size tables, Fioretto et al.) has no Gram matrix: its
error depends on the data, and only benchmark figures can be given (:data:`GROUP_SIZES`).
"""

from __future__ import annotations

import math
from typing import Any

from dpcube.errors import QueryError
from dpcube.mechanisms.matrix.workloads import Workload, parse_workload, resolve_workload
from dpcube.schema import Attribute, Nominal, Ordinal, Schema, Spatial

#: The workload name of census group-size tables (no Gram matrix; benchmark figures only).
GROUP_SIZES = "group-sizes"


def attribute_family(attribute: Attribute) -> str:
    """The query family token of one attribute (see
    :func:`~dpcube.mechanisms.matrix.workloads.parse_families`).

    >>> attribute_family(Ordinal.from_range("age", 0, 9, 1))
    'r10'
    """
    if isinstance(attribute, Ordinal):
        return f"r{attribute.shape[0]}"
    if isinstance(attribute, Spatial):
        return "r" + "x".join(str(n) for n in attribute.shape)
    if isinstance(attribute, Nominal):
        n = len(attribute.categories)
        h = attribute.hierarchy
        if h is None:
            return f"c{n}"
        nodes = sorted(
            {iv for node, iv in h.intervals.items() if iv[0] != iv[1] and iv != (0, n - 1)}
        )
        return f"t{n}@" + ".".join(f"{a}-{b}" for a, b in nodes) if nodes else f"c{n}"
    raise QueryError(f"attribute {attribute.name!r}: no query family for its kind")


def schema_workload_spec(schema: Schema, k: int) -> str:
    """``upto:K:<families>`` for the schema's attributes.

    >>> s = Schema.from_dict({"attributes": [
    ...     {"name": "a", "kind": "ordinal", "range": [0, 3], "width": 1},
    ...     {"name": "s", "kind": "nominal", "categories": ["F", "M"]}]})
    >>> schema_workload_spec(s, 1)
    'upto:1:r4,c2'
    """
    return f"upto:{k}:" + ",".join(attribute_family(a) for a in schema.attributes)


def _dims(schema: Schema) -> str:
    return "x".join(str(n) for n in schema.shape)


def resolve_planning_workload(workload: Any, schema: Schema | None = None) -> Workload:
    """The :class:`Workload` a spec, file, query list or Workload names (module docstring)."""
    if isinstance(workload, str):
        text = workload.strip()
        parts = text.split(":")
        kind = parts[0].lower()
        if kind == GROUP_SIZES:
            raise QueryError(
                "the group-sizes workload has no Gram matrix (its error depends on the data); "
                "only plan_mechanisms lists its benchmark figures"
            )
        if schema is not None:
            if kind in ("upto", "queries") and len(parts) == 2:
                return parse_workload(schema_workload_spec(schema, _int(parts[1], text)))
            if kind in ("allrange", "prefix") and len(parts) == 1:
                return parse_workload(f"{kind}:{_dims(schema)}")
            if kind == "marginals" and len(parts) == 2:
                if any(len(a.shape) != 1 for a in schema.attributes):
                    raise QueryError(
                        f"workload {text!r}: marginals over the schema need one axis per "
                        "attribute; give the grid (marginals:K:8x8x...) or use upto:K"
                    )
                return parse_workload(f"marginals:{_int(parts[1], text)}:{_dims(schema)}")
        elif (kind in ("allrange", "prefix") and len(parts) == 1) or (
            kind in ("upto", "queries", "marginals") and len(parts) == 2
        ):
            raise QueryError(f"workload {text!r} takes its grid from the schema: give a schema")
    w = resolve_workload(workload, schema)
    if schema is not None and w.n != math.prod(schema.shape):
        raise QueryError(
            f"the workload {w.name!r} has {w.n:,} cells but the schema's grid "
            f"{'x'.join(map(str, schema.shape))} has {math.prod(schema.shape):,}: "
            "give a workload over the schema's grid"
        )
    return w


def _int(text: str, spec: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise QueryError(f"workload {spec!r}: K must be an integer, got {text!r}") from None


__all__ = [
    "GROUP_SIZES",
    "attribute_family",
    "resolve_planning_workload",
    "schema_workload_spec",
]
