"""Workloads of linear counting queries (Li, Miklau, "Efficient Batch Query Answering Under
Differential Privacy", 2011 preprint, Defs. 2.1-2.2, Sec. 5 and App. A).

A :class:`Workload` is known through its Gram matrix ``G = WᵀW`` (everything the matrix mechanism
needs: errors, the singular value bound and LSA depend on W only through G, Prop. 2.4 and Def. 3.4),
its grid ``dims`` (cells flattened in C order), the number of queries and, when they are boxes,
the boxes themselves. Regular workloads use closed forms and Kronecker structure so that a
multi-dimensional workload is never materialised.

Named specs (:func:`parse_workload`): ``allrange:1024``, ``allrange:32x32``, ``prefix:4096``,
``marginals:2:8x8x8``, ``random-range:10000:32x32``, ``biased-range:2000:1024``,
``coverage-range:2000:0.05:256``, ``marginal-ranges:16x16``, ``marginal-predicates:8x8``,
``allpredicate:8``.

>>> w = parse_workload("allrange:4")
>>> w.gram.dense().astype(int).tolist()
[[4, 3, 2, 1], [3, 6, 4, 2], [2, 4, 6, 3], [1, 2, 3, 4]]
>>> w.size, parse_workload("allrange:32x32").size
(10, 278784)
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcube.errors import QueryError
from dpcube.linalg.boxes import BoxGram
from dpcube.linalg.operators import (
    Explicit,
    Identity,
    Kronecker,
    LinearOperator,
    Sum,
    Total,
    box_rows,
)
from dpcube.schema import Attribute, Nominal, Ordinal, Schema, Spatial

IntArray = NDArray[np.int64]


@dataclass
class Workload:
    """A batch of linear queries over the cells of a grid, known through ``G = WᵀW``.

    ``spec`` is a string that rebuilds the workload with :func:`parse_workload` (``None`` for
    explicit ones, which keep their ``boxes`` or ``rows`` instead).
    """

    name: str
    dims: tuple[int, ...]
    gram: LinearOperator
    size: int
    spec: str | None = None
    boxes: IntArray | None = None
    rows: LinearOperator | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """Number of cells."""
        return math.prod(self.dims)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (a spec string, or the boxes) that :func:`workload_from_dict` reads."""
        if self.spec is not None:
            return {"spec": self.spec}
        if self.boxes is not None:
            return {"name": self.name, "dims": list(self.dims), "boxes": self.boxes.tolist()}
        raise QueryError(f"workload {self.name!r} has neither a spec nor boxes; it cannot be saved")


def workload_from_dict(d: Mapping[str, Any]) -> Workload:
    """Inverse of :meth:`Workload.to_dict`."""
    if "spec" in d:
        return parse_workload(str(d["spec"]))
    return from_boxes(
        np.asarray(d["boxes"], dtype=np.int64), tuple(d["dims"]), name=str(d.get("name", "boxes"))
    )


# -- closed forms -----------------------------------------------------------------------------


def allrange_gram_1d(n: int) -> NDArray[np.float64]:
    """Gram of AllRange(n): ``G_ij = min(i,j)·(n − max(i,j) + 1)`` with 1-indexed cells (App. A).

    >>> allrange_gram_1d(2).tolist()
    [[2.0, 1.0], [1.0, 2.0]]
    """
    i = np.arange(1, n + 1)
    return (np.minimum.outer(i, i) * (n - np.maximum.outer(i, i) + 1)).astype(np.float64)


def prefix_gram_1d(n: int) -> NDArray[np.float64]:
    """Gram of the n prefix queries ``[0, i]``: ``G_ij = n − max(i, j)`` (0-indexed).

    >>> prefix_gram_1d(3).tolist()
    [[3.0, 2.0, 1.0], [2.0, 2.0, 1.0], [1.0, 1.0, 1.0]]
    """
    i = np.arange(n)
    return (n - np.maximum.outer(i, i)).astype(np.float64)


def allrange_rows_1d(n: int) -> NDArray[np.float64]:
    """The n(n+1)/2 rows of AllRange(n) explicitly, ordered by (a, b) (small n only).

    >>> allrange_rows_1d(2).tolist()
    [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]
    """
    a, b = np.triu_indices(n)
    cells = np.arange(n)
    return ((cells >= a[:, None]) & (cells <= b[:, None])).astype(np.float64)


def allpredicate_gram(n: int) -> NDArray[np.float64]:
    """Gram of AllPredicate(n) (all 2ⁿ 0/1 queries): ``2^{n−2}(I + J)`` (App. C).

    >>> allpredicate_gram(2).tolist()
    [[2.0, 1.0], [1.0, 2.0]]
    """
    return 2.0 ** (n - 2) * (np.eye(n) + np.ones((n, n)))


def _kron_or_single(factors: list[LinearOperator]) -> LinearOperator:
    return factors[0] if len(factors) == 1 else Kronecker(factors)


def allrange(dims: Sequence[int]) -> Workload:
    """AllRange(d₁,…,d_k): every axis-aligned box; ``G = G₁ ⊗ … ⊗ G_k`` (App. A)."""
    dims = tuple(int(d) for d in dims)
    gram = _kron_or_single([Explicit(allrange_gram_1d(d)) for d in dims])
    size = math.prod(d * (d + 1) // 2 for d in dims)
    return Workload(
        f"AllRange({','.join(map(str, dims))})",
        dims,
        gram,
        size,
        spec=f"allrange:{_dims_str(dims)}",
    )


def prefix(dims: Sequence[int]) -> Workload:
    """Prefix (dominance) queries ``[0, i₁] x … x [0, i_k]``: ``G = ⊗ prefix_gram``."""
    dims = tuple(int(d) for d in dims)
    gram = _kron_or_single([Explicit(prefix_gram_1d(d)) for d in dims])
    return Workload(
        f"Prefix({','.join(map(str, dims))})",
        dims,
        gram,
        math.prod(dims),
        spec=f"prefix:{_dims_str(dims)}",
    )


def allpredicate(n: int) -> Workload:
    """AllPredicate(n): all 2ⁿ 0/1 queries (variable agnostic, App. C)."""
    return Workload(
        f"AllPredicate({n})", (n,), Explicit(allpredicate_gram(n)), 2**n, spec=f"allpredicate:{n}"
    )


def marginals(k: int, dims: Sequence[int]) -> Workload:
    """All k-way marginals: for every set S of k axes, one query per cell of the S-projection.

    ``G = Σ_S ⊗ᵢ (I if i ∈ S else J)``, with ``J`` the all-ones matrix (Sec. 4.3.1).
    """
    dims = tuple(int(d) for d in dims)
    if not 0 <= k <= len(dims):
        raise QueryError(f"marginals: k = {k} must be between 0 and the number of axes {len(dims)}")
    parts: list[LinearOperator] = []
    size = 0
    for subset in itertools.combinations(range(len(dims)), k):
        factors: list[LinearOperator] = [
            Identity(d) if i in subset else Explicit(np.ones((d, d))) for i, d in enumerate(dims)
        ]
        parts.append(_kron_or_single(factors))
        size += math.prod(dims[i] for i in subset)
    gram: LinearOperator = parts[0] if len(parts) == 1 else Sum(parts)
    return Workload(
        f"{k}-way marginals({_dims_str(dims)})",
        dims,
        gram,
        size,
        spec=f"marginals:{k}:{_dims_str(dims)}",
    )


def marginal_ranges(dims: Sequence[int]) -> Workload:
    """Range queries over every one-way marginal (Fig 3(c), Example 4.2): on axis i,
    ``1ᵀ ⊗ … ⊗ AllRange(dᵢ) ⊗ … ⊗ 1ᵀ``; Gram ``Σᵢ J ⊗ … ⊗ Gᵢ ⊗ … ⊗ J``."""
    dims = tuple(int(d) for d in dims)
    parts: list[LinearOperator] = []
    for i in range(len(dims)):
        factors: list[LinearOperator] = [
            Explicit(allrange_gram_1d(d)) if j == i else Total(d).gram() for j, d in enumerate(dims)
        ]
        parts.append(_kron_or_single(factors))
    size = sum(d * (d + 1) // 2 for d in dims)
    gram: LinearOperator = parts[0] if len(parts) == 1 else Sum(parts)
    return Workload(
        f"MarginalRanges({_dims_str(dims)})",
        dims,
        gram,
        size,
        spec=f"marginal-ranges:{_dims_str(dims)}",
    )


def marginal_predicates(dims: Sequence[int]) -> Workload:
    """All predicate (0/1) queries over every one-way marginal (Sec. 4.3.1, Thm 4.2): on axis i,
    ``1ᵀ ⊗ … ⊗ AllPredicate(dᵢ) ⊗ … ⊗ 1ᵀ``; Gram ``Σᵢ J ⊗ … ⊗ 2^{dᵢ−2}(I + J) ⊗ … ⊗ J``.

    >>> marginal_predicates((2, 3)).size
    12
    """
    dims = tuple(int(d) for d in dims)
    parts: list[LinearOperator] = []
    for i in range(len(dims)):
        factors: list[LinearOperator] = [
            Explicit(allpredicate_gram(d)) if j == i else Total(d).gram()
            for j, d in enumerate(dims)
        ]
        parts.append(_kron_or_single(factors))
    gram: LinearOperator = parts[0] if len(parts) == 1 else Sum(parts)
    spec = f"marginal-predicates:{_dims_str(dims)}"
    return Workload(
        f"MarginalPredicates({_dims_str(dims)})", dims, gram, sum(2**d for d in dims), spec=spec
    )


def parse_families(text: str) -> list[tuple[str, tuple[int, ...], NDArray[np.float64]]]:
    """Per-attribute query families of an ``upto`` spec, comma-separated: ``r16`` (every range of
    16 bins), ``r8x8`` (every rectangle of an 8 x 8 spatial grid), ``c3`` (each of 3 categories and
    their total), ``t4@0-1.2-3`` (the nodes of a hierarchy over 4 leaves: every leaf, the root and
    the internal nodes listed as leaf intervals). Returns (token, axes, Gram of the family).

    >>> [(t, d, g.shape) for t, d, g in parse_families("r3,c2")]
    [('r3', (3,), (3, 3)), ('c2', (2,), (2, 2))]
    >>> parse_families("t3@0-1")[0][2].astype(int).tolist()  # leaves, root, node {0, 1}
    [[3, 2, 1], [2, 3, 1], [1, 1, 2]]
    """
    out = []
    for token in text.split(","):
        token = token.strip()
        kind, rest = token[:1], token[1:]
        if kind == "r":
            dims = parse_dims(rest)
            for d in dims:
                check_dense_side(d, f"an axis of query family {token!r}")
            gram = np.ones((1, 1))
            for d in dims:
                gram = np.asarray(np.kron(gram, allrange_gram_1d(d)), dtype=np.float64)
            out.append((token, dims, gram))
        elif kind in ("c", "t"):
            head, _, nodes = rest.partition("@")
            if not head.isdigit() or int(head) < 1:
                raise QueryError(f"query family {token!r}: expected {kind}<number of categories>")
            n = int(head)
            check_dense_side(n, f"query family {token!r}")
            # one category alone is the total: the family is that one query
            gram = np.eye(n) + np.ones((n, n)) if n > 1 else np.ones((1, 1))
            for node in [x for x in nodes.split(".") if x] if kind == "t" else []:
                lo, _, hi = node.partition("-")
                a, b = int(lo), int(hi)
                if not 0 <= a <= b < n:
                    raise QueryError(
                        f"query family {token!r}: node {node!r} is not inside 0-{n - 1}"
                    )
                gram[a : b + 1, a : b + 1] += 1.0
            out.append((token, (n,), gram))
        else:
            raise QueryError(
                f"unknown query family {token!r}; use r<bins>, r<bins>x<bins>, c<categories> or "
                "t<leaves>@<lo>-<hi>.<lo>-<hi>"
            )
    return out


def attribute_queries(k: int, families: str) -> Workload:
    """Every query that constrains at most ``k`` attributes, each constrained attribute with a query
    of its family (:func:`parse_families`), the others unconstrained; every query counted once.

    With ``Qᵢ`` the family of attribute i (its Gram ``Gᵢ``, containing the unconstrained query,
    Gram ``J``), the queries constraining exactly the set T are ``⊗_{i∈T}(Qᵢ∖{1}) ⊗_{i∉T} 1``, so
    ``G = Σ_{|T|≤k} ⊗_{i∈T}(Gᵢ − J) ⊗_{i∉T} J = Σ_U c_U ⊗_{i∈U} Gᵢ ⊗_{i∉U} J`` with
    ``c_U = Σ_{j=0}^{k−|U|} (−1)^j C(d−|U|, j)`` (expanding the products): a sum of Kronecker
    products, never formed densely.

    >>> w = attribute_queries(1, "r2,c2")   # 1 total + 2 ranges + 2 categories
    >>> w.size, np.allclose(w.gram.dense(), from_matrix(
    ...     [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 0, 1]]).gram.dense())
    (5, True)
    """
    fams = parse_families(families)
    d = len(fams)
    if not 0 <= k <= d:
        raise QueryError(f"upto: k = {k} must be between 0 and the number of attributes {d}")
    dims = tuple(n for _, axes, _ in fams for n in axes)
    parts: list[LinearOperator] = []
    for size_u in range(k + 1):
        coefficient = sum((-1) ** j * math.comb(d - size_u, j) for j in range(k - size_u + 1))
        if coefficient == 0:
            continue
        for subset in itertools.combinations(range(d), size_u):
            factors: list[LinearOperator] = []
            for i, (_, axes, family_gram) in enumerate(fams):
                if i in subset:
                    if len(axes) == 1:
                        factors.append(Explicit(family_gram))
                    else:  # a rectangle family is the Kronecker product of its axes' ranges
                        factors.extend(Explicit(allrange_gram_1d(n)) for n in axes)
                else:
                    factors.extend(Total(n).gram() for n in axes)
            factors[0] = Explicit(coefficient * factors[0].dense())
            parts.append(_kron_or_single(factors))
    counts = [_family_size(t) for t, _, _ in fams]
    size = sum(
        math.prod(counts[i] - 1 for i in subset)
        for j in range(k + 1)
        for subset in itertools.combinations(range(d), j)
    )
    gram: LinearOperator = parts[0] if len(parts) == 1 else Sum(parts)
    return Workload(
        f"queries on up to {k} attributes ({families})",
        dims,
        gram,
        size,
        spec=f"upto:{k}:{families}",
    )


def _family_size(token: str) -> int:
    """Number of queries of a family, the unconstrained one included.

    >>> _family_size("r3"), _family_size("r2x2"), _family_size("c3"), _family_size("t4@0-1.2-3")
    (6, 9, 4, 7)
    """
    kind, rest = token[:1], token[1:]
    if kind == "r":
        return math.prod(n * (n + 1) // 2 for n in parse_dims(rest))
    head, _, nodes = rest.partition("@")
    n = int(head)
    return n + 1 + len([x for x in nodes.split(".") if x]) if n > 1 else 1


def marginal_range_parts(dims: Sequence[int]) -> list[tuple[int, Workload]]:
    """The separated workloads of :func:`marginal_ranges` (Thm 4.2): (axis, AllRange(dᵢ))."""
    return [(i, allrange((d,))) for i, d in enumerate(dims)]


# -- explicit and sampled ---------------------------------------------------------------------


def from_boxes(
    boxes: ArrayLike, dims: Sequence[int], name: str = "boxes", spec: str | None = None
) -> Workload:
    """A workload of 0/1 box queries (shape (q, k, 2), inclusive bounds) on grid ``dims``."""
    dims = tuple(int(d) for d in dims)
    check_box_grid(dims, f"workload {name!r}")
    b = np.asarray(boxes, dtype=np.int64).reshape(-1, len(dims), 2)
    if len(b) == 0:
        raise QueryError("the workload has no queries; give at least one range query")
    lo, hi = b[:, :, 0], b[:, :, 1]
    if np.any(lo < 0) or np.any(hi >= np.array(dims)) or np.any(lo > hi):
        bad = int(np.flatnonzero(np.any((lo < 0) | (hi >= np.array(dims)) | (lo > hi), axis=1))[0])
        raise QueryError(
            f"query {bad} of the workload is not a box inside the grid {dims}: {b[bad].tolist()}"
        )
    if math.prod(dims) > BOX_GRAM_CELLS:  # G = Σ_q ⊗ᵢ r_qi r_qiᵀ kept as the boxes
        return Workload(name, dims, BoxGram(b, dims), len(b), spec=spec, boxes=b)
    rows = box_rows(b, dims)
    return Workload(name, dims, Explicit(box_gram(b, dims)), len(b), spec=spec, boxes=b, rows=rows)


#: Up to this many cells the Gram of a box workload is built by :func:`box_gram` (dense n x n);
#: above, it is a :class:`~dpcube.linalg.boxes.BoxGram` (the boxes; never an n x n matrix).
BOX_GRAM_CELLS = 4096

#: Largest grid of a box workload: the planner holds a few vectors of n cells and one dense
#: matrix per axis (each axis at most :data:`MAX_DENSE_SIDE`); 2²² cells is 32 MiB a vector.
MAX_BOX_CELLS = 2**22


def check_box_grid(dims: tuple[int, ...], what: str) -> None:
    """Refuse, before allocating, a box workload's grid that is too large (one line, the fix).

    >>> check_box_grid((4096, 4096), "workload 'q'")
    Traceback (most recent call last):
    ...
    dpcube.errors.QueryError: workload 'q' is over a grid of 16,777,216 cells; box workloads are supported up to 4,194,304 cells (e.g. 2048 x 2048): use coarser bins
    """
    for d in dims:
        check_dense_side(d, f"an axis of the grid of {what}")
    if math.prod(dims) > MAX_BOX_CELLS:
        raise QueryError(
            f"{what} is over a grid of {math.prod(dims):,} cells; box workloads are supported up "
            f"to {MAX_BOX_CELLS:,} cells (e.g. 2048 x 2048): use coarser bins"
        )


def box_gram(boxes: ArrayLike, dims: Sequence[int]) -> NDArray[np.float64]:
    """``WᵀW`` of 0/1 box queries without forming W: ``G[i, j]`` counts the boxes containing
    both cells, i.e. with ``lo ≤ min(i, j)`` and ``hi ≥ max(i, j)`` on every axis — a
    2k-dimensional cumulative count of the boxes by their corners, read at (min, max). O(n² + q).

    >>> box_gram([[[0, 1]], [[1, 2]]], (3,)).astype(int).tolist()
    [[1, 1, 0], [1, 2, 1], [0, 1, 1]]
    """
    dims = tuple(int(d) for d in dims)
    b = np.asarray(boxes, dtype=np.int64).reshape(-1, len(dims), 2)
    counts = np.zeros(tuple(d for d in dims for _ in range(2)))
    np.add.at(counts, tuple(b.reshape(len(b), -1).T), 1.0)
    for axis in range(2 * len(dims)):
        if axis % 2 == 0:
            np.cumsum(counts, axis=axis, out=counts)
        else:
            flipped = np.flip(counts, axis=axis)
            counts = np.flip(np.cumsum(flipped, axis=axis), axis=axis)
    cells = np.indices(dims).reshape(len(dims), -1)
    index = []
    for axis in range(len(dims)):
        i, j = cells[axis][:, None], cells[axis][None, :]
        index.extend([np.minimum(i, j), np.maximum(i, j)])
    return np.asarray(counts[tuple(index)], dtype=np.float64)


def from_matrix(
    matrix: ArrayLike, dims: Sequence[int] | None = None, name: str = "explicit"
) -> Workload:
    """A workload given by its rows (any real coefficients, Li & Miklau, Def. 2.1)."""
    rows = Explicit(np.asarray(matrix, dtype=np.float64))
    d = tuple(dims) if dims is not None else (rows.cols,)
    if math.prod(d) != rows.cols:
        raise QueryError(
            f"the workload has {rows.cols} columns but the grid {d} has {math.prod(d)} cells"
        )
    return Workload(name, d, rows.gram(), rows.rows, rows=rows)


def all_intervals(d: int) -> IntArray:
    """All d(d+1)/2 intervals ``[a, b]`` of one axis, shape (d(d+1)/2, 2), ordered by (a, b)."""
    a, b = np.triu_indices(d)
    return np.stack([a, b], axis=1).astype(np.int64)


def _decode(index: IntArray, dims: tuple[int, ...]) -> IntArray:
    per_axis = [all_intervals(d) for d in dims]
    multi = np.unravel_index(index, tuple(len(p) for p in per_axis))
    return np.stack([per_axis[i][multi[i]] for i in range(len(dims))], axis=1)


def _centre_distance(dims: tuple[int, ...]) -> NDArray[np.float64]:
    """Distance of every range's centre from the domain centre, axes normalised to [−½, ½]."""
    per_axis = []
    for d in dims:
        iv = all_intervals(d)
        per_axis.append(((iv[:, 0] + iv[:, 1] + 1) / 2.0) / d - 0.5)
    sq = [c**2 for c in per_axis]
    total = sq[0]
    for s in sq[1:]:
        total = np.add.outer(total, s).ravel()
    return np.sqrt(total)


def random_ranges(
    m: int,
    dims: Sequence[int],
    seed: int = 0,
    bias: str | None = None,
    beta: float = 5.0,
) -> Workload:
    """``m`` distinct ranges sampled without replacement from AllRange(dims) (Sec. 5.1).

    ``bias=None``: uniform. ``bias="extremes"`` (the paper's intent, Li & Miklau, Sec. 5.1 footnote
    1, whose wording contradicts itself): weight ``exp(−β (D_max − D)/D_max)`` with D the distance
    of the range centre from the domain centre; ``bias="centre"`` (the footnote's literal reading):
    weight ``exp(−β D/D_max)``.
    """
    dims = tuple(int(d) for d in dims)
    total = math.prod(d * (d + 1) // 2 for d in dims)
    if not 1 <= m <= total:
        raise QueryError(f"cannot sample {m} distinct ranges: the grid {dims} has {total}")
    rng = np.random.default_rng(seed)
    if bias is None:
        index = np.sort(rng.choice(total, size=m, replace=False))
    else:
        dist = _centre_distance(dims)
        dmax = float(dist.max()) or 1.0
        if bias == "extremes":
            w = np.exp(-beta * (dmax - dist) / dmax)
        elif bias == "centre":
            w = np.exp(-beta * dist / dmax)
        else:
            raise QueryError(f"bias must be None, 'extremes' or 'centre', got {bias!r}")
        # Weighted sampling without replacement (Efraimidis & Spirakis): the m largest keys
        # u^(1/w) = the m smallest -log(u)/w, in O(N) rather than numpy's O(mN) choice.
        keys = -np.log(rng.random(total)) / w
        index = np.sort(np.argpartition(keys, m - 1)[:m])
    kind = (
        "random-range"
        if bias is None
        else ("biased-range" if bias == "extremes" else "central-range")
    )
    spec = f"{kind}:{m}:{_dims_str(dims)}" + (f":seed={seed}" if seed else "")
    return from_boxes(_decode(index, dims), dims, name=f"{kind}({m}, {_dims_str(dims)})", spec=spec)


def coverage_ranges(m: int, coverage: float, n: int, seed: int = 0) -> Workload:
    """``m`` distinct 1-D ranges with average coverage about ``coverage`` (Fig 3(b); the lengths are
    ours, the paper does not give them): lengths uniform in ``[⌈0.5cn⌉, ⌈1.5cn⌉]`` clipped to [1,
    n], uniform start."""
    rng = np.random.default_rng(seed)
    lo_len = max(1, math.ceil(0.5 * coverage * n))
    hi_len = min(n, max(lo_len, math.ceil(1.5 * coverage * n)))
    candidates = [
        (a, a + length - 1) for length in range(lo_len, hi_len + 1) for a in range(n - length + 1)
    ]
    pick = rng.choice(len(candidates), size=min(m, len(candidates)), replace=False)
    boxes = np.array([candidates[i] for i in np.sort(pick)], dtype=np.int64).reshape(-1, 1, 2)
    spec = f"coverage-range:{m}:{coverage}:{n}" + (f":seed={seed}" if seed else "")
    return from_boxes(boxes, (n,), name=f"coverage-range({m}, {coverage}, {n})", spec=spec)


def average_coverage(w: Workload) -> float:
    """Mean fraction of the cells covered by the workload's box queries."""
    if w.boxes is None:
        raise QueryError(f"workload {w.name!r} is not a list of boxes")
    sizes = np.prod(w.boxes[:, :, 1] - w.boxes[:, :, 0] + 1, axis=1)
    return float(sizes.mean() / w.n)


# -- parsing ----------------------------------------------------------------------------------


def _dims_str(dims: Sequence[int]) -> str:
    return "x".join(str(d) for d in dims)


def parse_dims(text: str) -> tuple[int, ...]:
    """``"32x32"`` -> (32, 32).

    >>> parse_dims("16x8x8")
    (16, 8, 8)
    """
    try:
        dims = tuple(int(t) for t in text.lower().split("x"))
    except ValueError:
        raise QueryError(
            f"bad grid {text!r}: write the axis sizes separated by 'x', e.g. 32x32"
        ) from None
    if not dims or min(dims) < 1:
        raise QueryError(f"bad grid {text!r}: every axis needs at least one cell")
    return dims


#: Largest side of a dense matrix a workload builds: one per axis for the Kronecker workloads
#: (allrange, prefix, marginals), one over the whole grid for box workloads (random ranges,
#: coverage ranges, query files). 8192² float64 is 512 MiB.
MAX_DENSE_SIDE = 8192


def check_dense_side(n: int, what: str) -> None:
    """Refuse, before allocating, a workload that needs a dense ``n x n`` matrix."""
    if n > MAX_DENSE_SIDE:
        gib = n * n * 8 / 2**30
        raise QueryError(
            f"{what} has {n:,} cells and needs a dense {n:,} x {n:,} matrix ({gib:,.0f} GiB); "
            f"at most {MAX_DENSE_SIDE:,} cells are supported there: use fewer cells (coarser bins)"
        )


def _checked_spec(kind: str, args: list[str], spec: str) -> None:
    """Size of a spec's dense matrices, estimated from its text before anything is built."""
    where = f"workload {spec!r}"
    if kind in ("allrange", "prefix", "marginal-predicates", "marginal-ranges") and args:
        for d in parse_dims(args[-1]):
            check_dense_side(d, f"an axis of {where}")
    elif kind == "marginals" and len(args) == 2:
        for d in parse_dims(args[1]):
            check_dense_side(d, f"an axis of {where}")
    elif kind in ("random-range", "biased-range", "central-range") and len(args) == 2:
        n = math.prod(parse_dims(args[1]))
        if n > MAX_DENSE_SIDE:  # the sampler enumerates every range of the grid
            raise QueryError(
                f"{where}: random range specs sample among all ranges of the grid and stop at "
                f"{MAX_DENSE_SIDE:,} cells (this grid has {n:,}); for a larger grid give the "
                "boxes as a JSON/CSV query file or a list of queries"
            )
    elif kind in ("allpredicate", "coverage-range") and args and args[-1].isdigit():
        check_dense_side(int(args[-1]), f"the grid of {where}")


def parse_workload(spec: str) -> Workload:
    """A named workload from its spec string (see the module docstring)."""
    parts = spec.strip().split(":")
    kind, args = parts[0].lower(), parts[1:]
    options = dict(a.split("=", 1) for a in args if "=" in a)
    args = [a for a in args if "=" not in a]
    seed = int(options.get("seed", 0))
    _checked_spec(kind, args, spec)
    try:
        if kind == "allrange" and len(args) == 1:
            return allrange(parse_dims(args[0]))
        if kind == "prefix" and len(args) == 1:
            return prefix(parse_dims(args[0]))
        if kind == "allpredicate" and len(args) == 1:
            return allpredicate(int(args[0]))
        if kind == "marginals" and len(args) == 2:
            return marginals(int(args[0]), parse_dims(args[1]))
        if kind == "marginal-predicates" and len(args) == 1:
            return marginal_predicates(parse_dims(args[0]))
        if kind == "upto" and len(args) == 2:
            return attribute_queries(int(args[0]), args[1])
        if kind == "marginal-ranges" and len(args) == 1:
            return marginal_ranges(parse_dims(args[0]))
        if kind in ("random-range", "biased-range", "central-range") and len(args) == 2:
            bias = {"random-range": None, "biased-range": "extremes", "central-range": "centre"}[
                kind
            ]
            beta = float(options.get("beta", 5.0))
            return random_ranges(int(args[0]), parse_dims(args[1]), seed=seed, bias=bias, beta=beta)
        if kind == "coverage-range" and len(args) == 3:
            return coverage_ranges(int(args[0]), float(args[1]), int(args[2]), seed=seed)
    except ValueError as exc:
        raise QueryError(f"bad workload spec {spec!r}: {exc}") from None
    raise QueryError(
        f"unknown workload spec {spec!r}; use e.g. allrange:1024, allrange:32x32, prefix:4096, "
        "marginals:2:8x8x8, random-range:10000:32x32, with a schema allrange, prefix, "
        "marginals:K or upto:K, or a JSON/CSV file of range queries"
    )


def _csv_queries(path: Path, schema: Schema) -> list[dict[str, Any]]:
    queries: list[dict[str, Any]] = []
    with path.open(newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            q: dict[str, Any] = {}
            for name in schema.names:
                lo, hi, value = row.get(f"{name}_lo"), row.get(f"{name}_hi"), row.get(name)
                if lo not in (None, "") or hi not in (None, ""):
                    if lo in (None, "") or hi in (None, ""):
                        raise QueryError(
                            f"{path}:{line}: give both {name}_lo and {name}_hi (or neither)"
                        )
                    q[name] = [str(lo), str(hi)]  # values, inclusive (Schema.box reads them)
                elif value not in (None, ""):
                    q[name] = value
            unknown = [
                k for k in row if k and k not in schema.names and not k.endswith(("_lo", "_hi"))
            ]
            if unknown:
                raise QueryError(
                    f"{path}: unknown column {unknown[0]!r}; use <attribute>_lo/_hi or <attribute>"
                )
            queries.append(q)
    return queries


def load_workload_file(path: str | Path, schema: Schema) -> Workload:
    """Range queries from a JSON file (a list of query dicts, or ``{"queries": [...]}``, each the
    mapping ``Release.answer`` takes) or a CSV file (columns ``<attr>_lo``, ``<attr>_hi`` with
    an inclusive range of values in the attribute's unit, or ``<attr>`` with a category; blank =
    the whole axis)."""
    p = Path(path)
    if not p.is_file():
        raise QueryError(f"workload file {str(p)!r} does not exist")
    if p.suffix.lower() == ".csv":
        queries = _csv_queries(p, schema)
    else:
        try:
            data = json.loads(p.read_text())
        except json.JSONDecodeError as exc:
            raise QueryError(f"workload file {str(p)!r} is not valid JSON: {exc}") from None
        queries = data["queries"] if isinstance(data, Mapping) and "queries" in data else data
        if not isinstance(queries, list):
            raise QueryError(f"workload file {str(p)!r} must hold a list of queries")
    boxes = np.array([schema.box(q) for q in queries], dtype=np.int64).reshape(len(queries), -1, 2)
    return from_boxes(boxes, schema.shape, name=p.name)


def attribute_family(attribute: Attribute) -> str:
    """The query family token of one attribute (see
    :func:`~dpcube.workloads.parse_families`).

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


def _int(text: str, spec: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise QueryError(f"workload {spec!r}: K must be an integer, got {text!r}") from None


def schema_spec(text: str, schema: Schema | None) -> str | None:
    """The full spec of a workload that takes its grid from the schema (``allrange``,
    ``prefix``, ``marginals:K``, ``upto:K`` / ``queries:K``), or None for any other text.

    >>> s = Schema.from_dict({"attributes": [
    ...     {"name": "a", "kind": "ordinal", "range": [0, 3], "width": 1},
    ...     {"name": "s", "kind": "nominal", "categories": ["F", "M"]}]})
    >>> schema_spec("allrange", s), schema_spec("upto:2", s), schema_spec("prefix:8", s)
    ('allrange:4x2', 'upto:2:r4,c2', None)
    """
    parts = text.split(":")
    kind = parts[0].lower()
    takes_grid = (kind in ("allrange", "prefix") and len(parts) == 1) or (
        kind in ("upto", "queries", "marginals") and len(parts) == 2
    )
    if not takes_grid:
        return None
    if schema is None:
        raise QueryError(
            f"workload {text!r} takes its grid from the schema: give --schema (schema= in Python)"
        )
    if kind in ("upto", "queries"):
        return schema_workload_spec(schema, _int(parts[1], text))
    if kind in ("allrange", "prefix"):
        return f"{kind}:{_dims(schema)}"
    if any(len(a.shape) != 1 for a in schema.attributes):
        raise QueryError(
            f"workload {text!r}: marginals over the schema need one axis per "
            "attribute; give the grid (marginals:K:8x8x...) or use upto:K"
        )
    return f"marginals:{_int(parts[1], text)}:{_dims(schema)}"


def resolve_workload(workload: Any, schema: Schema | None = None) -> Workload:
    """A :class:`Workload` from a Workload, a spec string, a file path (needs ``schema``) or a
    list of query dicts (needs ``schema``).

    Spec strings are those of :func:`parse_workload` (``allrange:1024``, ``marginals:2:8x8x8``,
    ...) and, with a schema, the same kinds without the grid (``allrange``, ``prefix``,
    ``marginals:K``) and ``upto:K`` / ``queries:K``: every query the schema's attributes allow
    on at most K attributes at a time (:func:`schema_spec`)."""
    if isinstance(workload, Workload):
        return workload
    if isinstance(workload, str | Path):
        text = str(workload)
        if Path(text).is_file() or text.lower().endswith((".json", ".csv")):
            if schema is None:
                raise QueryError(
                    f"workload file {text!r} needs a schema to resolve its attribute names"
                )
            return load_workload_file(text, schema)
        return parse_workload(schema_spec(text.strip(), schema) or text)
    if isinstance(workload, list | tuple) and schema is not None:
        if not workload or not all(isinstance(q, Mapping) for q in workload):
            raise QueryError(
                "a workload given as a list needs at least one query, each a mapping such as "
                '{"age": [20, 29]}'
            )
        boxes = np.array([schema.box(q) for q in workload], dtype=np.int64).reshape(
            len(workload), -1, 2
        )
        return from_boxes(boxes, schema.shape, name="queries")
    raise QueryError(
        f"cannot use {type(workload).__name__} as a workload; give a spec string, a file or a Workload"
    )


__all__ = [
    "BOX_GRAM_CELLS",
    "MAX_BOX_CELLS",
    "Workload",
    "all_intervals",
    "allpredicate",
    "allrange",
    "allrange_gram_1d",
    "allrange_rows_1d",
    "attribute_family",
    "attribute_queries",
    "average_coverage",
    "box_gram",
    "check_box_grid",
    "check_dense_side",
    "coverage_ranges",
    "from_boxes",
    "from_matrix",
    "load_workload_file",
    "marginal_predicates",
    "marginal_range_parts",
    "marginal_ranges",
    "marginals",
    "parse_dims",
    "parse_families",
    "parse_workload",
    "prefix",
    "prefix_gram_1d",
    "random_ranges",
    "resolve_workload",
    "schema_spec",
    "schema_workload_spec",
    "workload_from_dict",
]
