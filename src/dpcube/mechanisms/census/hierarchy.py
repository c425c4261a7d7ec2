"""The public region hierarchy T of a census release (Fioretto, Van Hentenryck, Zhu,
Artificial Intelligence 296, 2021, Sec. 2).

Regions are numbered so that every parent comes before its children and each level is a
contiguous block; within a level, regions are ordered left to right: by parent, then by name
(a canonical child order of ours; the paper leaves it open, and it fixes the chain of M_CDP). All
leaves must sit at the same level L (the paper's assumption).

>>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US", "US": None})
>>> h.names, h.levels, h.level_sizes
(('US', 'GA', 'NY'), 2, (1, 2))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import DataError


@dataclass(frozen=True)
class RegionHierarchy:
    """A rooted tree of regions in canonical (level, parent, name) order.

    ``parent[i]`` is the index of region i's parent (-1 for the root), ``level[i]`` its level
    (1 = root), ``level_start[l-1]:level_start[l]`` the indices of level l.
    """

    names: tuple[str, ...]
    parent: NDArray[np.int64]
    level: NDArray[np.int64]
    index: dict[str, int] = field(init=False, repr=False, compare=False)
    level_start: NDArray[np.int64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", {n: i for i, n in enumerate(self.names)})
        levels = int(self.level.max()) if len(self.level) else 0
        starts = np.searchsorted(self.level, np.arange(1, levels + 2)).astype(np.int64)
        object.__setattr__(self, "level_start", starts)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_parents(cls, parents: Mapping[str, str | None]) -> RegionHierarchy:
        """Build from ``{region: parent}`` (the root maps to ``None`` or is only named as a parent).

        Raises :class:`DataError` on a cycle, several roots, or leaves at different depths.
        """
        par: dict[str, str | None] = {}
        for child, p in parents.items():
            c = str(child)
            pp = (
                None
                if p is None or (isinstance(p, float) and np.isnan(p)) or str(p) == ""
                else str(p)
            )
            if pp == c:
                raise DataError(f"region {c!r} is its own parent; fix the hierarchy file")
            par[c] = pp
        for p in list(par.values()):
            if p is not None and p not in par:
                par[p] = None
        roots = sorted(r for r, p in par.items() if p is None)
        if len(roots) != 1:
            raise DataError(
                f"the region hierarchy must have exactly one root, found {len(roots)}: {roots[:5]}"
                " (give every region but the nation a parent)"
            )
        children: dict[str, list[str]] = {r: [] for r in par}
        for c, p in par.items():
            if p is not None:
                children[p].append(c)
        depth: dict[str, int] = {roots[0]: 1}
        order: list[str] = [roots[0]]
        frontier = [roots[0]]
        while frontier:
            nxt: list[str] = []
            for r in frontier:
                for c in sorted(children[r]):
                    depth[c] = depth[r] + 1
                    order.append(c)
                    nxt.append(c)
            frontier = nxt
        if len(order) != len(par):
            lost = sorted(set(par) - set(order))
            raise DataError(
                f"the region hierarchy has a cycle through {lost[:5]} (no path to the root "
                f"{roots[0]!r}); fix their parents"
            )
        leaf_depths = {depth[r] for r in par if not children[r]}
        if len(leaf_depths) > 1:
            shallow = sorted(r for r in par if not children[r] and depth[r] == min(leaf_depths))
            raise DataError(
                f"all leaf regions must be at the same level (paper section 3); {shallow[:5]} are "
                f"at level {min(leaf_depths)}, others at {max(leaf_depths)}"
            )
        pos = {r: i for i, r in enumerate(order)}
        parent = np.array([-1 if par[r] is None else pos[par[r]] for r in order], dtype=np.int64)  # type: ignore[index]
        level = np.array([depth[r] for r in order], dtype=np.int64)
        return cls(tuple(order), parent, level)

    @classmethod
    def from_mapping(cls, tree: Mapping[str, Any], root: str = "nation") -> RegionHierarchy:
        """Build from a nested mapping ``{child: {grandchild: ...} | [leaf, ...] | None}``.

        >>> RegionHierarchy.from_mapping({"GA": None, "NY": None}, root="US").names
        ('US', 'GA', 'NY')
        """
        parents: dict[str, str | None] = {root: None}

        def add(p: str, sub: Any) -> None:
            if sub is None:
                return
            items = sub.items() if isinstance(sub, Mapping) else ((s, None) for s in sub)
            for name, value in items:
                if str(name) in parents:
                    raise DataError(f"region {name!r} appears twice in the hierarchy")
                parents[str(name)] = p
                add(str(name), value)

        add(root, tree)
        return cls.from_parents(parents)

    @classmethod
    def from_levels(
        cls, frame: Any, columns: Sequence[str], root: str = "nation"
    ) -> RegionHierarchy:
        """Build from a table with one column per level below the root (e.g. state, county).

        Region names are made unique by joining the path (``"GA/Fulton"``) only when a name
        repeats under different parents.
        """
        parents: dict[str, str | None] = {root: None}
        rows = frame[list(columns)].drop_duplicates().astype(str).itertuples(index=False)
        for row in rows:
            p = root
            for name in row:
                prev = parents.get(name, p)
                if prev != p:
                    raise DataError(
                        f"region {name!r} has two parents ({prev!r} and {p!r}); use unique codes per level"
                    )
                parents[name] = p
                p = name
        return cls.from_parents(parents)

    @classmethod
    def from_file(cls, path: str | Path) -> RegionHierarchy:
        """Read a CSV/Parquet table with columns ``region,parent`` (root: empty parent) or a JSON
        nested mapping ``{"root": NAME, "children": {...}}``."""
        p = Path(path)
        if not p.exists():
            raise DataError(f"hierarchy file {str(p)!r} does not exist")
        if p.suffix.lower() == ".json":
            import json

            d = json.loads(p.read_text())
            return cls.from_mapping(d["children"], root=d.get("root", "nation"))
        import duckdb

        con = duckdb.connect()
        try:
            rel = (
                con.read_parquet(str(p))
                if p.suffix.lower() in (".parquet", ".pq")
                else con.read_csv(str(p), all_varchar=True)
            )
            cols = [c.lower() for c in rel.columns]
            if "region" not in cols or "parent" not in cols:
                raise DataError(
                    f"hierarchy file {str(p)!r} needs columns region,parent; found {rel.columns}"
                )
            rows = rel.fetchall()
        finally:
            con.close()
        ri, pi = cols.index("region"), cols.index("parent")
        return cls.from_parents(
            {str(r[ri]): (None if r[pi] in (None, "") else str(r[pi])) for r in rows}
        )

    # -- structure ------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def levels(self) -> int:
        """L, the number of levels (the root is level 1)."""
        return len(self.level_start) - 1

    @property
    def level_sizes(self) -> tuple[int, ...]:
        """|R_l| for l = 1..L."""
        return tuple(
            int(b - a) for a, b in zip(self.level_start[:-1], self.level_start[1:], strict=True)
        )

    def level_slice(self, level: int) -> slice:
        """Indices of the regions at ``level`` (1-based)."""
        return slice(int(self.level_start[level - 1]), int(self.level_start[level]))

    @property
    def leaves(self) -> slice:
        return self.level_slice(self.levels)

    def is_leaf(self, i: int) -> bool:
        return int(self.level[i]) == self.levels

    def children_of_level(self, level: int) -> NDArray[np.int64]:
        """For level ``level`` + 1, the position (within ``level``) of each region's parent."""
        return self.parent[self.level_slice(level + 1)] - int(self.level_start[level - 1])

    def region_index(self, name: str) -> int:
        try:
            return self.index[str(name)]
        except KeyError:
            from dpcube.errors import QueryError

            raise QueryError(
                f"unknown region {name!r}; the hierarchy has {self.size} regions, e.g. {list(self.names[:3])}"
            ) from None

    def aggregate(self, leaf_values: NDArray[Any]) -> NDArray[Any]:
        """Rows for every region from rows for the leaves (internal = sum of children).

        >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
        >>> h.aggregate(np.array([[2, 0, 1], [1, 1, 1]])).tolist()
        [[3, 1, 2], [2, 0, 1], [1, 1, 1]]
        """
        out = np.zeros((self.size, *leaf_values.shape[1:]), dtype=leaf_values.dtype)
        out[self.leaves] = leaf_values
        for level in range(self.levels - 1, 0, -1):
            sl = self.level_slice(level)
            np.add.at(out[sl], self.children_of_level(level), out[self.level_slice(level + 1)])
        return out

    def sizes_frame(self, counts: NDArray[Any]) -> Any:
        """A pandas DataFrame (region, level, size, count) of ``counts`` (regions x sizes 1..k),
        one row per region and size.

        >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
        >>> frame = h.sizes_frame(np.array([[3, 1], [2, 0], [1, 1]]))
        >>> len(frame), frame.iloc[2].tolist() == ["GA", 2, 1, 2]
        (6, True)
        """
        import pandas as pd

        k = counts.shape[1]
        return pd.DataFrame(
            {
                "region": np.repeat(np.asarray(self.names, dtype=object), k),
                "level": np.repeat(self.level, k),
                "size": np.tile(np.arange(1, k + 1), self.size),
                "count": np.asarray(counts).ravel(),
            }
        )
