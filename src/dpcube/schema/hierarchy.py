"""A tree over a nominal attribute's categories: the leaves, ordered depth-first, so that every
node covers a contiguous interval of leaves."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dpcube.errors import QueryError, SchemaError
from dpcube.schema._common import Interval


@dataclass(frozen=True)
class Hierarchy:
    """A tree over categories; leaves are the categories, ordered depth-first.

    Every node covers the contiguous interval of leaves below it, so a node is a range query.
    The root is named ``root`` (``"*"`` by default) and covers every leaf.

    >>> h = Hierarchy.from_mapping({"Prof": {"Eng": None, "Doc": None}, "Svc": ["Cook"]})
    >>> h.leaves
    ('Eng', 'Doc', 'Cook')
    >>> h.interval("Prof"), h.interval("Cook"), h.interval("*")
    ((0, 1), (2, 2), (0, 2))
    """

    children: Mapping[str, tuple[str, ...]]
    root: str = "*"
    leaves: tuple[str, ...] = field(init=False)
    intervals: Mapping[str, Interval] = field(init=False)

    def __post_init__(self) -> None:
        leaves: list[str] = []
        intervals: dict[str, Interval] = {}

        def visit(node: str, depth: int) -> None:
            if depth > 64:
                raise SchemaError(f"hierarchy deeper than 64 levels at {node!r} (a cycle?)")
            kids = self.children.get(node, ())
            start = len(leaves)
            if not kids:
                leaves.append(node)
            for kid in kids:
                visit(kid, depth + 1)
            intervals[node] = (start, len(leaves) - 1)

        visit(self.root, 0)
        object.__setattr__(self, "leaves", tuple(leaves))
        object.__setattr__(self, "intervals", intervals)

    @classmethod
    def from_mapping(cls, tree: Mapping[str, Any], root: str = "*") -> Hierarchy:
        """Build from a nested mapping ``{node: {child: ...} | [leaf, ...] | None}``."""
        children: dict[str, tuple[str, ...]] = {}
        seen: set[str] = {root}

        def add(parent: str, sub: Any) -> None:
            if sub is None:
                return
            if isinstance(sub, Mapping):
                names = [str(k) for k in sub]
                items: list[tuple[str, Any]] = [(str(k), v) for k, v in sub.items()]
            elif isinstance(sub, Sequence) and not isinstance(sub, str):
                names = [str(k) for k in sub]
                items = [(n, None) for n in names]
            else:
                raise SchemaError(
                    f"hierarchy node {parent!r}: children must be a mapping, a list or null, "
                    f"got {sub!r}"
                )
            if not names:
                raise SchemaError(f"hierarchy node {parent!r} has an empty set of children")
            for name in names:
                if name in seen:
                    raise SchemaError(
                        f"hierarchy node {name!r} appears twice; names must be unique"
                    )
                seen.add(name)
            children[parent] = tuple(names)
            for name, value in items:
                add(name, value)

        add(root, tree)
        return cls(children=children, root=root)

    def to_mapping(self, node: str | None = None) -> Any:
        node = self.root if node is None else node
        kids = self.children.get(node, ())
        if not kids:
            return None
        return {kid: self.to_mapping(kid) for kid in kids}

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every node, root first, in depth-first order."""
        return tuple(self._preorder())

    def _preorder(self) -> Iterable[str]:
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(self.children.get(node, ())))

    def interval(self, node: str) -> Interval:
        try:
            return self.intervals[node]
        except KeyError:
            raise QueryError(f"hierarchy has no node {node!r}") from None

    @property
    def height(self) -> int:
        """Number of levels (a root with leaf children has height 2)."""

        def h(node: str) -> int:
            kids = self.children.get(node, ())
            return 1 + max((h(k) for k in kids), default=0)

        return h(self.root)
