"""A workload of box queries spelled out: every query of a workload as an axis-aligned box.

MWEM (:mod:`.mwem`) needs the queries themselves, not only the Gram ``WᵀW`` that a
:class:`~dpcube.workloads.Workload` keeps. Every named workload made of counting queries over
boxes is expanded here: ``allrange``, ``prefix``, ``marginals``, ``marginal-ranges``, ``upto``
(ranges, categories and hierarchy nodes are all intervals of an axis), and the workloads that
keep their boxes (sampled ranges, query files, lists of queries). Predicate workloads
(``allpredicate``, ``marginal-predicates``) are not boxes and are refused.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import QueryError
from dpcube.workloads import Workload, all_intervals, parse_families

IntArray = NDArray[np.int64]

#: Most queries MWEM scores in a round (each round answers all of them on its estimate).
MAX_BOX_QUERIES = 2**21


def _product(parts: list[IntArray]) -> IntArray:
    """Boxes combining one choice of each part: parts of shape (m_g, k_g, 2) give the
    ``prod m_g`` boxes of ``sum k_g`` axes (the first part varies slowest).

    >>> _product([np.array([[[0, 0]], [[1, 1]]]), np.array([[[0, 2]]])]).tolist()
    [[[0, 0], [0, 2]], [[1, 1], [0, 2]]]
    """
    sizes = [len(p) for p in parts]
    index = np.indices(sizes).reshape(len(parts), -1)
    return np.concatenate([p[i] for p, i in zip(parts, index, strict=True)], axis=1)


def _full(d: int) -> IntArray:
    return np.array([[[0, d - 1]]], dtype=np.int64)


def _intervals(d: int) -> IntArray:
    return all_intervals(d).reshape(-1, 1, 2)


def _family_queries(token: str, axes: tuple[int, ...]) -> IntArray:
    """The queries of one ``upto`` family other than the unconstrained one, as boxes on its axes."""
    kind, rest = token[:1], token[1:]
    if kind == "r":
        boxes = _product([_intervals(d) for d in axes])
        whole = np.all(boxes[:, :, 0] == 0, axis=1) & np.all(
            boxes[:, :, 1] == np.array(axes) - 1, axis=1
        )
        return boxes[~whole]
    head, _, nodes = rest.partition("@")
    n = int(head)
    if n == 1:
        return np.zeros((0, 1, 2), dtype=np.int64)
    leaves = [(i, i) for i in range(n)]
    inner = [tuple(int(v) for v in x.split("-")) for x in nodes.split(".") if x]
    return np.array(leaves + inner, dtype=np.int64).reshape(-1, 1, 2)


def _upto(k: int, families: str) -> IntArray:
    fams = parse_families(families)
    parts: list[IntArray] = []
    for size in range(k + 1):
        for subset in itertools.combinations(range(len(fams)), size):
            choice = [
                _family_queries(token, axes)
                if i in subset
                else np.concatenate([_full(d) for d in axes], axis=1)
                for i, (token, axes, _) in enumerate(fams)
            ]
            if all(len(c) for c in choice):
                parts.append(_product(choice))
    return np.concatenate(parts)


def workload_boxes(workload: Workload) -> IntArray:
    """Every query of ``workload`` as a box, shape (q, axes, 2) with inclusive bounds.

    >>> from dpcube.workloads import parse_workload
    >>> workload_boxes(parse_workload("prefix:3"))[:, 0].tolist()
    [[0, 0], [0, 1], [0, 2]]
    >>> len(workload_boxes(parse_workload("upto:1:r3,c2")))  # total, 5 ranges, 2 categories
    8
    """
    if workload.size > MAX_BOX_QUERIES:
        raise QueryError(
            f"workload {workload.name!r} has {workload.size:,} queries; MWEM scores every query "
            f"in every round and takes at most {MAX_BOX_QUERIES:,}: use a smaller workload "
            "(random-range:M:..., or a query file)"
        )
    if workload.boxes is not None:
        return np.asarray(workload.boxes, dtype=np.int64)
    spec = workload.spec or ""
    parts = spec.split(":")
    kind = parts[0].lower()
    dims = workload.dims
    if kind == "allrange":
        boxes = _product([_intervals(d) for d in dims])
    elif kind == "prefix":
        boxes = _product([np.array([[[0, i]] for i in range(d)]) for d in dims])
    elif kind == "marginals":
        k = int(parts[1])
        boxes = np.concatenate(
            [
                _product(
                    [
                        np.array([[[i, i]] for i in range(d)]) if axis in subset else _full(d)
                        for axis, d in enumerate(dims)
                    ]
                )
                for subset in itertools.combinations(range(len(dims)), k)
            ]
        )
    elif kind == "marginal-ranges":
        boxes = np.concatenate(
            [
                _product([_intervals(d) if a == axis else _full(d) for a, d in enumerate(dims)])
                for axis in range(len(dims))
            ]
        )
    elif kind == "upto":
        boxes = _upto(int(parts[1]), parts[2])
    else:
        raise QueryError(
            f"workload {workload.name!r} is not made of range (box) queries, which MWEM needs; "
            "use allrange, prefix, marginals, marginal-ranges, upto, random-range or a query file"
        )
    if len(boxes) != workload.size or boxes.shape[1] != len(dims):
        raise AssertionError(f"{spec}: {len(boxes)} boxes for {workload.size} queries")
    return boxes.astype(np.int64)


def box_slices(box: IntArray) -> tuple[slice, ...]:
    """The numpy index of one box's cells."""
    return tuple(slice(int(lo), int(hi) + 1) for lo, hi in box)


def covers_grid(boxes: IntArray, dims: tuple[int, ...]) -> NDArray[np.bool_]:
    """Which boxes hold every cell of the grid (their count is the total)."""
    return np.all(boxes[:, :, 0] == 0, axis=1) & np.all(
        boxes[:, :, 1] == np.array(dims) - 1, axis=1
    )


__all__ = ["MAX_BOX_QUERIES", "box_slices", "covers_grid", "workload_boxes"]
