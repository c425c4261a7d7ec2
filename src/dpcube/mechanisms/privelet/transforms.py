"""Privelet's wavelet transforms (Xiao, Wang, Gehrke, "Differential Privacy via
Wavelet Transforms", ICDE 2010, Secs. IV-VI).

Three one-dimensional transforms, each with its weights W, its generalized sensitivity P, the
number of coefficients one cell change touches (``support``) and the factor H of the paper's
variance bound:

- :class:`HaarAxis` (Sec. IV): the Haar wavelet transform of an ordinal axis,
  zero-padded at the end to ``L = 2**ceil(log2 n)``; ``W = L`` for the base and the number of
  leaves below a node otherwise; ``P = 1 + log2 L`` (Lemma 2, with the padded L: privacy-critical).
- :class:`NominalAxis` (Sec. V): the over-complete nominal transform of a
  hierarchy; ``W = 1`` for the base and ``f / (2f - 2)`` otherwise; mean subtraction in every
  sibling group before reconstruction (Sec. V-B); ``P = h`` (Lemma 4).
- :class:`IdentityAxis` (Privelet+, Sec. VI-D, Fig. 5): no transform, ``W = 1``, ``P = 1``,
  ``H = n``.

The multi-dimensional HN transform (Sec. VI) applies them axis by axis
(:func:`hn_forward`, :func:`hn_inverse`); the weight of a coefficient is the product of the axis
weights (Eq. in VI-B) and the generalized sensitivity the product of the P (Theorem 2). Every
pass is vectorised over all the fibres of an axis through a ``(before, n, after)`` view, in O(size)
time and memory; no matrix is ever formed.

The exact noise variance of a range query factors over the axes (Theorem 3): with independent
noise of variance ``s**2 / W(c)**2`` on every coefficient c, a box ``S_1 x ... x S_d`` has variance
``s**2 * prod_i V_i(S_i)``, where ``V_i(S) = sum_p (g_S(p) / W_i(p))**2`` and ``g_S`` maps the
(mean-subtracted) coefficients of axis i to the sum over S (:meth:`AxisTransform.interval_variance`).

>>> haar_forward(np.array([9, 3, 6, 2, 8, 4, 5, 7]))
array([ 5.5, -0.5,  1. ,  0. ,  3. ,  2. ,  2. , -1. ])
>>> haar_weights(8)
array([8., 8., 4., 4., 2., 2., 2., 2.])
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcube.errors import SchemaError
from dpcube.schema import Hierarchy

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Largest number of (query x coefficient) entries held at once by :meth:`interval_variance`.
_CHUNK = 1 << 22


def _as3(x: NDArray[Any], axis: int) -> tuple[NDArray[Any], tuple[int, ...]]:
    """``x`` viewed as ``(before, n, after)`` around ``axis`` (no copy for contiguous input)."""
    shape = x.shape
    before = math.prod(shape[:axis])
    after = math.prod(shape[axis + 1 :])
    return x.reshape(before, shape[axis], after), shape


def _overlap(lo: IntArray, hi: IntArray, a: IntArray, b: IntArray) -> IntArray:
    """Number of integers in both ``[lo, hi]`` and ``[a, b]`` (elementwise, inclusive)."""
    return np.maximum(0, np.minimum(hi, b) - np.maximum(lo, a) + 1)


def _spread(parent: NDArray[Any], counts: IntArray) -> NDArray[Any]:
    """Each parent's value once per child: ``(b, k, a) -> (b, sum(counts), a)``, or, when every
    parent has the same fanout f, the broadcastable ``(b, k, 1, a)`` to use against
    :func:`_grouped` (no copy; ``np.repeat`` along a middle axis is slow for small ``a``)."""
    if counts.size and np.all(counts == counts[0]):
        return parent[:, :, None, :]
    return np.repeat(parent, counts, axis=1)


def _grouped(block: NDArray[Any], counts: IntArray) -> NDArray[Any]:
    """The children block ``(b, sum(counts), a)`` as ``(b, k, f, a)`` (a view) when every parent has
    the same fanout f, to meet :func:`_spread`; otherwise the block itself."""
    if counts.size and np.all(counts == counts[0]):
        b, _, a = block.shape
        return block.reshape(b, counts.size, int(counts[0]), a)
    return block


class AxisTransform(ABC):
    """A one-dimensional (normalised) transform of one axis, vectorised over ``(before, n, after)``."""

    kind: ClassVar[str]
    #: Length of the axis in the domain.
    n: int
    #: Number of coefficients along the axis.
    size: int

    @property
    @abstractmethod
    def weights(self) -> FloatArray:
        """W of every coefficient position (length ``size``)."""

    @property
    @abstractmethod
    def rho(self) -> int:
        """Generalized sensitivity P (max over cells of ``sum_c W(c) |C(e_x)(c)|``)."""

    @property
    @abstractmethod
    def support(self) -> int:
        """Largest number of coefficients that a change of one cell changes."""

    @property
    @abstractmethod
    def bound_factor(self) -> float:
        """H of Theorem 3 / Corollary 1: the bound on ``V(S)`` over all admissible ranges S."""

    @abstractmethod
    def forward(self, x: FloatArray) -> FloatArray:
        """Coefficients of every fibre of ``x`` (shape ``(before, n, after)``)."""

    @abstractmethod
    def inverse(self, c: FloatArray) -> FloatArray:
        """Values from (noisy) coefficients, shape ``(before, size, after) -> (before, n, after)``."""

    @abstractmethod
    def interval_variance(self, lo: ArrayLike, hi: ArrayLike) -> FloatArray:
        """``V(S) = sum_p (g_S(p) / W(p))**2`` for the inclusive intervals ``S = [lo, hi]``."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON-able description (inverse: :func:`axis_from_dict`)."""

    def forward_weighted(self, x: FloatArray) -> FloatArray:
        """``W(c) c`` for every coefficient (the un-normalised form of the transform)."""
        out = self.forward(x)
        out *= self.weights[None, :, None]
        return out

    def inverse_weighted(self, u: FloatArray) -> FloatArray:
        """Inverse of :meth:`forward_weighted` (divide by W, then :meth:`inverse`)."""
        return self.inverse(u / self.weights[None, :, None])

    @abstractmethod
    def forward_integer(self, x: IntArray) -> IntArray:
        """Integer coefficients ``I``: ``W(c) c`` times a whole number per coefficient, exactly
        (1, unless the transform has an ``integer_denominator``).

        On integer counts every entry is computed exactly in int64, so the values the noise is
        added to carry no rounding error (see :func:`hn_forward_integer`).
        """

    @property
    @abstractmethod
    def integer_gain(self) -> int:
        """Largest L1 norm of a column of the integer map: ``sum_c |I(e_x)(c)| <= gain``."""

    def max_interval_variance(self) -> float:
        """The largest V over all intervals of the axis (all n(n+1)/2 of them; small axes only)."""
        lo, hi = np.triu_indices(self.n)
        return float(np.max(self.interval_variance(lo, hi)))


class IdentityAxis(AxisTransform):
    """No transform (an attribute in Privelet+'s S_A): W = 1, P = 1, H = n, V(S) = |S|.

    >>> IdentityAxis(5).interval_variance([0, 2], [4, 2])
    array([5., 1.])
    """

    kind = "identity"

    def __init__(self, n: int) -> None:
        self.n = self.size = int(n)

    @property
    def weights(self) -> FloatArray:
        return np.ones(self.size)

    @property
    def rho(self) -> int:
        return 1

    @property
    def support(self) -> int:
        return 1

    @property
    def bound_factor(self) -> float:
        return float(self.n)

    def forward(self, x: FloatArray) -> FloatArray:
        return x

    def inverse(self, c: FloatArray) -> FloatArray:
        return c

    def forward_weighted(self, x: FloatArray) -> FloatArray:
        return x

    def inverse_weighted(self, u: FloatArray) -> FloatArray:
        return u

    def forward_integer(self, x: IntArray) -> IntArray:
        return x

    @property
    def integer_gain(self) -> int:
        return 1

    def interval_variance(self, lo: ArrayLike, hi: ArrayLike) -> FloatArray:
        return (np.asarray(hi, dtype=np.int64) - np.asarray(lo, dtype=np.int64) + 1).astype(
            np.float64
        )

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n}


class HaarAxis(AxisTransform):
    """The Haar wavelet transform of Sec. IV on an axis zero-padded to ``L = 2**l`` (Sec. IV pads
    with dummy values).

    Layout (Sec. IV-A, Fig. 2): position 0 is the base c0 (mean of the L entries); position p >= 1
    is the node at level ``floor(log2 p) + 1`` (root = level 1), left to right, whose coefficient is
    ``(mean of left half - mean of right half) / 2``.

    >>> ax = HaarAxis(101)
    >>> ax.size, ax.rho, ax.bound_factor
    (128, 8, 4.5)
    """

    kind = "haar"

    def __init__(self, n: int) -> None:
        self.n = int(n)
        if self.n < 1:
            raise SchemaError(f"a Haar axis needs at least one value, got {n}")
        self.levels = (self.n - 1).bit_length()
        self.size = 1 << self.levels

    @property
    def weights(self) -> FloatArray:
        return haar_weights(self.size)

    @property
    def rho(self) -> int:
        return 1 + self.levels

    @property
    def support(self) -> int:
        return 1 + self.levels

    @property
    def bound_factor(self) -> float:
        return (2 + self.levels) / 2

    def _pyramid(self, x: NDArray[Any], factor: float | None) -> NDArray[Any]:
        """Pairwise sums and differences level by level, each times ``factor`` (None: 1; the
        result then keeps the input's dtype, so integer input gives exact integer sums)."""
        before, n, after = x.shape
        dtype = x.dtype if factor is None else np.float64
        out = np.empty((before, self.size, after), dtype=dtype)
        if n == self.size and x.dtype == dtype:
            current = x
        else:
            current = np.zeros((before, self.size, after), dtype=dtype)
            current[:, :n] = x
        width = self.size
        while width > 1:
            even, odd = current[:, 0::2], current[:, 1::2]
            detail = out[:, width // 2 : width]
            np.subtract(even, odd, out=detail)
            current = np.add(even, odd)
            if factor is not None:
                detail *= factor
                current *= factor
            width //= 2
        out[:, 0] = current[:, 0]
        return out

    def forward(self, x: FloatArray) -> FloatArray:
        return self._pyramid(x, 0.5)

    def forward_weighted(self, x: FloatArray) -> FloatArray:
        """``W c``: the total for the base, (left sum - right sum) for a node (un-normalised)."""
        return self._pyramid(np.asarray(x, dtype=np.float64), None)

    def forward_integer(self, x: IntArray) -> IntArray:
        """``W c`` is already an integer: sums and differences of counts."""
        return self._pyramid(np.asarray(x, dtype=np.int64), None)

    @property
    def integer_gain(self) -> int:
        return 1 + self.levels

    def inverse(self, c: FloatArray) -> FloatArray:
        before, _, after = c.shape
        current = c[:, 0:1]
        width = 1
        while width < self.size:
            detail = c[:, width : 2 * width]
            nxt = np.empty((before, 2 * width, after))
            np.add(current, detail, out=nxt[:, 0::2])
            np.subtract(current, detail, out=nxt[:, 1::2])
            current = nxt
            width *= 2
        return current[:, : self.n]

    def interval_variance(self, lo: ArrayLike, hi: ArrayLike) -> FloatArray:
        """Closed form of Lemma 3's proof: ``(|S|/L)**2 + sum ((alpha - beta) / s)**2`` over nodes.

        Only the (at most two per level) nodes that contain an end point of S have alpha != beta.

        >>> HaarAxis(8).interval_variance([0, 1], [0, 6]) * 32
        array([11., 38.])
        """
        a = np.asarray(lo, dtype=np.int64)
        b = np.asarray(hi, dtype=np.int64)
        total = ((b - a + 1) / self.size) ** 2
        span = self.size
        while span > 1:
            half = span // 2
            for node, skip in ((a // span, None), (b // span, a // span)):
                start = node * span
                alpha = _overlap(a, b, start, start + half - 1)
                beta = _overlap(a, b, start + half, start + span - 1)
                term = ((alpha - beta) / span) ** 2
                if skip is not None:
                    term = np.where(node == skip, 0.0, term)
                total = total + term
            span = half
        return np.asarray(total, dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n}


class NominalTree:
    """A hierarchy as arrays in breadth-first order (the coefficient layout of Sec. V-A).

    ``child_count[i]`` is the fanout of node i (0 for a leaf); the children of consecutive nodes
    are consecutive, so these counts alone fix the tree. ``leaf_position[j]`` is the domain index
    (depth-first leaf order, as in :class:`dpcube.schema.Hierarchy`) of the j-th leaf in
    breadth-first order. Nodes with a single child are contracted away by the constructors: their
    coefficient would be identically zero and ``W = f/(2f-2)`` undefined (the paper assumes every
    internal node has at least two children).

    >>> t = NominalTree.from_groups([3, 3])    # the hierarchy of the paper's Fig. 3
    >>> t.height, t.child_count.tolist()
    (3, [2, 3, 3, 0, 0, 0, 0, 0, 0])
    """

    def __init__(self, child_count: ArrayLike, leaf_position: ArrayLike) -> None:
        cc = np.asarray(child_count, dtype=np.int64)
        nodes = cc.size
        if nodes < 1 or cc.min() < 0 or int(cc.sum()) != nodes - 1:
            raise SchemaError(
                "a nominal tree needs child counts that sum to the number of nodes - 1"
            )
        if np.any(cc == 1):
            raise SchemaError("a nominal tree may not have a node with a single child; contract it")
        self.child_count = cc
        self.child_start = 1 + np.cumsum(cc) - cc
        if nodes > 1 and np.any(self.child_start[cc > 0] <= np.flatnonzero(cc > 0)):
            raise SchemaError("child counts are not in breadth-first order")
        self.parent = np.full(nodes, -1, dtype=np.int64)
        self.parent[1:] = np.repeat(np.arange(nodes), cc)
        leaves = np.flatnonzero(cc == 0)
        position = np.asarray(leaf_position, dtype=np.int64)
        if position.shape != leaves.shape or not np.array_equal(
            np.sort(position), np.arange(leaves.size)
        ):
            raise SchemaError("leaf positions must be a permutation of the leaves")
        self.leaf_position = position
        self.leaf_nodes = np.empty(leaves.size, dtype=np.int64)
        self.leaf_nodes[position] = leaves
        self.internal = np.flatnonzero(cc > 0)
        #: [start, end) of every level in breadth-first order (root = level 1 of the paper).
        self.level_bounds: list[tuple[int, int]] = []
        start, end = 0, 1
        while start < end:
            self.level_bounds.append((start, end))
            start, end = end, end + int(cc[start:end].sum())
        self.fanout = np.ones(nodes, dtype=np.int64)
        self.fanout[1:] = cc[self.parent[1:]]
        self.depth = np.zeros(nodes, dtype=np.int64)
        reach = np.ones(nodes, dtype=np.int64)
        for level, (lo, hi) in enumerate(self.level_bounds[1:], start=1):
            self.depth[lo:hi] = level
            reach[lo:hi] = reach[self.parent[lo:hi]] + self.fanout[lo:hi]
        self._reach = reach

    @property
    def nodes(self) -> int:
        return int(self.child_count.size)

    @property
    def leaves(self) -> int:
        return int(self.leaf_nodes.size)

    @property
    def height(self) -> int:
        """Levels on the longest root-to-leaf path (root = level 1): h of Lemma 4."""
        return len(self.level_bounds)

    @property
    def support(self) -> int:
        """Coefficients one leaf change touches: the base and its sibling group at every level."""
        return int(self._reach[self.leaf_nodes].max())

    @classmethod
    def from_hierarchy(cls, hierarchy: Hierarchy) -> NominalTree:
        """The (contracted) tree of a schema hierarchy; leaves keep their depth-first positions."""
        children = hierarchy.children

        def contract(node: str) -> str:
            while len(children.get(node, ())) == 1:
                node = children[node][0]
            return node

        order = [contract(hierarchy.root)]
        counts: list[int] = []
        positions: list[int] = []
        for node in order:
            kids = [contract(k) for k in children.get(node, ())]
            counts.append(len(kids))
            order.extend(kids)
            if not kids:
                positions.append(hierarchy.interval(node)[0])
        return cls(counts, positions)

    @classmethod
    def flat(cls, n: int) -> NominalTree:
        """Root over n leaves (a nominal attribute without a hierarchy; h = 2)."""
        if n == 1:
            return cls([0], [0])
        return cls([n] + [0] * n, np.arange(n))

    @classmethod
    def from_groups(cls, sizes: Sequence[int]) -> NominalTree:
        """Three levels: a root over ``len(sizes)`` groups of ``sizes[i]`` leaves (Sec. VII-C)."""
        tree: dict[str, Any] = {
            f"g{i}": [f"g{i}.{j}" for j in range(s)] for i, s in enumerate(sizes)
        }
        return cls.from_hierarchy(Hierarchy.from_mapping(tree))

    def to_dict(self) -> dict[str, Any]:
        return {
            "child_count": self.child_count.tolist(),
            "leaf_position": self.leaf_position.tolist(),
        }


class NominalAxis(AxisTransform):
    """The nominal wavelet transform of Sec. V on a :class:`NominalTree`.

    Coefficients (breadth-first): the base is the total; node N with parent p of fanout f has
    ``c_N = leafsum(N) - leafsum(p) / f``. :meth:`inverse` first subtracts the mean of every
    sibling group (the refinement of Sec. V-B), then rebuilds ``leafsum(N) = c_N + leafsum(p)/f``
    top-down (Eq. 5).

    >>> ax = NominalAxis(NominalTree.from_groups([3, 3]))
    >>> ax.forward(np.array([9., 4, 5, 2, 4, 6]).reshape(1, 6, 1)).ravel()
    array([30.,  3., -3.,  3., -2., -1., -2.,  0.,  2.])
    """

    kind = "nominal"

    def __init__(self, tree: NominalTree, mean_subtraction: bool = True) -> None:
        self.tree = tree
        self.n = tree.leaves
        self.size = tree.nodes
        self.mean_subtraction = mean_subtraction

    @property
    def weights(self) -> FloatArray:
        f = self.tree.fanout.astype(np.float64)
        w = np.ones(self.size)
        w[1:] = f[1:] / (2 * f[1:] - 2)
        return w

    @property
    def rho(self) -> int:
        return self.tree.height

    @property
    def support(self) -> int:
        return self.tree.support

    @property
    def bound_factor(self) -> float:
        return 4.0

    def _levels(self) -> list[tuple[slice | IntArray, IntArray, int, int]]:
        """(parents, their fanouts, start, end of their children) for every level with children.

        ``parents`` is a slice when the level has no leaves (the common, uniform-depth case), so
        the passes below copy contiguous blocks instead of gathering.
        """
        t = self.tree
        out: list[tuple[slice | IntArray, IntArray, int, int]] = []
        for (lo, hi), (clo, chi) in zip(t.level_bounds[:-1], t.level_bounds[1:], strict=True):
            counts = t.child_count[lo:hi]
            parents: slice | IntArray = slice(lo, hi)
            if np.any(counts == 0):
                parents = lo + np.flatnonzero(counts > 0)
                counts = counts[counts > 0]
            out.append((parents, counts, clo, chi))
        return out

    def _leaves(self) -> slice | IntArray:
        t = self.tree
        first = int(t.leaf_nodes[0])
        if np.array_equal(t.leaf_nodes, np.arange(first, first + self.n)):
            return slice(first, first + self.n)
        return t.leaf_nodes

    def leaf_sums(self, x: NDArray[Any]) -> NDArray[Any]:
        """leafsum(N) for every node, bottom-up one level at a time (in the input's dtype)."""
        before, _, after = x.shape
        sums = np.empty((before, self.size, after), dtype=x.dtype)
        sums[:, self._leaves()] = x
        for parents, counts, clo, chi in reversed(self._levels()):
            offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
            sums[:, parents] = np.add.reduceat(sums[:, clo:chi], offsets, axis=1)
        return sums

    def forward(self, x: FloatArray) -> FloatArray:
        sums = self.leaf_sums(x)
        out = np.empty_like(sums)
        out[:, 0] = sums[:, 0]
        for parents, counts, clo, chi in self._levels():
            share = sums[:, parents] / counts[None, :, None]
            np.subtract(
                _grouped(sums[:, clo:chi], counts),
                _spread(share, counts),
                out=_grouped(out[:, clo:chi], counts),
            )
        return out

    def forward_integer(self, x: IntArray) -> IntArray:
        """``I_N = f leafsum(N) - leafsum(parent)`` (f = the parent's fanout), ``I_root`` = total.

        Then ``W_N c_N = f/(2f-2) (leafsum(N) - leafsum(p)/f) = I_N / (2f - 2)``.
        """
        sums = self.leaf_sums(np.asarray(x, dtype=np.int64))
        out = np.empty_like(sums)
        out[:, 0] = sums[:, 0]
        for parents, counts, clo, chi in self._levels():
            block = _grouped(out[:, clo:chi], counts)
            fan = _spread(counts[None, :, None], counts)
            np.multiply(_grouped(sums[:, clo:chi], counts), fan, out=block)
            block -= _spread(sums[:, parents], counts)
        return out

    @property
    def integer_denominator(self) -> IntArray:
        """``2f - 2`` for every non-root node, 1 for the root: ``W(c) c = I(c) / den(c)``, exactly."""
        den = 2 * self.tree.fanout - 2
        den[0] = 1
        return den

    @property
    def integer_gain(self) -> int:
        """A leaf adds f - 1 to its ancestor's I and -1 to each of its f - 1 siblings."""
        t = self.tree
        gain = np.ones(self.size, dtype=np.int64)
        for lo, hi in t.level_bounds[1:]:
            gain[lo:hi] = gain[t.parent[lo:hi]] + 2 * (t.fanout[lo:hi] - 1)
        return int(gain[t.leaf_nodes].max())

    def subtract_means(self, c: FloatArray) -> FloatArray:
        """Mean subtraction (Sec. V-B) in every sibling group; the base is untouched (a copy)."""
        out = np.array(c, dtype=np.float64, copy=True)
        for _, counts, clo, chi in self._levels():
            block = _grouped(out[:, clo:chi], counts)
            if block.ndim == 4:
                block -= block.mean(axis=2, keepdims=True)
            else:
                offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
                means = np.add.reduceat(block, offsets, axis=1) / counts[None, :, None]
                block -= np.repeat(means, counts, axis=1)
        return out

    def inverse(self, c: FloatArray) -> FloatArray:
        sums = self.subtract_means(c) if self.mean_subtraction else np.array(c, dtype=np.float64)
        for parents, counts, clo, chi in self._levels():
            share = sums[:, parents] / counts[None, :, None]
            block = _grouped(sums[:, clo:chi], counts)
            block += _spread(share, counts)
        return sums[:, self._leaves()]

    def query_rows(self, lo: IntArray, hi: IntArray) -> FloatArray:
        """``g_S`` for each interval: ``Proj (Inv^T u_S)`` as rows (queries x coefficients)."""
        t = self.tree
        leaf = np.arange(self.n)
        u = ((leaf[None, :] >= lo[:, None]) & (leaf[None, :] <= hi[:, None])).astype(np.float64)
        y = np.empty((lo.size, self.size))
        y[:, t.leaf_nodes] = u
        for (lo_, hi_), (clo, chi) in zip(
            t.level_bounds[-2::-1], t.level_bounds[:0:-1], strict=True
        ):
            parents = lo_ + np.flatnonzero(t.child_count[lo_:hi_] > 0)
            y[:, parents] = np.add.reduceat(y[:, clo:chi], t.child_start[parents] - clo, axis=1)
            y[:, parents] /= t.child_count[parents][None, :]
        if not self.mean_subtraction:
            return y
        return self.subtract_means(y[:, :, None])[:, :, 0]

    def interval_variance(self, lo: ArrayLike, hi: ArrayLike) -> FloatArray:
        """Exact V(S) for any leaf interval S (Lemma 5, Theorem 3), evaluated on unique intervals.

        >>> ax = NominalAxis(NominalTree.from_groups([3, 3]))
        >>> ax.interval_variance([0, 0, 0], [5, 2, 0]) * 108
        array([108.,  81., 137.])
        """
        a = np.asarray(lo, dtype=np.int64)
        b = np.asarray(hi, dtype=np.int64)
        pairs, inverse = np.unique(
            np.stack([a.ravel(), b.ravel()], axis=1), axis=0, return_inverse=True
        )
        out = np.empty(len(pairs))
        step = max(1, _CHUNK // max(self.size, self.n))
        w2 = self.weights**2
        for s in range(0, len(pairs), step):
            rows = self.query_rows(pairs[s : s + step, 0], pairs[s : s + step, 1])
            out[s : s + step] = (rows**2 / w2[None, :]).sum(axis=1)
        return out[inverse.ravel()].reshape(a.shape)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.tree.to_dict()}


def axis_from_dict(d: Mapping[str, Any]) -> AxisTransform:
    """Inverse of :meth:`AxisTransform.to_dict`."""
    kind = d.get("kind")
    if kind == "haar":
        return HaarAxis(int(d["n"]))
    if kind == "identity":
        return IdentityAxis(int(d["n"]))
    if kind == "nominal":
        return NominalAxis(NominalTree(d["child_count"], d["leaf_position"]))
    raise SchemaError(f"unknown Privelet axis kind {kind!r}; expected haar, nominal or identity")


# ------------------------------------------------------------------------------------------------
# The HN transform (Sec. VI)
# ------------------------------------------------------------------------------------------------


def hn_forward(
    x: ArrayLike, axes: Sequence[AxisTransform], *, weighted: bool = False
) -> FloatArray:
    """The HN transform: the 1-D transforms applied along axes 1..d (Sec. VI-A, step k).

    With ``weighted=True`` every coefficient is multiplied by its weight W_HN (the product of the
    axis weights), which is the un-normalised form of the transform: releasing ``W c + Lap(lambda)``
    is the same as releasing ``c + Lap(lambda / W)``, and its L1 sensitivity is the generalized
    sensitivity of Definition 3.

    >>> hn_forward(np.array([[4, 2], [6, 0]]), [HaarAxis(2), HaarAxis(2)])
    array([[ 3.,  2.],
           [ 0., -1.]])
    """
    out = np.asarray(x, dtype=np.float64)
    if out.ndim != len(axes):
        raise SchemaError(
            f"an array of {out.ndim} axes needs {out.ndim} transforms, got {len(axes)}"
        )
    for k, ax in enumerate(axes):
        view, shape = _as3(np.ascontiguousarray(out), k)
        coeff = ax.forward_weighted(view) if weighted else ax.forward(view)
        out = coeff.reshape((*shape[:k], ax.size, *shape[k + 1 :]))
    return out


def hn_inverse(
    c: ArrayLike, axes: Sequence[AxisTransform], *, weighted: bool = False
) -> FloatArray:
    """The inverse HN transform, axes d..1; mean subtraction precedes each nominal inversion.

    ``weighted=True`` undoes the weighting of :func:`hn_forward` first (axis by axis).
    """
    out = np.asarray(c, dtype=np.float64)
    for k in range(len(axes) - 1, -1, -1):
        ax = axes[k]
        view, shape = _as3(np.ascontiguousarray(out), k)
        values = ax.inverse_weighted(view) if weighted else ax.inverse(view)
        out = values.reshape((*shape[:k], ax.n, *shape[k + 1 :]))
    return out


#: Integer coefficients stay below this bound, so they are exact in int64 and in float64.
EXACT_LIMIT = 2**53


def hn_forward_integer(
    counts: ArrayLike, axes: Sequence[AxisTransform], multiplier: int = 1
) -> IntArray:
    """Integer HN coefficients ``I`` with ``W_HN c = I / prod_i den_i`` (:func:`denominators`),
    times ``multiplier``.

    Computed in int64 with no rounding at all, so the noise is added to exact values and the
    privacy contract of :func:`dpcube.privacy.samplers.snapped_laplace` holds for the numbers
    actually computed, not only in exact arithmetic. ``|I| <= total * prod_i gain_i``; when that
    times ``multiplier`` reaches 2**53 (beyond which float64 is not exact) this raises.

    >>> from dpcube.mechanisms.privelet.transforms import NominalTree
    >>> hn_forward_integer([9, 4, 5, 2, 4, 6], [NominalAxis(NominalTree.from_groups([3, 3]))])
    array([30,  6, -6,  9, -6, -3, -6,  0,  6])
    """
    out = np.asarray(counts)
    if not np.issubdtype(out.dtype, np.integer):
        raise SchemaError("hn_forward_integer needs integer counts")
    out = out.astype(np.int64)
    if out.ndim != len(axes):
        raise SchemaError(
            f"an array of {out.ndim} axes needs {out.ndim} transforms, got {len(axes)}"
        )
    bound = integer_bound(out, axes) * multiplier
    if bound >= EXACT_LIMIT:
        raise SchemaError(
            f"the counts are too large for an exact wavelet transform on this domain "
            f"(bound {bound:.3g} >= 2**53); split the data or use fewer levels"
        )
    for k, ax in enumerate(axes):
        view, shape = _as3(np.ascontiguousarray(out), k)
        out = ax.forward_integer(view).reshape((*shape[:k], ax.size, *shape[k + 1 :]))
    if multiplier != 1:
        out *= multiplier // denominators(axes)
    return out


def integer_bound(counts: ArrayLike, axes: Sequence[AxisTransform]) -> int:
    """``sum |counts| * prod_i gain_i``: a bound on every ``|I|`` of :func:`hn_forward_integer`."""
    total = int(np.abs(np.asarray(counts, dtype=np.int64)).sum())
    return total * math.prod(ax.integer_gain for ax in axes)


def common_denominator(axes: Sequence[AxisTransform]) -> int:
    """D = prod over nominal axes of lcm(2f - 2): ``D W_HN c`` is an integer for every c.

    >>> common_denominator([HaarAxis(4), NominalAxis(NominalTree.from_groups([3, 4]))])
    12
    """
    out = 1
    for ax in axes:
        if isinstance(ax, NominalAxis):
            out *= math.lcm(*(int(v) for v in np.unique(ax.integer_denominator)))
    return out


def hn_forward_exact(counts: ArrayLike, axes: Sequence[AxisTransform]) -> tuple[IntArray, int]:
    """``(J, D)`` with ``W_HN c = J / D`` exactly: the weighted coefficients on a common integer
    scale, so that one noise scale ``D lambda`` on J is ``Lap(lambda)`` on every ``W c``."""
    d = common_denominator(axes)
    return hn_forward_integer(counts, axes, multiplier=d), d


def denominators(axes: Sequence[AxisTransform]) -> IntArray:
    """``prod_i den_i`` as an array that broadcasts against the coefficient tensor.

    ``den`` is ``2f - 2`` on a non-root node of a nominal axis and 1 elsewhere, so the weighted
    coefficient is ``I / den``; its shape has size 1 on every axis without a nominal transform.
    """
    out = np.ones((1,) * len(axes), dtype=np.int64)
    for k, ax in enumerate(axes):
        if isinstance(ax, NominalAxis):
            shape = [1] * len(axes)
            shape[k] = ax.size
            out = out * ax.integer_denominator.reshape(shape)
    return out


def generalized_sensitivity(axes: Sequence[AxisTransform]) -> int:
    """rho_HN = prod_i P(A_i) (Theorem 2; Lemmas 2 and 4 per axis)."""
    return math.prod(ax.rho for ax in axes)


def coefficient_support(axes: Sequence[AxisTransform]) -> int:
    """Coefficients one cell change can touch: the product of the per-axis supports."""
    return math.prod(ax.support for ax in axes)


def box_variance(axes: Sequence[AxisTransform], boxes: NDArray[np.int64]) -> FloatArray:
    """``prod_i V_i(S_i)`` for boxes of shape (q, d, 2) (Theorem 3); multiply by the noise
    variance."""
    out = np.ones(boxes.shape[0])
    for k, ax in enumerate(axes):
        out *= ax.interval_variance(boxes[:, k, 0], boxes[:, k, 1])
    return out


# ------------------------------------------------------------------------------------------------
# One-dimensional helpers in the paper's notation (test vectors from the paper's Figs. 2-3 and
# Examples 4-5)
# ------------------------------------------------------------------------------------------------


def haar_forward(x: ArrayLike) -> FloatArray:
    """1-D Haar coefficients ``[c0, c1, ...]`` of a vector whose length is a power of two (Sec.
    IV-A)."""
    v = np.asarray(x, dtype=np.float64)
    if v.ndim != 1 or v.size & (v.size - 1):
        raise SchemaError(
            f"haar_forward needs a 1-D vector of power-of-two length, got shape {v.shape}"
        )
    return HaarAxis(v.size).forward(v.reshape(1, -1, 1)).ravel()


def haar_inverse(c: ArrayLike) -> FloatArray:
    """Inverse of :func:`haar_forward` (Eq. 3).

    >>> haar_inverse([5.5, -0.5, 1, 0, 3, 2, 2, -1])
    array([9., 3., 6., 2., 8., 4., 5., 7.])
    """
    v = np.asarray(c, dtype=np.float64)
    return HaarAxis(v.size).inverse(v.reshape(1, -1, 1)).ravel()


def haar_weights(m: int) -> FloatArray:
    """W_Haar (Sec. IV-B): ``m`` for the base, ``m / 2**floor(log2 p)`` at position p >= 1."""
    p = np.arange(m)
    w = np.empty(m)
    w[0] = m
    if m > 1:
        w[1:] = m / np.exp2(np.floor(np.log2(p[1:])))
    return w


def nominal_forward(values: ArrayLike, tree: NominalTree) -> FloatArray:
    """1-D nominal coefficients (breadth-first, base first) of the leaf values (Sec. V-A)."""
    v = np.asarray(values, dtype=np.float64)
    return NominalAxis(tree).forward(v.reshape(1, -1, 1)).ravel()


def nominal_inverse(
    c: ArrayLike, tree: NominalTree, *, mean_subtraction: bool = True
) -> FloatArray:
    """Leaf values from nominal coefficients: mean subtraction (Sec. V-B), then Eq. (5).

    >>> t = NominalTree.from_groups([3, 3])
    >>> nominal_inverse([30, 3, -3, 3, -2, -1, -2, 0, 2], t)
    array([9., 4., 5., 2., 4., 6.])
    """
    v = np.asarray(c, dtype=np.float64)
    return NominalAxis(tree, mean_subtraction=mean_subtraction).inverse(v.reshape(1, -1, 1)).ravel()


def mean_subtract(c: ArrayLike, tree: NominalTree) -> FloatArray:
    """Subtract each sibling group's mean from its members (Sec. V-B)."""
    v = np.asarray(c, dtype=np.float64)
    return NominalAxis(tree).subtract_means(v.reshape(1, -1, 1)).ravel()


def nominal_weights(tree: NominalTree) -> FloatArray:
    """W_Nom (Sec. V-A): 1 for the base, ``f / (2f - 2)`` for a node whose parent has fanout f."""
    return NominalAxis(tree).weights


__all__ = [
    "AxisTransform",
    "HaarAxis",
    "IdentityAxis",
    "NominalAxis",
    "NominalTree",
    "axis_from_dict",
    "box_variance",
    "coefficient_support",
    "common_denominator",
    "denominators",
    "generalized_sensitivity",
    "haar_forward",
    "haar_inverse",
    "haar_weights",
    "hn_forward",
    "hn_forward_exact",
    "hn_forward_integer",
    "hn_inverse",
    "integer_bound",
    "mean_subtract",
    "nominal_forward",
    "nominal_inverse",
    "nominal_weights",
]
