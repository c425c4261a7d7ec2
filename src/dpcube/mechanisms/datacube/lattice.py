"""The cuboid lattice of a d-dimensional fact table (Ding, Winslett, Han, Li, SIGMOD 2011, Sec. 2).

A cuboid is a bitmask over the dimensions (dimension ``i`` is bit ``i``; the paper labels
``C_{x1x2x3}`` read left to right are bits 0, 1, 2). ``C1 <= C2`` (C1 computable from C2) iff
``C1 & ~C2 == 0``. The paper calls the coarser C1 an "ancestor"; this code uses subset tests only,
since the paper's own prose uses both orientations.

- ``mag(C, C')``: cells of C' summed into one cell of C (eq. 1), ``inf`` when C is not computable
  from C';
- ``deg(C)``: base cells aggregated by one cell of C, ``mag(C, base)``;
- :func:`best_sources`: the level-wise dynamic programme of K_part (Sec. 3) that picks, for every
  cuboid, the measured descendant of least noise.

>>> lat = Lattice((2, 7, 5))            # Example 2.1: Sex, Age, Salary
>>> lat.mag(0b110, 0b111), lat.mag(0b000, 0b111), lat.deg(0b001)
(2, 70, 35)
>>> lat.label(0b011), lat.cells(0b011)
('C110', 14)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import QueryError

#: ``mag`` of a cuboid that cannot be computed from the other.
INF = math.inf


def popcount(mask: int) -> int:
    """Number of dimensions of a cuboid.

    >>> popcount(0b1011)
    3
    """
    return bin(mask).count("1")


def bits(mask: int) -> list[int]:
    """Dimension indices of a cuboid, increasing.

    >>> bits(0b1010)
    [1, 3]
    """
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def is_subset(small: int, big: int) -> bool:
    """``[small] ⊆ [big]``: ``small`` can be rolled up from ``big``.

    >>> is_subset(0b001, 0b101), is_subset(0b011, 0b101)
    (True, False)
    """
    return small & ~big == 0


@dataclass(frozen=True)
class Lattice:
    """All 2^d cuboids of dimensions with cardinalities ``cards`` (``cards[i] = |A_i|``)."""

    cards: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.cards:
            raise QueryError("a data cube needs at least one dimension")
        if len(self.cards) > 20:
            raise QueryError(
                f"a data cube of {len(self.cards)} dimensions has 2^{len(self.cards)} cuboids; "
                "use at most 20 dimensions (Ding et al., SIGMOD 2011, Sec. 7.4)"
            )
        if any(int(k) < 1 for k in self.cards):
            raise QueryError(f"cardinalities must be positive, got {list(self.cards)}")

    @property
    def d(self) -> int:
        return len(self.cards)

    @property
    def base(self) -> int:
        """The d-dimensional cuboid."""
        return (1 << self.d) - 1

    @property
    def all(self) -> list[int]:
        """Every cuboid, in :meth:`candidate_order`."""
        return self.candidate_order()

    def candidate_order(self) -> list[int]:
        """The greedy tie-break order (the paper leaves it open; its examples pick C111 before
        C101): higher dimensionality first, then larger bitmask.

        >>> [Lattice((2, 2)).label(c) for c in Lattice((2, 2)).candidate_order()]
        ['C11', 'C01', 'C10', 'C00']
        """
        return sorted(range(1 << self.d), key=lambda c: (-popcount(c), -c))

    def cells(self, mask: int) -> int:
        """Number of cells of the cuboid (the 0-dimensional one has one)."""
        return math.prod(self.cards[i] for i in bits(mask))

    def deg(self, mask: int) -> int:
        """Base cells aggregated by one cell of the cuboid."""
        return math.prod(self.cards[i] for i in bits(self.base & ~mask))

    def mag(self, small: int, big: int) -> float:
        """Variance magnification (eq. 1): ``prod |A_i|`` over ``[big] - [small]``; inf if not computable.

        >>> Lattice((2, 7, 5)).mag(0b111, 0b110)
        inf
        """
        if not is_subset(small, big):
            return INF
        return math.prod(self.cards[i] for i in bits(big & ~small))

    def label(self, mask: int) -> str:
        """The paper's label ``C_{x1..xd}`` (x1 is dimension 0)."""
        return "C" + "".join("1" if mask >> i & 1 else "0" for i in range(self.d))

    def from_label(self, label: str) -> int:
        """Inverse of :meth:`label`.

        >>> Lattice((2, 7, 5)).from_label("C101")
        5
        """
        return sum(1 << i for i, x in enumerate(label.removeprefix("C")) if x == "1")

    def level(self, k: int) -> list[int]:
        """The k-dimensional cuboids."""
        return [c for c in range(1 << self.d) if popcount(c) == k]

    def computable(self, mask: int, sources: Iterable[int]) -> bool:
        """True when some source has all the cuboid's dimensions."""
        return any(is_subset(mask, s) for s in sources)

    def down_closure(self, masks: Iterable[int]) -> list[int]:
        """Every cuboid computable from ``masks``, by increasing dimensionality then bitmask."""
        tops = list(set(masks))
        return sorted(
            (c for c in range(1 << self.d) if any(is_subset(c, t) for t in tops)),
            key=lambda c: (popcount(c), c),
        )


def shape(lattice: Lattice, mask: int) -> tuple[int, ...]:
    """Array shape of a cuboid: one axis per dimension, increasing.

    >>> shape(Lattice((2, 7, 5)), 0b101)
    (2, 5)
    """
    return tuple(lattice.cards[i] for i in bits(mask))


def rollup(array: NDArray[Any], big: int, small: int) -> NDArray[Any]:
    """Sum the cells of cuboid ``big`` into cuboid ``small ⊆ big`` (arrays in :func:`shape` layout).

    >>> rollup(np.arange(6).reshape(2, 3), 0b11, 0b10)
    array([3, 5, 7])
    """
    if not is_subset(small, big):
        raise ValueError(f"cannot roll cuboid {big:b} up to {small:b}")
    drop = tuple(k for k, i in enumerate(bits(big)) if not small >> i & 1)
    return np.asarray(array.sum(axis=drop)) if drop else array


def expand(lattice: Lattice, array: NDArray[Any], small: int, big: int) -> NDArray[Any]:
    """View cuboid ``small``'s array with size-1 axes so that it broadcasts against cuboid ``big``.

    >>> expand(Lattice((2, 3)), np.array([1, 2, 3]), 0b10, 0b11).shape
    (1, 3)
    """
    return array.reshape([lattice.cards[i] if small >> i & 1 else 1 for i in bits(big)])


def best_sources(
    lattice: Lattice, variances: dict[int, Fraction], wanted: Iterable[int]
) -> dict[int, tuple[Fraction, int]]:
    """The level-wise programme of K_part aggregation (Sec. 3), generalised to per-source variances.

    ``variances[C']`` is the per-cell noise variance of measured cuboid C'. Returns, for every
    cuboid needed to compute ``wanted``, ``(v, parent)``: v is the least per-cell variance of C
    over all measured C' ⊇ C, ``min mag(C, C') * variances[C']`` (eq. 2), and ``parent`` is the
    cuboid it is summed from (``-1`` when C is measured itself). Recursion:
    ``v(C) = variances[C]`` if measured, else ``min_j |A_j| * v(C ∪ {A_j})`` over A_j ∉ [C],
    ties to the smallest j (any minimiser has the same variance; the paper leaves ties open).
    Computing C by summing out A_j from that parent gives exactly variance v(C) (mag is
    multiplicative along chains).

    >>> lat = Lattice((2, 7, 5))
    >>> out = best_sources(lat, {0b111: Fraction(32), 0b001: Fraction(32)}, [0b000])
    >>> out[0b000]                       # Example 3.2: C000 from C100 = 0b001 (mag 2)
    (Fraction(64, 1), 1)
    """
    memo: dict[int, tuple[Fraction, int]] = {}
    infinite = (Fraction(-1), -2)

    def visit(mask: int) -> tuple[Fraction, int]:
        if mask in memo:
            return memo[mask]
        if mask in variances:
            memo[mask] = (variances[mask], -1)
            return memo[mask]
        best = infinite
        for j in range(lattice.d):
            if mask >> j & 1:
                continue
            parent = mask | 1 << j
            v, _ = visit(parent)
            if v < 0:
                continue
            cand = v * lattice.cards[j]
            if best[0] < 0 or cand < best[0]:
                best = (cand, parent)
        memo[mask] = best
        return best

    for mask in sorted(set(wanted), key=popcount, reverse=True):
        if visit(mask)[0] < 0:
            raise QueryError(
                f"cuboid {lattice.label(mask)} is not computable from the measured cuboids"
            )
    needed: dict[int, tuple[Fraction, int]] = {}
    stack = list(set(wanted))
    while stack:
        mask = stack.pop()
        if mask in needed:
            continue
        needed[mask] = memo[mask]
        if memo[mask][1] >= 0:
            stack.append(memo[mask][1])
    return needed


def parse_publish(publish: object, names: Sequence[str]) -> list[int]:
    """The cuboids to publish: ``"all"`` (2^d), an int ``k`` or ``"k=2"`` (all k-dim ones), or a list of
    attribute-name groups (``[("a", "b"), ("b", "c")]`` or ``"a,b;b,c"``; ``()`` / ``""`` is the total).

    >>> parse_publish("k=1", ["a", "b", "c"])
    [1, 2, 4]
    >>> parse_publish("a,b;c", ["a", "b", "c"]), parse_publish([("c", "a")], ["a", "b", "c"])
    ([3, 4], [5])
    """
    d = len(names)
    if isinstance(publish, str):
        text = publish.strip()
        if text == "all":
            return list(range(1 << d))
        if text.startswith("k="):
            try:
                return parse_publish(int(text[2:]), names)
            except ValueError:
                raise QueryError(f"publish {publish!r}: expected k=<integer>") from None
        groups: list[Sequence[str]] = [
            [x.strip() for x in g.split(",") if x.strip()] for g in text.split(";")
        ]
        return parse_publish(groups, names)
    if isinstance(publish, int) and not isinstance(publish, bool):
        if not 1 <= publish <= d:
            raise QueryError(
                f"publish k={publish} must be between 1 and the {d} dimensions (publish '' for "
                "the total alone)"
            )
        return [c for c in range(1 << d) if popcount(c) == publish]
    if isinstance(publish, Sequence):
        out: list[int] = []
        for group in publish:
            if isinstance(group, str):
                group = [group]
            if not isinstance(group, Sequence) or not all(isinstance(n, str) for n in group):
                raise QueryError(
                    f"publish lists {group!r}; each cuboid is a list of attribute names, "
                    "e.g. [['a', 'b'], ['c']]"
                )
            mask = 0
            for name in group:
                if name not in names:
                    raise QueryError(
                        f"publish names unknown attribute {name!r}; the schema has {', '.join(names)}"
                    )
                bit = 1 << list(names).index(name)
                if mask & bit:
                    raise QueryError(
                        f"publish names {name!r} twice in one cuboid; name each attribute once"
                    )
                mask |= bit
            if mask not in out:
                out.append(mask)
        if not out:
            raise QueryError("publish lists no cuboid; use 'all', 'k=<int>' or 'a,b;b,c'")
        return sorted(out)
    raise QueryError(
        f"publish must be 'all', an int k, 'k=<int>', 'a,b;c' or a list of tuples, got {publish!r}"
    )
