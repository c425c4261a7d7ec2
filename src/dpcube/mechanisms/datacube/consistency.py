"""Consistency enforcement (Ding, Winslett, Han, Li, SIGMOD 2011, Sec. 5).

Input: only the noisy cells of the measured cuboids L_pre (never the data), so the output is
post-processing and keeps the guarantee. Output: cuboids that are roll-ups of one vector over the
cells of the join cuboid ``U = ∨ L_pre`` (Sec. 5; U = base whenever the base cuboid is measured).

- :func:`l2_consistent`: the exact two-pass algorithm of Theorem 10 (eqs. 9-14): bottom-up
  ``obs``, top-down ``ĉ = (obs - aux) / ratio``; with per-cuboid weights ``w_C = 1 / Var_C`` it is
  the weighted least squares form of program (8) (needed for non-uniform budgets). It is the best
  linear unbiased estimator (Gauss-Markov), and :func:`l2_variance` gives its exact variance. Both
  of its broadcast sums (``g_U`` and each ``aux``) go through :func:`broadcast_sum`.
- :func:`lp_consistent`: L1 (LP 7) and L-infinity (LP 6) distances, solved with HiGHS through
  ``scipy.optimize.linprog``; for small cubes (the constraint matrix has ``|L_pre| * |U|`` nonzeros).

>>> from dpcube.mechanisms.datacube.lattice import Lattice
>>> lat = Lattice((3,))          # one dimension, L_pre = {C_A, C_total}
>>> out = l2_consistent(lat, {1: np.array([1.0, 2.0, 3.0]), 0: np.array(9.0)}, {1: 1.0, 0: 1.0}, [0, 1])
>>> float(out[0]), out[1].tolist()        # (6 + 3*9)/4 and y_i + (9 - 6)/4
(8.25, [1.75, 2.75, 3.75])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.optimize import linprog

from dpcube.errors import DomainTooLargeError, DPCubeError
from dpcube.mechanisms.datacube.lattice import (
    Lattice,
    bits,
    expand,
    is_subset,
    popcount,
    rollup,
    shape,
)

#: Largest number of nonzeros of the LP constraint matrix (``|L_pre| * |U|``).
MAX_LP_NONZEROS = 4_000_000


def _deg(lattice: Lattice, mask: int, join: int) -> int:
    """``deg_U(C)``: cells of U summed into one cell of C (U = the join cuboid)."""
    return lattice.mag(mask, join)  # type: ignore[return-value]


def meet_closure(sources: Sequence[int], wanted: Sequence[int]) -> list[int]:
    """``wanted`` closed under ``Q -> Q ∧ C`` for C in L_pre (every cuboid the top-down pass reads).

    >>> meet_closure([0b110, 0b011], [0b110, 0b101])
    [0, 1, 2, 4, 5, 6]
    """
    out = set(wanted)
    todo = list(out)
    while todo:
        q = todo.pop()
        for c in sources:
            b = q & c
            if b not in out:
                out.add(b)
                todo.append(b)
    return sorted(out, key=lambda m: (popcount(m), m))


def broadcast_sum(
    lattice: Lattice, terms: Mapping[int, NDArray[Any]], target: int
) -> NDArray[np.float64]:
    """``sum_B terms[B]`` broadcast onto cuboid ``target`` (every B ⊆ target).

    Directly this costs ``len(terms) * cells(target)``. Pushing each partial sum up a chain instead
    (B to ``B ∪ {lowest dimension of target - B}``, merging sums that meet) costs the cells of the
    chain's cuboids only; the cheaper of the two is used.

    >>> lat = Lattice((2, 3))
    >>> broadcast_sum(lat, {0: np.array(1.0), 1: np.array([1.0, 2.0]), 2: np.zeros(3)}, 3).tolist()
    [[2.0, 2.0, 2.0], [3.0, 3.0, 3.0]]
    """

    def parent(mask: int) -> int:
        rest = target & ~mask
        return mask | (rest & -rest)

    nodes: set[int] = set()
    for b in terms:
        while b not in nodes and b != target:
            nodes.add(b)
            b = parent(b)
    chain_cost = sum(lattice.cells(parent(b)) for b in nodes)
    out = np.zeros(shape(lattice, target), dtype=np.float64)
    if chain_cost >= len(terms) * lattice.cells(target):
        for b, array in terms.items():
            out += expand(lattice, np.asarray(array, dtype=np.float64), b, target)
        return out
    partial: dict[int, NDArray[np.float64]] = {}
    for b, array in terms.items():
        partial[b] = np.asarray(array, dtype=np.float64)
    for b in sorted(nodes, key=popcount):
        p = parent(b)
        lifted = expand(lattice, partial.pop(b), b, p)
        if p in partial:
            partial[p] = partial[p] + lifted
        else:
            partial[p] = np.broadcast_to(lifted, shape(lattice, p)).copy()
    if target in partial:
        out += partial[target]
    return out


def l2_consistent(
    lattice: Lattice,
    noisy: Mapping[int, NDArray[Any]],
    weights: Mapping[int, float],
    wanted: Sequence[int],
    via_join: bool | None = None,
) -> dict[int, NDArray[np.float64]]:
    """Weighted least-squares consistent cuboids (Theorem 10, in array form).

    ``noisy[C]`` is the noisy array of measured cuboid C (axes: its dimensions, increasing) and
    ``weights[C] = 1 / Var_C`` (any common scale). Stage 1: ``g_U = sum_C w_C c̃_C`` broadcast onto U,
    ``obs[C''] = roll-up of g_U`` (eqs. 9-10). Stage 2, by increasing dimensionality (eqs. 12-14):
    ``ratio = sum_{C ⊇ C''} w_C deg_U(C)``,
    ``aux = sum_{C ⊉ C''} w_C deg_U(C ∨ C'') ĉ[C ∧ C'']`` (grouped by the meet),
    ``ĉ[C''] = (obs[C''] - aux) / ratio``. Returns the cuboids of ``wanted``.

    ``obs`` needs the join cuboid U only through ``g_U``; when U is much larger than the cuboids
    needed (say 12 one-dimensional sources of 40 cells: U has 40^12 cells) ``via_join=False``
    computes ``obs[C''] = sum_C w_C deg_U(C ∨ C'') c̃_C rolled up to C ∧ C''`` directly, the same
    sum regrouped by source (default: chosen by size).
    """
    sources = list(noisy)
    join = 0
    for c in sources:
        join |= c
    for q in wanted:
        if not lattice.computable(q, sources):
            raise DPCubeError(
                f"cuboid {lattice.label(q)} is not computable from the measured cuboids"
            )
    needed = meet_closure(sources, wanted)
    if via_join is None:
        via_join = lattice.cells(join) <= max(2**22, 4 * sum(lattice.cells(q) for q in needed))
    obs: dict[int, NDArray[np.float64]] = {}
    if via_join:
        weighted = {c: float(weights[c]) * np.asarray(noisy[c], dtype=np.float64) for c in sources}
        obs[join] = broadcast_sum(lattice, weighted, join)
        for q in sorted(needed, key=lambda m: (-popcount(m), m)):
            if q in obs:
                continue
            parent = min((p for p in obs if is_subset(q, p)), key=lambda p: (lattice.cells(p), p))
            obs[q] = rollup(obs[parent], parent, q)
    else:
        rolled: dict[tuple[int, int], NDArray[np.float64]] = {}
        for q in needed:
            value = np.zeros(shape(lattice, q), dtype=np.float64)
            for c in sources:
                b = c & q
                if (c, b) not in rolled:
                    rolled[c, b] = rollup(np.asarray(noisy[c], dtype=np.float64), c, b)
                factor = float(weights[c]) * _deg(lattice, c | q, join)
                value += factor * expand(lattice, rolled[c, b], b, q)
            obs[q] = value
    est: dict[int, NDArray[np.float64]] = {}
    for q in needed:
        ratio = sum(float(weights[c]) * _deg(lattice, c, join) for c in sources if is_subset(q, c))
        coef: dict[int, float] = {}
        for c in sources:
            if not is_subset(q, c):
                b = c & q
                coef[b] = coef.get(b, 0.0) + float(weights[c]) * _deg(lattice, c | q, join)
        aux = broadcast_sum(lattice, {b: k * est[b] for b, k in coef.items()}, q)
        est[q] = (obs[q] - aux) / ratio
    return {q: est[q] for q in wanted}


def l2_variance(
    lattice: Lattice,
    weights: Mapping[int, float],
    mask: int,
    selected: Mapping[int, int] | None = None,
) -> float:
    """Exact variance of the L2-consistent answer summing ``selected[i]`` cells on each dimension i of
    cuboid ``mask`` (default: one cell each), when ``weights[C] = 1 / Var_C`` exactly.

    The normal matrix ``Hᵀ W H = sum_C w_C ⊗_{i∈C} I ⊗_{i∈U-C} J`` is diagonal in the per-dimension
    basis {constant, its complement}: on the block that takes the complement on the dimensions S it
    equals ``λ_S = sum_{C ⊇ S} w_C deg_U(C)``. A query vector h that sums n_i of the k_i cells of
    dimension i ∈ Q (all cells off Q) has squared projections ``n_i^2/k_i`` (constant) and
    ``n_i - n_i^2/k_i`` (complement), so ``Var = sum_{S ⊆ Q} Π_{S}(n_i - n_i^2/k_i)
    Π_{Q-S}(n_i^2/k_i) deg_U(Q) / λ_S`` (the GLS variance ``h (HᵀWH)^+ hᵀ``).

    >>> lat = Lattice((3, 3))            # 3x3 cube, L_pre = {base, total}, s = 2, eps = 1
    >>> w = {0b11: 1 / 8, 0b00: 1 / 8}
    >>> [round(l2_variance(lat, w, q), 9) for q in (0b11, 0b00, 0b01)]
    [7.2, 7.2, 16.8]
    """
    join = 0
    for c in weights:
        join |= c
    if not lattice.computable(mask, weights):
        raise DPCubeError(
            f"cuboid {lattice.label(mask)} is not computable from the measured cuboids"
        )
    dims = bits(mask)
    n = {i: (selected or {}).get(i, 1) for i in dims}
    deg = _deg(lattice, mask, join)
    total = 0.0
    sub = mask
    while True:
        lam = sum(
            float(w) * _deg(lattice, c, join) for c, w in weights.items() if is_subset(sub, c)
        )
        term = float(deg)
        for i in dims:
            k = lattice.cards[i]
            term *= n[i] - n[i] ** 2 / k if sub >> i & 1 else n[i] ** 2 / k
        total += term / lam
        if sub == 0:
            break
        sub = (sub - 1) & mask
    return total


def lp_consistent(
    lattice: Lattice,
    noisy: Mapping[int, NDArray[Any]],
    weights: Mapping[int, float],
    wanted: Sequence[int],
    norm: str,
    nonnegative: bool = False,
) -> dict[int, NDArray[np.float64]]:
    """Consistent cuboids nearest the noisy ones in the (weighted) L1 or L-infinity norm (LPs 6, 7).

    Variables: ``x`` on the cells of the join cuboid U (free sign, or ``x >= 0`` with
    ``nonnegative``) and deviation bounds ``z``. Each noisy cell a of C gives
    ``-z <= ω_C (H_a x - c̃(a)) <= z`` with ``ω_C = sqrt(w_C / max w)`` (all 1 for uniform budgets);
    L1 minimises the sum of one z per cell, L-infinity a single shared z. Solved by HiGHS.
    """
    if norm not in ("l1", "linf"):
        raise ValueError(f"norm must be 'l1' or 'linf', got {norm!r}")
    sources = list(noisy)
    join = 0
    for c in sources:
        join |= c
    cells_u = lattice.cells(join)
    if cells_u * len(sources) > MAX_LP_NONZEROS:
        raise DomainTooLargeError(
            f"the {norm} consistency LP would have {cells_u * len(sources):,} nonzeros (more than "
            f"{MAX_LP_NONZEROS:,}); use consistency='l2', which is exact and linear-time"
        )
    coords = np.unravel_index(np.arange(cells_u), shape(lattice, join)) if join else ()
    top = max(float(w) for w in weights.values())
    blocks, rhs, scale = [], [], []
    for c in sources:
        pos = [k for k, i in enumerate(bits(join)) if c >> i & 1]
        rows = (
            np.ravel_multi_index(tuple(coords[k] for k in pos), shape(lattice, c))
            if pos
            else np.zeros(cells_u, dtype=np.int64)
        )
        blocks.append(
            sp.csr_matrix(
                (np.ones(cells_u), (rows, np.arange(cells_u))), shape=(lattice.cells(c), cells_u)
            )
        )
        rhs.append(np.asarray(noisy[c], dtype=np.float64).ravel())
        scale.append(np.full(lattice.cells(c), np.sqrt(float(weights[c]) / top)))
    h = sp.vstack(blocks).tocsr()
    y = np.concatenate(rhs)
    omega = np.concatenate(scale)
    cells_e = h.shape[0]
    if norm == "l1":
        z = sp.identity(cells_e, format="csr")
        cost = np.concatenate([np.zeros(cells_u), np.ones(cells_e)])
    else:
        z = sp.csr_matrix(np.ones((cells_e, 1)))
        cost = np.concatenate([np.zeros(cells_u), [1.0]])
    wh = sp.diags(omega) @ h
    a_ub = sp.vstack([sp.hstack([wh, -z]), sp.hstack([-wh, -z])]).tocsr()
    b_ub = np.concatenate([omega * y, -omega * y])
    bounds = [(0.0 if nonnegative else None, None)] * cells_u + [(0.0, None)] * (
        cost.size - cells_u
    )
    result = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if result.status != 0:
        raise DPCubeError(f"the {norm} consistency LP failed: {result.message}")
    x = np.asarray(result.x[:cells_u]).reshape(shape(lattice, join))
    return {q: np.asarray(rollup(x, join, q), dtype=np.float64) for q in wanted}
