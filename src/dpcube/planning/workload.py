"""What is asked: a workload of linear counting queries over a schema's grid.

:func:`resolve_planning_workload` accepts everything ``dpcube plan`` documents:

- the matrix-mechanism specs (``allrange:1024``, ``prefix:64x64``, ``marginals:2:8x8x8``,
  ``random-range:1000:32x32``, ... see :mod:`dpcube.workloads`);
- the same kinds without the grid, taken from the schema: ``allrange``, ``prefix``,
  ``marginals:K`` (one axis per attribute);
- ``upto:K`` (alias ``queries:K``): every query the schema's attributes allow, on at most K
  attributes at a time (ranges of an ordinal attribute, rectangles of a spatial one, a category or
  the total of a nominal one, every node of a hierarchy), each query counted once
  (:func:`~dpcube.workloads.attribute_queries`);
- a JSON/CSV file of queries (as ``Release.answer`` takes them), a list of query dicts, or a
  :class:`~dpcube.workloads.Workload`.

A ``group-sizes`` workload (census group-size tables, Fioretto et al.) has no Gram matrix: its
error depends on the data, and only benchmark figures can be given (:data:`GROUP_SIZES`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import QueryError
from dpcube.schema import Schema
from dpcube.workloads import (
    Workload,
    all_intervals,
    resolve_workload,
)

#: The workload name of census group-size tables (no Gram matrix; benchmark figures only).
GROUP_SIZES = "group-sizes"


def resolve_planning_workload(workload: Any, schema: Schema | None = None) -> Workload:
    """The :class:`Workload` a spec, file, query list or Workload names (module docstring): the
    matrix mechanism's own parser (:func:`~dpcube.workloads.resolve_workload`,
    so ``dpcube release --mechanism matrix --workload`` accepts the same specs), plus the
    ``group-sizes`` refusal and a check that the workload covers the schema's grid."""
    if isinstance(workload, str) and workload.strip().split(":")[0].lower() == GROUP_SIZES:
        raise QueryError(
            "the group-sizes workload has no Gram matrix (its error depends on the data); "
            "only plan_mechanisms lists its benchmark figures"
        )
    w = resolve_workload(workload, schema)
    if schema is not None and w.n != math.prod(schema.shape):
        raise QueryError(
            f"the workload {w.name!r} has {w.n:,} cells but the schema's grid "
            f"{'x'.join(map(str, schema.shape))} has {math.prod(schema.shape):,}: "
            "give a workload over the schema's grid"
        )
    return w


#: Range and prefix workloads are listed query by query (for the largest query variance) up to
#: this many queries.
MAX_LISTED_QUERIES = 200_000


def workload_boxes(w: Workload) -> NDArray[np.int64] | None:
    """The workload's queries as boxes (q, axes, 2): its own, or those of an allrange / prefix
    spec of at most :data:`MAX_LISTED_QUERIES` queries; None otherwise.

    >>> from dpcube.workloads import parse_workload
    >>> workload_boxes(parse_workload("prefix:3")).tolist()
    [[[0, 0]], [[0, 1]], [[0, 2]]]
    """
    if w.boxes is not None:
        return w.boxes
    kind = (w.spec or "").split(":")[0]
    if w.size > MAX_LISTED_QUERIES:
        return None
    if kind == "upto":
        _, order, families = (w.spec or "").split(":")
        return upto_boxes(int(order), families)
    if kind == "marginals" and min(w.dims) > 1:  # every K-axis projection's cells
        k = int((w.spec or "").split(":")[1])
        boxes = upto_boxes(k, ",".join(f"c{d}" for d in w.dims))
        constrained = np.sum(np.any(boxes != _full(w.dims), axis=2), axis=1)
        return boxes[constrained == k]
    if kind not in ("allrange", "prefix"):
        return None
    per_axis = [
        all_intervals(d)
        if kind == "allrange"
        else np.stack([np.zeros(d, np.int64), np.arange(d)], 1)
        for d in w.dims
    ]
    grids = np.meshgrid(*[np.arange(len(p)) for p in per_axis], indexing="ij")
    return np.stack([per_axis[i][g.ravel()] for i, g in enumerate(grids)], axis=1).astype(np.int64)


def _full(dims: tuple[int, ...]) -> NDArray[np.int64]:
    return np.array([[0, d - 1] for d in dims], dtype=np.int64)


def family_boxes(token: str) -> NDArray[np.int64]:
    """The queries of one attribute family as boxes over its axes, the whole domain last.

    >>> family_boxes("c2").tolist(), family_boxes("t3@0-1")[:, 0].tolist()
    ([[[0, 0]], [[1, 1]], [[0, 1]]], [[0, 0], [1, 1], [2, 2], [0, 1], [0, 2]])
    """
    kind, rest = token[:1], token[1:]
    if kind == "r":
        dims = tuple(int(d) for d in rest.split("x"))
        per_axis = [all_intervals(d) for d in dims]
        grids = np.meshgrid(*[np.arange(len(p)) for p in per_axis], indexing="ij")
        boxes = np.stack([per_axis[i][g.ravel()] for i, g in enumerate(grids)], axis=1)
        full = np.all(boxes[:, :, 0] == 0, axis=1) & np.all(
            boxes[:, :, 1] == np.array(dims) - 1, axis=1
        )
        return np.concatenate([boxes[~full], boxes[full]]).astype(np.int64)
    head, _, nodes = rest.partition("@")
    n = int(head)
    intervals = [(i, i) for i in range(n)] if n > 1 else []
    for node in [x for x in nodes.split(".") if x]:
        lo, _, hi = node.partition("-")
        intervals.append((int(lo), int(hi)))
    intervals.append((0, n - 1))
    return np.array(intervals, dtype=np.int64).reshape(-1, 1, 2)


def upto_boxes(k: int, families: str) -> NDArray[np.int64]:
    """The boxes of ``upto:K:<families>`` in the order of no particular use: every query that
    constrains at most K attributes, once (the Gram of ``attribute_queries``)."""
    import itertools

    fams = [family_boxes(t.strip()) for t in families.split(",")]
    full = [f[-1:] for f in fams]
    constrained = [f[:-1] for f in fams]
    out = []
    for j in range(k + 1):
        for subset in itertools.combinations(range(len(fams)), j):
            parts = [constrained[i] if i in subset else full[i] for i in range(len(fams))]
            index = np.meshgrid(*[np.arange(len(p)) for p in parts], indexing="ij")
            out.append(
                np.concatenate([p[g.ravel()] for p, g in zip(parts, index, strict=True)], axis=1)
            )
    return np.concatenate(out).astype(np.int64)


__all__ = [
    "GROUP_SIZES",
    "family_boxes",
    "resolve_planning_workload",
    "upto_boxes",
    "workload_boxes",
]
