"""Strategies of the matrix mechanism: the queries actually measured (Li, Miklau, "Efficient
Batch Query Answering Under Differential Privacy", 2011 preprint, Example 2.1, Fig. 4, Sec. 5.2
and App. C).

Every strategy is a :class:`Strategy`: an implicit operator (``dpcube.linalg``) plus a JSON spec
from which :func:`build_strategy` rebuilds it (so a saved release can recompute exact variances).
Spec kinds: ``identity``, ``total``, ``hierarchical`` (b-ary: the paper's Fig. 4 uses b = 2, Hay
et al. allow any b), ``wavelet`` (Haar),
``boxes`` (weighted 0/1 boxes: LSA output), ``dense``, ``pidentity`` (HDMM's ``[I; Θ] D⁻¹`` kept as
Θ), ``kron``, ``stack`` and ``eigen`` (built from a workload).

>>> s = hierarchical(4)
>>> s.operator.dense().astype(int).tolist()
[[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
>>> wavelet(4).operator.dense().astype(int).tolist()
[[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from dpcube.errors import QueryError
from dpcube.linalg.operators import (
    Explicit,
    Identity,
    Kronecker,
    LinearOperator,
    Total,
    VStack,
    Weighted,
    box_rows,
)


@dataclass
class Strategy:
    """A named strategy: its operator ``A`` (p x n) and the spec that rebuilds it."""

    name: str
    spec: dict[str, Any]
    operator: LinearOperator = field(repr=False)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.operator.cols


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def identity(n: int) -> Strategy:
    """``I_n`` (error ``P·tr(G)``)."""
    return Strategy("identity", {"kind": "identity", "n": int(n)}, Identity(n))


def hierarchical_boxes(n: int, branching: int = 2) -> NDArray[np.int64]:
    """Intervals of the b-ary hierarchy over n cells, top-down, left to right (Li & Miklau, Fig. 4):
    the total, then each node split into ``branching`` near-equal parts until singletons.

    >>> hierarchical_boxes(3).reshape(-1, 2).tolist()
    [[0, 2], [0, 0], [1, 2], [1, 1], [2, 2]]
    """
    if branching < 2:
        raise QueryError(f"hierarchical: branching factor must be at least 2, got {branching}")
    out: list[tuple[int, int]] = []
    level = [(0, n - 1)]
    while level:
        out.extend(level)
        nxt: list[tuple[int, int]] = []
        for lo, hi in level:
            size = hi - lo + 1
            if size == 1:
                continue
            parts = min(branching, size)
            edges = [lo + (size * k) // parts for k in range(parts + 1)]
            nxt.extend((edges[k], edges[k + 1] - 1) for k in range(parts))
        level = nxt
    return np.array(out, dtype=np.int64).reshape(-1, 1, 2)


def hierarchical(n: int, branching: int = 2) -> Strategy:
    """Hierarchical H_b (Hay et al.; b = 2 in the paper): ``2n − 1`` rows for b = 2."""
    spec = {"kind": "hierarchical", "n": int(n), "branching": int(branching)}
    return Strategy("hierarchical", spec, box_rows(hierarchical_boxes(n, branching), (n,)))


def wavelet_matrix(n: int) -> NDArray[np.float64]:
    """Haar wavelet Y (Privelet): all ones, then +1/−1 on the halves of every dyadic block of
    size ≥ 2, top-down (Li & Miklau, Sec. 5.2). n must be a power of two (the construction assumes
    n = 2^L; every domain in the paper is one)."""
    if not _is_power_of_two(n):
        raise QueryError(
            f"the Haar wavelet strategy needs a power-of-two axis size, got {n}; use hierarchical or lsa"
        )
    rows = [np.ones(n)]
    size = n
    while size >= 2:
        for start in range(0, n, size):
            r = np.zeros(n)
            r[start : start + size // 2] = 1.0
            r[start + size // 2 : start + size] = -1.0
            rows.append(r)
        size //= 2
    return np.array(rows)


def wavelet(n: int) -> Strategy:
    """Haar wavelet Y: n rows, entries in {0, ±1}, column squared norm ``log₂ n + 1``."""
    import scipy.sparse as sp

    return Strategy(
        "wavelet", {"kind": "wavelet", "n": int(n)}, Explicit(sp.csr_matrix(wavelet_matrix(n)))
    )


def hadamard(k: int) -> NDArray[np.float64]:
    """Sylvester–Hadamard ``Q_k`` (2^k x 2^k, ``QᵀQ = 2^k I``, row 0 all ones; Li & Miklau, App.
    C)."""
    q = np.ones((1, 1))
    for _ in range(k):
        q = np.block([[q, q], [q, -q]])
    return q


def variable_agnostic_optimal(a: float, b: float, n: int) -> Strategy:
    """The optimal strategy ``diag(μ₁^{1/4}, μ₂^{1/4}, …) Q_k`` for ``G = (a−b)I + bJ``
    (Li & Miklau, Thm C.1, corrected here to fourth roots, see :func:`eigen`); n = 2^k."""
    if not _is_power_of_two(n):
        raise QueryError(f"the Hadamard construction needs a power-of-two domain, got {n}")
    mu = np.full(n, a - b)
    mu[0] = a + (n - 1) * b
    m = (mu**0.25)[:, None] * hadamard(int(math.log2(n)))
    return dense(m, name="hadamard")


def dense(matrix: ArrayLike, name: str = "dense") -> Strategy:
    m = np.asarray(matrix, dtype=np.float64)
    return Strategy(name, {"kind": "dense", "matrix": m.tolist()}, Explicit(m))


def pidentity(theta: ArrayLike | sp.spmatrix | sp.sparray, name: str = "pidentity") -> Strategy:
    """HDMM's p-Identity ``[I; Θ] D⁻¹`` (``Θ ≥ 0``, ``D = diag(1 + 1ᵀΘ)``; every column of L1
    norm 1), kept as Θ: the identity block is a row scaling, never an n x n matrix.

    A Θ with at most a quarter of its entries non-zero (the grid refinement's, about 1 % of
    528 x 4,096 on AllRange(64)²) is kept sparse, and its spec lists the non-zeros
    (``shape``, row-major ``index``, ``values``) instead of every entry.

    >>> pidentity([[1.0, 3.0]]).operator.dense().tolist()
    [[0.5, 0.0], [0.0, 0.25], [0.5, 0.75]]
    >>> s = pidentity([[0.0, 0.0, 2.0, 0.0, 0.0]])
    >>> s.spec == {"kind": "pidentity", "shape": [1, 5], "index": [2], "values": [2.0]}
    True
    >>> bool(np.allclose(build_strategy(s.spec).operator.dense(), s.operator.dense()))
    True
    """
    t = sp.csr_matrix(theta, dtype=np.float64) if sp.issparse(theta) else None
    if t is None:
        dense_t = np.asarray(theta, dtype=np.float64)
        if np.count_nonzero(dense_t) > 0.25 * dense_t.size:
            inv_c = 1.0 / (1.0 + dense_t.sum(axis=0))
            op = VStack([Weighted(Identity(dense_t.shape[1]), inv_c), Explicit(dense_t * inv_c)])
            return Strategy(name, {"kind": "pidentity", "theta": dense_t.tolist()}, op)
        t = sp.csr_matrix(dense_t)
    t.eliminate_zeros()
    t.sort_indices()
    inv_c = 1.0 / (1.0 + np.asarray(t.sum(axis=0), dtype=np.float64).ravel())
    coo = t.tocoo()
    spec = {
        "kind": "pidentity",
        "shape": [int(t.shape[0]), int(t.shape[1])],
        "index": (coo.row.astype(np.int64) * t.shape[1] + coo.col).tolist(),
        "values": coo.data.tolist(),
    }
    op = VStack([Weighted(Identity(t.shape[1]), inv_c), Explicit(t @ sp.diags(inv_c))])
    return Strategy(name, spec, op)


def _pidentity_from_spec(spec: Mapping[str, Any]) -> Strategy:
    """:func:`pidentity` from a spec: dense ``theta``, or the non-zeros of a sparse Θ."""
    if "theta" in spec:
        return pidentity(spec["theta"])
    rows, cols = (int(v) for v in spec["shape"])
    index = np.asarray(spec["index"], dtype=np.int64)
    values = np.asarray(spec["values"], dtype=np.float64)
    if index.shape != values.shape or (
        index.size and (index.min() < 0 or index.max() >= rows * cols)
    ):
        raise QueryError(
            "a saved 'pidentity' strategy has an index outside its shape or unmatched values"
        )
    return pidentity(sp.csr_matrix((values, (index // cols, index % cols)), shape=(rows, cols)))


def eigen(gram: LinearOperator, workload_spec: Mapping[str, Any] | None = None) -> Strategy:
    """``A = diag(μ^{1/4}) Vᵀ`` with ``G = V diag(μ) Vᵀ`` (so ``AᵀA = G^{1/2}``).

    Corrected here: the proof of Li & Miklau's Thm C.1 takes square roots of the eigenvalues,
    but the optimal strategy needs fourth roots (square roots give error n·a).

    Error/svdb = ``n·max diag(G^{1/2}) / tr(G^{1/2})`` ≥ 1; a baseline that is not from the paper
    and not near-optimal in general: under Gaussian noise it is 1.09x the certified optimum on
    AllRange(256) but 1.67x on Prefix(256), where the wavelet does better (``dpcube plan``). Eigenvalues below 1e-12·max are lifted to that floor so A has full rank.
    """
    mu, v = np.linalg.eigh(gram.dense())
    mu = np.maximum(mu, 1e-12 * max(float(mu.max()), 1e-300))
    spec: dict[str, Any] = {"kind": "eigen", "workload": dict(workload_spec or {})}
    return Strategy("eigen", spec, Explicit((mu**0.25)[:, None] * v.T))


def boxes(
    box_array: ArrayLike, dims: Sequence[int], weights: ArrayLike | None = None, name: str = "boxes"
) -> Strategy:
    """Weighted 0/1 box queries (LSA's compressed output: weight ``sqrt(multiplicity)``, Thm 3.2)."""
    b = np.asarray(box_array, dtype=np.int64).reshape(-1, len(dims), 2)
    w = np.ones(len(b)) if weights is None else np.asarray(weights, dtype=np.float64)
    spec = {
        "kind": "boxes",
        "dims": [int(d) for d in dims],
        "boxes": b.tolist(),
        "weights": w.tolist(),
    }
    return Strategy(name, spec, box_rows(b, dims, w))


def kron(parts: Sequence[Strategy], name: str | None = None) -> Strategy:
    """``A₁ ⊗ … ⊗ A_k`` over a C-ordered grid (Li & Miklau, Sec. 5.2, multi-dimensional)."""
    if len(parts) == 1:
        return parts[0]
    spec = {"kind": "kron", "factors": [p.spec for p in parts]}
    label = name or "⊗".join(p.name for p in parts)
    return Strategy(label, spec, Kronecker([p.operator for p in parts]))


def stack(parts: Sequence[Strategy], name: str = "stack") -> Strategy:
    """``[A₁; A₂; …]`` (used by workload separation, Li & Miklau, Sec. 4.3.1)."""
    spec = {"kind": "stack", "parts": [p.spec for p in parts]}
    return Strategy(name, spec, VStack([p.operator for p in parts]))


def total(n: int) -> Strategy:
    return Strategy("total", {"kind": "total", "n": int(n)}, Total(n))


def build_strategy(spec: Mapping[str, Any], name: str | None = None) -> Strategy:
    """Rebuild a strategy from its spec (inverse of ``Strategy.spec``)."""
    kind = spec.get("kind")
    out: Strategy
    if kind == "identity":
        out = identity(int(spec["n"]))
    elif kind == "total":
        out = total(int(spec["n"]))
    elif kind == "hierarchical":
        out = hierarchical(int(spec["n"]), int(spec.get("branching", 2)))
    elif kind == "wavelet":
        out = wavelet(int(spec["n"]))
    elif kind == "boxes":
        out = boxes(spec["boxes"], spec["dims"], spec["weights"])
    elif kind == "dense":
        out = dense(spec["matrix"])
    elif kind == "pidentity":
        out = _pidentity_from_spec(spec)
    elif kind == "kron":
        out = kron([build_strategy(f) for f in spec["factors"]])
    elif kind == "stack":
        out = stack([build_strategy(p) for p in spec["parts"]])
    elif kind == "eigen":
        from dpcube.workloads import workload_from_dict

        w = workload_from_dict(spec["workload"])
        out = eigen(w.gram, spec["workload"])
    else:
        raise QueryError(f"unknown strategy kind {kind!r} in a saved strategy spec")
    if name is not None:
        out.name = name
    return out


def fig4() -> dict[str, NDArray[np.float64]]:
    """The paper's Figure 4 matrices for n = 4: H, Y, Y1 (identity twice), Y2 (sqrt 2 weights)."""
    r2 = math.sqrt(2.0)
    return {
        "H": hierarchical(4).operator.dense(),
        "Y": wavelet_matrix(4),
        "Y1": np.array(
            [[1, 1, 0, 0], [0, 0, 1, 1], *np.eye(4).tolist(), *np.eye(4).tolist()], dtype=np.float64
        ),
        "Y2": np.array([[1, 1, 0, 0], [0, 0, 1, 1], *(r2 * np.eye(4)).tolist()], dtype=np.float64),
    }


__all__ = [
    "Strategy",
    "boxes",
    "build_strategy",
    "dense",
    "eigen",
    "fig4",
    "hadamard",
    "hierarchical",
    "hierarchical_boxes",
    "identity",
    "kron",
    "stack",
    "total",
    "variable_agnostic_optimal",
    "wavelet",
    "wavelet_matrix",
]
