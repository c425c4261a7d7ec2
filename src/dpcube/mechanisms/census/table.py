"""Group-size tables: how many groups of each size 1..k each region has (spec section 1.3).

``n[r, s-1]`` is n_s^r, the number of groups (households, taxis) of size s in region r, for every
region of the hierarchy (internal rows are sums of their children). G, the number of groups, is
public (spec section 1.5), as are the units and their regions.

:func:`group_sizes` builds the table from person-level data in DuckDB or Spark (group by unit,
then by region and size): the persons never reach Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import DataError
from dpcube.mechanisms.census.hierarchy import RegionHierarchy

if TYPE_CHECKING:
    from dpcube.engine import Engine


@dataclass
class GroupSizeTable:
    """Counts of groups by region and size for a :class:`RegionHierarchy`.

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> t = GroupSizeTable(h, h.aggregate(np.array([[2, 0, 1], [1, 1, 1]])))
    >>> t.max_size, t.groups, t.row("US").tolist()
    (3, 6, [3, 1, 2])
    """

    hierarchy: RegionHierarchy
    counts: NDArray[np.int64]
    top_coded: bool = False
    persons: int | None = None
    report: dict[str, Any] = field(default_factory=dict)
    #: The data set identity that selects the budget ledger (never released; see
    #: :class:`dpcube.Histogram`); ``None`` for bare counts.
    dataset: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.counts = np.asarray(self.counts, dtype=np.int64)
        if self.counts.ndim != 2 or self.counts.shape[0] != self.hierarchy.size:
            raise DataError(
                f"group-size counts must have one row per region ({self.hierarchy.size}), got shape {self.counts.shape}"
            )
        if self.counts.shape[1] < 1:
            raise DataError("group-size counts need at least one size column (max_size >= 1)")
        if (self.counts < 0).any():
            r, s = np.argwhere(self.counts < 0)[0]
            raise DataError(f"negative count for region {self.hierarchy.names[r]!r}, size {s + 1}")

    @property
    def max_size(self) -> int:
        """k, the largest group size (the last bin is "k or more" when ``top_coded``)."""
        return int(self.counts.shape[1])

    @property
    def groups(self) -> int:
        """G, the public number of groups (the root's total)."""
        return int(self.counts[0].sum())

    def row(self, region: str) -> NDArray[np.int64]:
        return self.counts[self.hierarchy.region_index(region)]

    @classmethod
    def from_frame(
        cls,
        frame: Any,
        hierarchy: RegionHierarchy,
        *,
        max_size: int | None = None,
        top_code: bool = False,
        region: str = "region",
        size: str = "size",
        count: str = "count",
    ) -> GroupSizeTable:
        """From a table of (leaf region, size, count) rows.

        Sizes must be integers in 1..``max_size`` (default: the largest size present); larger
        sizes raise unless ``top_code=True``, which adds them to the "k or more" bin.
        """
        for col in (region, size, count):
            if col not in frame.columns:
                raise DataError(
                    f"group-size frame needs a column {col!r}; it has {list(frame.columns)}"
                )
        regions = frame[region].astype(str).to_numpy()
        sizes = np.asarray(frame[size], dtype=np.int64)
        counts = np.asarray(frame[count], dtype=np.int64)
        k = int(max_size) if max_size is not None else int(sizes.max(initial=1))
        if k < 1:
            raise DataError(f"max_size must be at least 1, got {k}")
        if (sizes < 1).any():
            raise DataError(f"group size {int(sizes[sizes < 1][0])} in column {size!r} is below 1")
        if (sizes > k).any():
            if not top_code:
                raise DataError(
                    f"group size {int(sizes.max())} in column {size!r} exceeds max_size={k}; raise "
                    "max_size or pass top_code=True (CLI: --top-code) to count such groups in the 'k or more' bin"
                )
            sizes = np.minimum(sizes, k)
        leaf_lo = hierarchy.leaves.start
        idx = np.empty(len(regions), dtype=np.int64)
        for i, name in enumerate(regions):
            j = hierarchy.index.get(name)
            if j is None:
                raise DataError(
                    f"region {name!r} in column {region!r} is missing from the hierarchy; add it"
                )
            if not hierarchy.is_leaf(j):
                raise DataError(
                    f"region {name!r} is not a leaf of the hierarchy (level {hierarchy.level[j]} of "
                    f"{hierarchy.levels}); groups must be assigned to leaf regions"
                )
            idx[i] = j - leaf_lo
        leaf = np.zeros((hierarchy.level_sizes[-1], k), dtype=np.int64)
        np.add.at(leaf, (idx, sizes - 1), counts)
        return cls(hierarchy, hierarchy.aggregate(leaf), top_coded=top_code)

    def to_frame(self) -> Any:
        """Long table (region, level, size, count) of every region and size."""
        import pandas as pd

        h, k = self.hierarchy, self.max_size
        return pd.DataFrame(
            {
                "region": np.repeat(np.asarray(h.names, dtype=object), k),
                "level": np.repeat(h.level, k),
                "size": np.tile(np.arange(1, k + 1), h.size),
                "count": self.counts.ravel(),
            }
        )


def group_sizes(
    source: Any,
    *,
    unit: str,
    region: str,
    hierarchy: RegionHierarchy | str | Any,
    max_size: int,
    top_code: bool = False,
    dataset: str | None = None,
    show_values: bool = False,
    engine: str | Engine | None = None,
) -> GroupSizeTable:
    """Group-size table of person-level data (spec section 1.1), counted in ``engine``.

    ``source`` is anything :func:`dpcube.engine.duckdb_engine.open_source` reads (a CSV/Parquet
    path, a DataFrame, an Arrow table, a DuckDB relation, :class:`dpcube.SQL`) or a Spark
    DataFrame (counted on Spark; ``engine="spark"`` counts a path there too): units are grouped
    (unit -> size, region) and then counted per (region, size) by the engine
    (:func:`dpcube.engine.counting.group_size_counts`), and only that small table comes back; each row is one
    person with a unit (group) id ``unit`` and a leaf region ``region``. ``hierarchy`` is a
    :class:`RegionHierarchy`, a path to a hierarchy file, or a ``{region: parent}`` mapping.

    Errors: a unit in two leaf regions, a region missing from the hierarchy, a group larger than
    ``max_size`` (unless ``top_code``), a NULL unit or region. The errors count the units and
    regions concerned; unit ids and region values from the data (private) are named only with
    ``show_values=True`` (CLI ``--show-values``). ``dataset`` names the data set for its budget
    ledger (default: the fingerprint of ``source``).
    """
    import pandas as pd

    from dpcube.engine import get_engine
    from dpcube.engine.counting import group_size_counts

    if isinstance(hierarchy, RegionHierarchy):
        h = hierarchy
    elif isinstance(hierarchy, dict):
        h = RegionHierarchy.from_parents(hierarchy)
    else:
        h = RegionHierarchy.from_file(hierarchy)
    if int(max_size) < 1:
        raise DataError(f"max_size must be at least 1, got {max_size}")
    with get_engine(engine, source).open(source) as persons:
        frame = pd.DataFrame(group_size_counts(persons, unit, region, show_values))
    frame["region"] = frame["region"].astype(str)
    unknown = sorted(set(frame["region"].astype(str)) - set(h.names))
    if unknown:
        named = (
            f": {', '.join(repr(x) for x in unknown[:3])}{', ...' if len(unknown) > 3 else ''}"
            if show_values
            else " (values not shown; show_values=True or --show-values names them)"
        )
        raise DataError(
            f"{len(unknown):,} values of column {region!r} are missing from the hierarchy{named}; "
            "add them to the hierarchy or fix the data"
        )
    table = GroupSizeTable.from_frame(frame, h, max_size=max_size, top_code=top_code)
    table.persons = int(frame["persons"].sum())
    table.report = {"groups": table.groups, "persons": table.persons, "max_size": table.max_size}
    from dpcube.histogram import data_set_identity

    table.dataset = data_set_identity(source, dataset)
    return table
