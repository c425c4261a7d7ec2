"""Group-size tables: how many groups of each size 1..k each region has (Fioretto, Van Hentenryck,
Zhu, Artificial Intelligence 296, 2021, Sec. 2).

``n[r, s-1]`` is n_s^r, the number of groups (households, taxis) of size s in region r, for every
region of the hierarchy (internal rows are sums of their children). The mechanisms treat G, the
number of groups, as public (Sec. 4): it is released exactly and every level is made
to sum to it. Only the curator can say that it is, so a table carries the declaration
(:meth:`GroupSizeTable.declare_public_groups`, ``public_groups=`` of :func:`group_sizes` and of
the constructor; CLI ``--public-groups N`` or ``--groups-are-public``), and a release without it
is refused before the charge.

:func:`group_sizes` builds the table from person-level data in DuckDB or Spark (group by unit,
then by region and size): the persons never reach Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import DataError, ParameterError
from dpcube.mechanisms.census.hierarchy import RegionHierarchy

if TYPE_CHECKING:
    from dpcube.engine import Engine


@dataclass
class GroupSizeTable:
    """Counts of groups by region and size for a :class:`RegionHierarchy`.

    ``public_groups`` declares G public: ``True`` ("the number of groups in this table is
    public") or the public figure itself, checked against the table.

    >>> h = RegionHierarchy.from_parents({"GA": "US", "NY": "US"})
    >>> t = GroupSizeTable(h, h.aggregate(np.array([[2, 0, 1], [1, 1, 1]])), public_groups=6)
    >>> t.max_size, t.groups, t.row("US").tolist()
    (3, 6, [3, 1, 2])
    >>> t.declared_public
    [{'figure': 'groups', 'value': 6, 'declared_by': 'curator', 'how': 'public_groups=6'}]
    """

    hierarchy: RegionHierarchy
    counts: NDArray[np.int64]
    top_coded: bool = False
    persons: int | None = None
    report: dict[str, Any] = field(default_factory=dict)
    #: The name of the unit (group) column the sizes count records of (:func:`group_sizes`'s
    #: ``unit``); None for bare counts. A public name, kept with the release for its labels.
    unit: str | None = field(default=None, compare=False)
    #: The data set identity that selects the budget ledger (never released; see
    #: :class:`dpcube.Histogram`); ``None`` for bare counts.
    dataset: str | None = field(default=None, repr=False, compare=False)
    #: How units seen in several regions were given one (``"first"``, ``"most"``; ``None``:
    #: every unit lay in one region). Only the group-size measurements stay within their
    #: sensitivity under it (see :mod:`dpcube.mechanisms.census.privacy`).
    region_of_unit: str | None = field(default=None, repr=False, compare=False)
    #: Declares G public on construction (see :meth:`declare_public_groups`).
    public_groups: int | bool | None = field(default=None, repr=False, compare=False)
    #: The figures declared public, each ``{"figure", "value", "declared_by", "how"}``; written
    #: into the release's manifest (``declared_public``).
    declared_public: list[dict[str, Any]] = field(default_factory=list, compare=False)

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
        if self.public_groups is not None and self.public_groups is not False:
            self.declare_public_groups(self.public_groups)

    def declare_public_groups(
        self,
        value: int | bool = True,
        *,
        declared_by: str = "curator",
        how: str | None = None,
        show_values: bool = False,
    ) -> GroupSizeTable:
        """Record that G, the number of groups, is public (returns the table).

        ``value`` is ``True`` (whatever G this table has is public) or the public figure, which
        must equal the table's G: a mismatch is refused and, as the true G is a figure of the
        data, names it only with ``show_values`` (the curator's own terminal; never a release).
        ``declared_by`` says who vouches for it (``curator``; ``schema`` when the units are
        listed in a public schema; ``release`` when G was read from a release), ``how`` the
        flag or keyword that declared it.
        """
        if value is True:
            figure = self.groups
            how = how or "public_groups=True"
        elif isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise DataError(
                f"public_groups must be True or a whole number of groups, got {value!r}"
            )
        else:
            figure = int(value)
            how = how or f"public_groups={figure}"
            if figure != self.groups:
                shown = (
                    f" ({self.groups:,})"
                    if show_values
                    else " (not shown: it is a figure of the data; show_values=True or --show-values shows it)"
                )
                raise DataError(
                    f"{how}: the data holds a different number of groups{shown}; declare the "
                    "figure that is public for this data, or declare whatever it holds public "
                    "(public_groups=True, CLI --groups-are-public)"
                )
        entry = {"figure": "groups", "value": figure, "declared_by": declared_by, "how": how}
        self.declared_public = [d for d in self.declared_public if d.get("figure") != "groups"]
        self.declared_public.append(entry)
        return self

    @property
    def groups_declared(self) -> bool:
        """Whether someone declared G public (:meth:`declare_public_groups`)."""
        return any(d.get("figure") == "groups" for d in self.declared_public)

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
        return self.hierarchy.sizes_frame(self.counts)


#: Why the census group-size path and mechanisms refuse a privacy unit other than the row.
UNIT_REFUSAL = (
    "the census mechanisms protect one person (one row) joining or leaving a group, with the "
    "number of groups public; a privacy unit of several rows could change several groups at once "
    "and empty one (changing the public number of groups), which their sensitivities do not "
    "cover: release without --privacy-unit, with one row per person (deduplicate the persons "
    "first)"
)


def group_sizes(
    source: Any,
    *,
    unit: str,
    region: str,
    hierarchy: RegionHierarchy | str | Any,
    max_size: int,
    top_code: bool = False,
    public_groups: int | bool | None = None,
    on_out_of_domain: str = "error",
    region_of_unit: str | None = None,
    dataset: str | None = None,
    show_values: bool = False,
    engine: str | Engine | None = None,
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    max_cells_per_unit: int | None = None,
    max_rows_per_cell: int | None = None,
) -> GroupSizeTable:
    """Group-size table of person-level data (Sec. 2), counted in ``engine``.

    The privacy unit is the person, one row: the census mechanisms protect one person joining or
    leaving a group (the paper's neighbour). ``privacy_unit`` and its bounds are refused
    (:data:`UNIT_REFUSAL` says why).

    ``source`` is anything :func:`dpcube.engine.duckdb_engine.open_source` reads (a CSV/Parquet
    path, a DataFrame, an Arrow table, a DuckDB relation, :class:`dpcube.SQL`) or a Spark
    DataFrame (counted on Spark; ``engine="spark"`` counts a path there too): units are grouped
    (unit -> size, region) and then counted per (region, size) by the engine
    (:func:`dpcube.engine.counting.group_size_counts`), and only that small table comes back; each row is one
    person with a unit (group) id ``unit`` and a leaf region ``region``. ``hierarchy`` is a
    :class:`RegionHierarchy`, a path to a hierarchy file, or a ``{region: parent}`` mapping.

    ``public_groups`` declares G, the number of groups, public (the census mechanisms release it
    exactly and refuse a table without the declaration): ``True`` for "the number of groups in
    this data is public", or the public figure, checked here against the data
    (:meth:`GroupSizeTable.declare_public_groups`).

    ``on_out_of_domain`` is the policy of every mechanism for rows outside the domain: under
    ``"error"`` (default) and ``"clip"`` a row with a NULL unit or region, or a region missing
    from the hierarchy or not a leaf of it, is refused; under ``"drop"`` the row is not counted
    (before the units are formed: a unit keeps its other rows). ``region_of_unit`` (``"first"`` or
    ``"most"``, see :func:`~dpcube.engine.counting.group_size_counts`) gives each unit seen in
    several leaf regions one region; without it such a unit is refused.

    Other errors: a group larger than ``max_size`` (unless ``top_code``). The errors count the
    units and regions concerned; unit ids and region values from the data (private) are named
    only with ``show_values=True`` (CLI ``--show-values``). ``dataset`` names the data set for
    its budget ledger (default: the fingerprint of ``source``). The curator's report
    (:attr:`GroupSizeTable.report`, never released) counts what was dropped or reassigned.
    """
    if (privacy_unit, max_rows_per_unit, max_cells_per_unit, max_rows_per_cell) != (None,) * 4:
        raise ParameterError(f"group_sizes: {UNIT_REFUSAL}")
    import pandas as pd

    from dpcube.engine import POLICIES, get_engine
    from dpcube.engine.counting import group_size_counts

    if on_out_of_domain not in POLICIES:
        raise DataError(
            f"on_out_of_domain must be one of {', '.join(POLICIES)}, got {on_out_of_domain!r}"
        )
    if isinstance(hierarchy, RegionHierarchy):
        h = hierarchy
    elif isinstance(hierarchy, dict):
        h = RegionHierarchy.from_parents(hierarchy)
    else:
        h = RegionHierarchy.from_file(hierarchy)
    if int(max_size) < 1:
        raise DataError(f"max_size must be at least 1, got {max_size}")
    counted: dict[str, Any] = {}
    with get_engine(engine, source).open(source) as persons:
        frame = pd.DataFrame(
            group_size_counts(
                persons,
                unit,
                region,
                show_values,
                on_out_of_domain=on_out_of_domain,
                region_of_unit=region_of_unit,
                leaves=h.names[h.leaves],
                report=counted,
            )
        )
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
            "add them to the hierarchy, fix the data, or leave their rows out with "
            "--on-out-of-domain drop (on_out_of_domain='drop')"
        )
    table = GroupSizeTable.from_frame(frame, h, max_size=max_size, top_code=top_code)
    table.persons = int(frame["persons"].sum())
    table.unit = str(unit)
    table.report = {
        "groups": table.groups,
        "persons": table.persons,
        "max_size": table.max_size,
        "on_out_of_domain": on_out_of_domain,
        "dropped": {
            "rows_with_null_unit_or_region": int(counted.get("null_rows_dropped", 0)),
            "rows_outside_the_hierarchy_leaves": int(counted.get("rows_outside_leaves_dropped", 0)),
        },
    }
    if region_of_unit is not None:
        table.report["region_of_unit"] = region_of_unit
        table.report["units_reassigned"] = int(counted.get("units_reassigned", 0))
    if public_groups is not None and public_groups is not False:
        table.declare_public_groups(public_groups, show_values=show_values)
    table.region_of_unit = region_of_unit
    from dpcube.histogram import data_set_identity

    table.dataset = data_set_identity(source, dataset)
    return table
