"""The release of a census hierarchy: integer counts of groups by region and size.

Queries: ``{"region": NAME, "size": s | [lo, hi]}`` (default: the root, all sizes) returns the
number of groups of size lo..hi in the region. Saved and loaded by the shared
:meth:`dpcube.release.Release.save` / :func:`dpcube.load_release`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from dpcube.errors import QueryError, ReleaseError
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.release.base import Release, ReleaseMetadata, SetParts, column_numpy
from dpcube.release.views import (
    ReportBars,
    ReportChoice,
    ReportPart,
    ReportSection,
    ReportTable,
)

if TYPE_CHECKING:
    from dpcube.release.uncertainty import BootstrapWorld


def _group_size(value: Any) -> int:
    """A group size from a query: a whole number, or text that reads as one (the CLI's ``size=1``).

    >>> _group_size(2), _group_size("1"), _group_size(3.0)
    (2, 1, 3)
    """
    if isinstance(value, str):
        value = value.strip()
        if value.isdigit():
            return int(value)
    elif isinstance(value, int | np.integer | float) and not isinstance(value, bool):
        if float(value).is_integer():
            return int(value)
    raise QueryError(f"size {value!r} must be a whole number of persons, or a range [lo, hi]")


class CensusQueries(Sequence[Mapping[str, Any]]):
    """Census queries resolved once (:meth:`CensusRelease.parsed`): the queries as given and
    ``boxes``, an int array (q, 3) of region index, lowest and highest size, which every release
    of the same hierarchy and sizes (its bootstrap replicates) reads instead of parsing them."""

    def __init__(self, queries: Sequence[Mapping[str, Any]], boxes: NDArray[np.int64]) -> None:
        self.queries = list(queries)
        self.boxes = boxes

    def __len__(self) -> int:
        return len(self.queries)

    def __getitem__(self, k: Any) -> Any:
        return self.queries[k]


class CensusRelease(Release):
    """Released n^_s^r for every region r and size s = 1..k, plus the public hierarchy."""

    kind = "census_hierarchy"

    def __init__(
        self,
        metadata: ReleaseMetadata,
        hierarchy: RegionHierarchy,
        values: NDArray[np.int64],
        groups: int,
        *,
        private: bool = True,
        top_coded: bool = False,
        measurements: NDArray[np.int64] | None = None,
        unit: str | None = None,
    ) -> None:
        super().__init__(None, metadata)
        #: The name of the group (unit) column the sizes count records of, as the curator gave
        #: it (``dpcube release --group-by``): what a table or figure calls a group; None when
        #: not known (bare counts).
        self.unit = unit
        self.hierarchy = hierarchy
        self.values = np.asarray(values, dtype=np.int64)
        #: The noisy measurements before post-processing (regions x sizes: the group sizes n~ or
        #: the cumulative Gamma~ of ``metadata.noise["measurement"]``), or None (chain noise, or a
        #: release saved before they were kept). They are the mechanism's own DP output, covered
        #: by its guarantee; their noise is exact, which :meth:`bound_interval_many` uses.
        self.measurements = (
            None if measurements is None else np.asarray(measurements, dtype=np.int64)
        )
        if self.measurements is not None and self.measurements.shape != self.values.shape:
            raise ReleaseError(
                f"measurements of shape {self.measurements.shape} do not match the release's "
                f"{self.values.shape}"
            )
        self.groups = int(groups)
        self.private = bool(private)
        self.top_coded = bool(top_coded)
        self._cum = np.concatenate(
            [np.zeros((self.values.shape[0], 1), np.int64), np.cumsum(self.values, axis=1)], axis=1
        )

    @property
    def max_size(self) -> int:
        return int(self.values.shape[1])

    @property
    def size_label(self) -> str:
        """What a group's size counts, for tables and figures: ``records per <unit>``.

        >>> from dpcube.mechanisms.census.hierarchy import RegionHierarchy
        >>> h = RegionHierarchy.from_parents({"US": None})
        >>> m = ReleaseMetadata("census-hierarchy", {}, 1.0, None, "add_remove")
        >>> CensusRelease(m, h, np.zeros((1, 2)), 0, unit="tail_num").size_label
        'records per tail_num'
        """
        return f"records per {self.unit or 'group'}"

    @property
    def table(self) -> Any:
        """pandas DataFrame of (region, level, size, count) for every region and size."""
        return self.hierarchy.sizes_frame(self.values)

    def _box(self, query: Mapping[str, Any]) -> tuple[int, int, int]:
        extra = set(query) - {"region", "size"}
        if extra:
            raise QueryError(
                f"unknown query keys {sorted(extra)}; a census query takes 'region' and 'size'"
            )
        r = self.hierarchy.region_index(str(query.get("region", self.hierarchy.names[0])))
        size = query.get("size", [1, self.max_size])
        pair = size if isinstance(size, list | tuple) and len(size) == 2 else (size, size)
        lo, hi = (_group_size(v) for v in pair)
        if lo > hi:
            raise QueryError(f"size range [{lo}, {hi}] is reversed; write it as [{hi}, {lo}]")
        if not 1 <= lo <= hi <= self.max_size:
            raise QueryError(f"size range [{lo}, {hi}] is not inside [1, {self.max_size}]")
        return r, lo, hi

    def _boxes(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.int64]:
        """The (q, 3) region index, lowest and highest size of each query (read from
        :class:`CensusQueries`, else parsed)."""
        if isinstance(queries, CensusQueries):
            return queries.boxes
        return np.array([self._box(q) for q in queries], dtype=np.int64).reshape(-1, 3)

    def parsed(self, queries: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
        """The queries with their region and size range resolved once (:class:`CensusQueries`)."""
        if isinstance(queries, CensusQueries) or self.set_parts(queries) is not None:
            return queries
        return CensusQueries(queries, self._boxes(queries))

    def set_parts(self, queries: Sequence[Mapping[str, Any]]) -> SetParts | None:
        """Queries naming a set of regions ``{"region": {"in": [...]}}`` as one query per region
        (their answers and noises add up: each region's figures carry their own noise). Regions
        of a set must not overlap: a region and one of its ancestors are refused (the groups of
        the smaller would be counted twice)."""
        if isinstance(queries, CensusQueries):
            return None
        if not any(
            isinstance(q, Mapping) and isinstance(q.get("region"), Mapping) for q in queries
        ):
            return None
        parts: list[dict[str, Any]] = []
        starts: list[int] = []
        for i, query in enumerate(queries):
            starts.append(len(parts))
            region = query.get("region")
            if not isinstance(region, Mapping):
                parts.append(dict(query))
                continue
            listed = region.get("in")
            if set(region) != {"in"} or not isinstance(listed, list) or not listed:
                raise QueryError(
                    f"queries[{i}]: a set of regions is {{'in': [region, ...]}}, got {region!r}"
                )
            indices = [self.hierarchy.region_index(str(name)) for name in listed]
            for a, b in itertools.combinations(indices, 2):
                if self._contains(a, b) or self._contains(b, a):
                    raise QueryError(
                        f"queries[{i}]: regions {self.hierarchy.names[a]!r} and "
                        f"{self.hierarchy.names[b]!r} overlap (one contains the other, or they "
                        "are the same); name each region once"
                    )
            parts.extend({**query, "region": self.hierarchy.names[r]} for r in indices)
        return SetParts(parts, np.array(starts, dtype=np.intp))

    def _contains(self, ancestor: int, region: int) -> bool:
        """Whether ``region`` is ``ancestor`` or lies inside it."""
        parent = self.hierarchy.parent
        while region >= 0:
            if region == ancestor:
                return True
            region = int(parent[region])
        return False

    def answer_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        split = self.set_parts(queries)
        if split is not None:
            return split.sum(self.answer_many(split.parts))
        r, lo, hi = self._boxes(queries).T
        return (self._cum[r, hi] - self._cum[r, lo - 1]).astype(np.float64)

    def replicate_answers(
        self,
        replicates: Sequence[Release],
        queries: Sequence[Mapping[str, Any]],
        keep_bytes: int = 0,
    ) -> NDArray[np.float64]:
        """The (runs, q) answers of census ``replicates`` in one pass: their cumulative counts
        stacked, each query's two columns read for every replicate at once."""
        split = self.set_parts(queries)
        if split is not None:
            return split.sum(self.replicate_answers(replicates, split.parts, keep_bytes))
        if not all(isinstance(rep, CensusRelease) for rep in replicates):
            return super().replicate_answers(replicates, queries, keep_bytes)
        r, lo, hi = self._boxes(queries).T
        cum = np.stack([rep._cum for rep in replicates])  # type: ignore[attr-defined]
        return (cum[:, r, hi] - cum[:, r, lo - 1]).astype(np.float64)

    #: Why answers need a bootstrap (:mod:`dpcube.release.uncertainty`).
    bootstrap_reason = "consistent, non-negative integer estimate (not linear in the noise)"

    @property
    def bootstrap_unavailable(self) -> str | None:
        """None: every census release has a bootstrap (:meth:`bootstrap_world`)."""
        return None

    def variance_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        """The noise-only variance of each answer: the variance the noise alone gave the region's
        measured figures for sizes lo..hi, before any post-processing. NOT the answer's error
        (the consistency, non-negativity and integrality steps change it: see
        :meth:`bootstrap_world`).

        The noise is the discrete Laplace of each level (``metadata.noise["cell_variance"]``, one
        variance per level) on the measurement ``metadata.noise["measurement"]``:

        - ``"group_sizes"`` (M_DP, the QPs, TopDown): n^r_s per size, so sizes lo..hi sum
          ``hi - lo + 1`` independent noises;
        - ``"cumulative"`` (M_CDP with private post-processed noise, its approximation, the
          cumulative QP): Gamma(n^r)_s = sum_{s' <= s} n^r_s', so sizes lo..hi are
          Gamma_hi - Gamma_(lo-1): one noise for lo = 1, else two;
        - ``"chain"`` (M_CDP's other noise modes): the noise is on chain values that are no
          region's counts, so NaN (not known).
        """
        noise = self.metadata.noise
        per_level = noise.get("cell_variance")
        measurement = noise.get("measurement")
        if not isinstance(per_level, list) or measurement not in ("group_sizes", "cumulative"):
            return np.full(len(queries), np.nan)
        split = self.set_parts(queries)
        if split is not None:  # regions that do not overlap: independent noises
            return split.sum(self.variance_many(split.parts))
        r, lo, hi = self._boxes(queries).T
        cells = hi - lo + 1 if measurement == "group_sizes" else np.where(lo == 1, 1, 2)
        level_variance = np.asarray(per_level, dtype=np.float64)[
            np.asarray(self.hierarchy.level, dtype=np.int64)[r] - 1
        ]
        return np.asarray(cells * level_variance, dtype=np.float64)

    #: What a bound interval rests on (:func:`~dpcube.release.uncertainty.uncertainty_kind`).
    bound_reason = (
        "the noisy measurements before post-processing, with their exact noise; the answer is "
        "the consistent estimate"
    )

    @property
    def bound_unavailable(self) -> str | None:
        """Why :meth:`bound_interval_many` cannot be used (None where it can)."""
        measurement = self.metadata.noise.get("measurement")
        if measurement not in ("group_sizes", "cumulative"):
            return (
                f"the noise is on {measurement or 'unstated'} values that are no region's counts "
                "(M_CDP's chain noise), and no interval valid on any data is known for them"
            )
        if self.measurements is None or not isinstance(
            self.metadata.noise.get("cell_variance"), list
        ):
            return "the release does not carry its noisy measurements (saved before they were kept)"
        if not str(self.metadata.noise.get("distribution", "")).startswith("discrete_laplace"):
            return "its noise is not discrete Laplace"
        return None

    def bound_interval_many(
        self, queries: Sequence[Mapping[str, Any]], level: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], list[str]]:
        """``(lower, upper, reasons)``: an interval at ``level`` for the true number of groups of
        sizes lo..hi in a region, valid on any data, from the noisy measurements before
        post-processing.

        The measurements are the true figures plus independent discrete Laplace noise of the
        region's level (``metadata.noise["cell_variance"]``): for ``"group_sizes"``, ``n~_s^r =
        n_s^r + e_s^r``, so ``sum_{s=lo..hi} n~_s^r`` is the truth plus the sum of ``hi - lo + 1``
        noises; for ``"cumulative"``, ``Gamma~_s^r = sum_{s' <= s} n_{s'}^r + e_s^r``, so
        ``Gamma~_hi - Gamma~_(lo-1)`` is the truth plus one noise (lo = 1) or the difference of
        two (the same distribution as their sum: the noise is symmetric). With ``t`` the point
        of :func:`~dpcube.release.bounds.discrete_laplace_sum_point` for ``(1 - level) / 2``,
        ``estimate +- t`` covers the truth with probability at least ``level`` (each side misses
        at most ``(1 - level) / 2``). The truth is a count of at most G groups (G public), so the
        interval is clipped to [0, G]; it is widened to hold the released (consistent) answer,
        which only widens it. The released answer is the consistent, non-negative integer
        estimate (the post-processing's projection of these measurements); the interval's centre
        is the unbiased raw estimate, so the two may differ by the projection's correction.
        """
        from dpcube.release.bounds import discrete_laplace_sum_point

        why = self.bound_unavailable
        if why is not None:
            raise QueryError(f"no bound interval for this release: {why}")
        assert self.measurements is not None
        noise = self.metadata.noise
        per_level = np.asarray(noise["cell_variance"], dtype=np.float64)
        cumulative = noise["measurement"] == "cumulative"
        m = self.measurements.astype(np.float64)
        split = self.set_parts(queries)
        owners = None
        if split is not None:  # a set of regions: the sum of their (independent) measurements
            owners, queries = split.owners(), split.parts
        q = len(queries)
        r, lo, hi = self._boxes(queries).T
        multiplicity = np.zeros((q, len(per_level)))
        level_of = np.asarray(self.hierarchy.level, dtype=np.int64)[r] - 1
        if cumulative:
            before = np.where(lo > 1, m[r, np.maximum(lo - 2, 0)], 0.0)
            estimate = m[r, hi - 1] - before
            multiplicity[np.arange(q), level_of] = np.where(lo == 1, 1, 2)
        else:  # whole numbers: their running sums are exact in float64
            running = np.concatenate([np.zeros((m.shape[0], 1)), np.cumsum(m, axis=1)], axis=1)
            estimate = running[r, hi] - running[r, lo - 1]
            multiplicity[np.arange(q), level_of] = hi - lo + 1
        answers = self.answer_many(queries)
        if split is not None and owners is not None:
            # one sum of independent discrete Laplace noises per query: the multiplicities add
            q = len(split.starts)
            estimate, answers = split.sum(estimate), split.sum(answers)
            summed = np.zeros((q, len(per_level)))
            np.add.at(summed, owners, multiplicity)
            multiplicity = summed
        t = discrete_laplace_sum_point(multiplicity, per_level, (1.0 - level) / 2.0)
        lower = np.clip(np.minimum(estimate - t, answers), 0.0, self.groups)
        upper = np.clip(np.maximum(estimate + t, answers), 0.0, self.groups)
        reason = (
            f"valid on any data: the noisy {'cumulative' if cumulative else 'group-size'} "
            "measurements before post-processing (exact discrete Laplace noise), +- their "
            f"{100 * level:g}% point; the answer is the consistent estimate"
        )
        return lower, upper, [reason] * q

    def bootstrap_world(self) -> BootstrapWorld:
        """The parametric bootstrap's world: the released leaf-region rows (non-negative integers),
        aggregated up the hierarchy, are the truth; each replicate re-runs the whole mechanism
        (noise, then its consistency/integrality post-processing) on that table."""
        from dpcube.mechanisms.census.table import GroupSizeTable
        from dpcube.release.integer import is_integer
        from dpcube.release.uncertainty import BootstrapWorld, rebuild_mechanism, rerun

        h = self.hierarchy
        leaves = np.clip(self.values[h.leaves], 0, None)
        table = GroupSizeTable(h, h.aggregate(leaves), top_coded=self.top_coded)
        table.declare_public_groups(declared_by="release", how="the G this release holds")
        mechanism = rebuild_mechanism(self.metadata)
        truth = CensusRelease(
            self.metadata, h, table.counts, table.groups, top_coded=self.top_coded
        )
        if is_integer(self.metadata):
            return BootstrapWorld(truth, lambda rng: rerun(mechanism, table, rng).to_integer())
        return BootstrapWorld(truth, lambda rng: rerun(mechanism, table, rng))

    @property
    def integer_unavailable(self) -> str | None:
        """None: every census release can be made whole (:meth:`to_integer`)."""
        return None

    def is_whole_and_consistent(self) -> bool:
        """Whether the released counts are non-negative whole numbers, every region's row the
        sum of its children's rows, and the root's groups summing to G."""
        h = self.hierarchy
        leaves = self.values[h.leaves]
        return bool(
            np.all(self.values >= 0)
            and np.array_equal(h.aggregate(leaves), self.values)
            and int(self.values[0].sum()) == self.groups
        )

    def to_integer(self) -> CensusRelease:
        """The group-size counts as non-negative whole numbers, each region the sum of its
        children and the root summing to the public G (:func:`dpcube.release.integer.\
topdown_hierarchy`: TopDown from the root). Every census method already releases such a
        table (its own consistency and integrality post-processing): the counts are then kept as
        they are, and the manifest records that they were checked. The noisy measurements stay
        with the release, so its ``bound`` intervals (from the measurements, widened to hold the
        answer) stay valid; the bootstrap makes each replicate whole the same way.
        Post-processing: nothing is charged."""
        from dpcube.release.integer import integer_metadata, is_integer, topdown_hierarchy

        if is_integer(self.metadata):
            return self
        h = self.hierarchy
        if self.is_whole_and_consistent():
            values = self.values.copy()
            steps = [
                "checked: the counts are already non-negative whole numbers, every region the "
                "sum of its children, the root summing to G (the mechanism's own "
                "post-processing); kept unchanged"
            ]
        else:
            values = topdown_hierarchy(self.values, h.parent, h.level, root_total=self.groups)
            steps = [
                "root: projected onto the non-negative rows summing to G and rounded under G",
                "each level: per size, the children projected onto the non-negative figures "
                "summing to their parent's whole figure, rounded under it (largest remainders)",
            ]
        metadata = integer_metadata(
            self.metadata,
            steps=steps,
            intervals="bound intervals from the noisy measurements, widened to hold the answer",
        )
        return CensusRelease(
            metadata,
            h,
            values,
            self.groups,
            private=self.private,
            top_coded=self.top_coded,
            measurements=self.measurements,
        )

    def table_cells(
        self, attributes: Sequence[str] | None = None, where: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Rows region x size (``attributes`` a subset of ``("region", "size")``), inside
        ``where``: labels ``region``, ``region_level`` (1 = the root) and ``size`` (records per
        unit), one query per row. (``level`` is the interval's level in every labelled table.)"""
        names = ["region", "size"] if attributes is None else list(attributes)
        unknown = [n for n in names if n not in ("region", "size")]
        if unknown or len(set(names)) != len(names):
            raise QueryError(f"a census release has rows by 'region' and 'size', got {names}")
        where = dict(where or {})
        h = self.hierarchy
        split = self.set_parts([where])  # a set of regions: its regions' rows
        r, lo, hi = self._box(split.parts[0] if split is not None else where)
        regions = list(range(h.size)) if "region" not in where else [r]
        if split is not None:
            regions = [h.region_index(part["region"]) for part in split.parts]
        sizes = list(range(lo, hi + 1))
        rows: list[dict[str, Any]] = [{}]
        if "region" in names:
            rows = [{**row, "region": h.names[i]} for row in rows for i in regions]
        if "size" in names:
            rows = [{**row, "size": s} for row in rows for s in sizes]
        labels: dict[str, Any] = {}
        if "region" in names:
            labels["region"] = [row["region"] for row in rows]
            level = {name: int(lv) for name, lv in zip(h.names, h.level, strict=True)}
            labels["region_level"] = [level[row["region"]] for row in rows]
        if "size" in names:
            labels["size"] = [row["size"] for row in rows]
        return labels, [{**where, **row} for row in rows]

    # -- the labelled table, the explorer and the report -----------------------------------
    def table_size(self, cuboid: Sequence[str] | None, where: Mapping[str, Any]) -> int:
        """Every region times every size, at most."""
        return int(self.hierarchy.size) * int(self.max_size)

    def explorer_view(self) -> dict[str, Any]:
        """The region ``hierarchy`` (each region's parent and level) and the sizes: the page
        asks for a region and a size rather than for attributes."""
        h = self.hierarchy
        names = list(h.names)
        return {
            "hierarchy": {
                "regions": [
                    {"name": n, "parent": names[p] if p >= 0 else None, "level": int(lv)}
                    for n, p, lv in zip(names, h.parent.tolist(), h.level.tolist(), strict=True)
                ],
                "max_size": int(self.max_size),
                "top_coded": bool(self.top_coded),
                "unit": self.unit,
                "size_label": self.size_label,
            }
        }

    #: Most level-2 regions listed in the report (its table of the nation and the list of the
    #: regions to drill down into); ``dpcube export`` has them all.
    REPORT_REGIONS: ClassVar[int] = 60

    def report_parts(self, max_rows: int) -> tuple[ReportPart, ...]:
        """Group sizes by region: a bar chart of the nation's groups by size; a table of the
        nation and its level-2 regions (the first :attr:`REPORT_REGIONS`), sizes as columns; and
        one region drilled down (itself and its first ``max_rows`` sub-regions), chosen from a
        list."""
        h, k = self.hierarchy, self.max_size
        size_names = [str(s) for s in range(1, k)] + [f"{k}+" if self.top_coded else str(k)]
        sizes: list[Any] = [*range(1, k + 1), [1, k]]
        headers = (*[f"size {s}" for s in size_names], "all sizes")
        parent, level = np.asarray(h.parent), np.asarray(h.level)
        states = np.flatnonzero(level == 2)
        shown = [int(s) for s in states[: self.REPORT_REGIONS]]

        def by_size(ident: str, heading: str, regions: list[int], note: str | None) -> ReportTable:
            return ReportTable(
                ident=ident,
                heading=heading,
                labels={"region": [h.names[r] for r in regions]},
                queries=[{"region": h.names[r], "size": size} for r in regions for size in sizes],
                note=note,
                value_headers=headers,
            )

        nation = h.names[0]
        listed = (
            f"The first {len(shown)} of {len(states):,} level-2 regions are listed (dpcube "
            "export has them all)."
        )
        tables: list[ReportTable | ReportChoice] = [
            by_size(
                "table-census-nation",
                f"{nation} and its {len(states):,} regions of level 2",
                [0, *shown],
                listed if len(states) > len(shown) else None,
            )
        ]
        choices = []
        for i, s in enumerate(r for r in shown if (parent == r).any()):
            children = np.flatnonzero(parent == s)
            kids = [int(c) for c in children[:max_rows]]
            more = f"The first {len(kids)} of {len(children):,} sub-regions."
            table = by_size(
                f"table-census-state-{i}",
                "",
                [s, *kids],
                more if len(children) > len(kids) else None,
            )
            choices.append((h.names[s], table))
        if choices:
            tables.append(
                ReportChoice(
                    ident="census-state",
                    heading="One region, drilled down",
                    label="Region:",
                    choices=tuple(choices),
                )
            )
        levels = ", ".join(f"level {i + 1}: {n:,}" for i, n in enumerate(h.level_sizes))
        bars = ReportBars(
            ident="fig-census-nation",
            title=f"Groups by size: {nation}",
            labels=size_names,
            queries=[{"region": nation, "size": size} for size in range(1, k + 1)],
            xlabel=f"group size ({self.size_label})",
            ylabel="released groups",
        )
        section = ReportSection(
            ident="census",
            title="Group sizes by region",
            note=f"Released number of groups of each size per region ({levels} regions). "
            "Cells: estimate [interval].",
            charts=(bars,),
            tables=tuple(tables),
        )
        return (section,)

    def tables(self) -> dict[str, pa.Table]:
        h, k = self.hierarchy, self.max_size
        counts = pa.table(
            {
                "region": pa.array(np.repeat(np.arange(h.size, dtype=np.int32), k)),
                "size": pa.array(np.tile(np.arange(1, k + 1, dtype=np.int32), h.size)),
                "count": pa.array(self.values.ravel()),
            }
        )
        regions = pa.table(
            {
                "region": pa.array(list(h.names)),
                "parent": pa.array(h.parent),
                "level": pa.array(h.level),
            }
        )
        out = {"counts": counts, "regions": regions}
        if self.measurements is not None:
            out["measurements"] = pa.table(
                {
                    "region": counts.column("region"),
                    "size": counts.column("size"),
                    "noisy": pa.array(self.measurements.ravel()),
                }
            )
        return out

    def state(self) -> dict[str, Any]:
        return {
            "groups": self.groups,
            "max_size": self.max_size,
            "private": self.private,
            "top_coded": self.top_coded,
            "unit": self.unit,
        }

    @classmethod
    def restore(
        cls,
        schema: Any,
        metadata: ReleaseMetadata,
        tables: dict[str, pa.Table],
        state: dict[str, Any],
    ) -> CensusRelease:
        reg = tables["regions"]
        h = RegionHierarchy(
            tuple(str(x) for x in reg.column("region").to_pylist()),
            column_numpy(reg, "parent").astype(np.int64),
            column_numpy(reg, "level").astype(np.int64),
        )
        c = tables["counts"]
        values = np.zeros((h.size, int(state["max_size"])), dtype=np.int64)
        regions, sizes = column_numpy(c, "region"), column_numpy(c, "size")
        if len(regions) and (
            regions.min() < 0
            or regions.max() >= h.size
            or sizes.min() < 1
            or sizes.max() > values.shape[1]
        ):
            raise ReleaseError(
                f"the 'counts' table names a region outside 0..{h.size - 1} or a size outside "
                f"1..{values.shape[1]}; the state or the table was edited: do not use this release"
            )
        values[regions, sizes - 1] = column_numpy(c, "count")
        measurements = None
        if "measurements" in tables:
            t = tables["measurements"]
            m_regions, m_sizes = column_numpy(t, "region"), column_numpy(t, "size")
            if len(m_regions) and (
                m_regions.min() < 0
                or m_regions.max() >= h.size
                or m_sizes.min() < 1
                or m_sizes.max() > values.shape[1]
            ):
                raise ReleaseError(
                    f"the 'measurements' table names a region outside 0..{h.size - 1} or a size "
                    f"outside 1..{values.shape[1]}; the table was edited: do not use this release"
                )
            measurements = np.zeros_like(values)
            measurements[m_regions, m_sizes - 1] = column_numpy(t, "noisy")
        return cls(
            metadata,
            h,
            values,
            int(state["groups"]),
            private=bool(state.get("private", True)),
            top_coded=bool(state.get("top_coded", False)),
            measurements=measurements,
            unit=state.get("unit") if isinstance(state.get("unit"), str) else None,
        )

    def report_lines(self) -> list[str]:
        lines = super().report_lines()
        lines.append(
            f"- regions: {self.hierarchy.size} in {self.hierarchy.levels} levels {list(self.hierarchy.level_sizes)}; sizes 1..{self.max_size}{' (last bin: k or more)' if self.top_coded else ''}; G = {self.groups}"
        )
        if not self.private:
            lines.append(
                "- **NOT EPSILON-DP**: noise_mode='as_published' calibrates the chain noise "
                "to sensitivity 1, but the level chain has sensitivity |R_l| (Fioretto et al. "
                "2021, Sec. 9.2, assume 1); for reproducing the paper only"
            )
        return lines
