"""The release of a DP data cube: every published cuboid, with exact per-query variances.

A query (a dict of constraints, :meth:`dpcube.Schema.box`) is answered from a published cuboid
whose attributes include every attribute the query constrains; among several, the one whose
answer has the least variance (for a consistent release they all agree). Variance models:

- ``"sources"`` (no consistency): a cell of cuboid C is a sum of ``mag`` independent noisy cells
  of its source, so a box of n cells has variance ``n * cell_variance[C]`` (eq. 1);
- ``"l2"`` (L2 consistency): the exact GLS variance of
  :func:`dpcube.mechanisms.datacube.consistency.l2_variance`;
- ``"unknown"`` (L1/L-infinity consistency, or rounding / clamping): NaN; the answers' error is
  then a parametric bootstrap (:meth:`CuboidRelease.bootstrap_world`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from dpcube.errors import QueryError, ReleaseError
from dpcube.mechanisms.datacube.consistency import l2_variance
from dpcube.mechanisms.datacube.geometry import CubeGeometry
from dpcube.mechanisms.datacube.lattice import bits, is_subset, rollup, shape
from dpcube.release.base import Release, ReleaseMetadata, SetParts, column_numpy
from dpcube.release.cells import box_sums, prefix_sums
from dpcube.release.views import ReportPart, ReportSection, ReportTable
from dpcube.schema import Schema

if TYPE_CHECKING:
    from dpcube.release.uncertainty import BootstrapWorld

MODES = ("sources", "l2", "unknown")


@dataclass(frozen=True)
class DerivedCuboid:
    """A cuboid computed from a released one by roll-up (Ding, Winslett, Han, Li, SIGMOD 2011, Sec.
    7.4, larger cubes).

    ``values`` has the axes of ``attributes`` in the order asked; every cell has the noise
    variance ``cell_variance`` (NaN where the release's variance mode does not know it);
    ``computed_from`` names the published cuboid it was summed from (itself if published).
    """

    attributes: tuple[str, ...]
    values: NDArray[np.float64]
    cell_variance: float
    computed_from: tuple[str, ...]


class CuboidRelease(Release):
    """Published cuboids of a DP data cube (kind ``"cuboids"``)."""

    kind = "cuboids"

    def __init__(
        self,
        schema: Schema,
        metadata: ReleaseMetadata,
        cuboids: Mapping[int, NDArray[np.float64]],
        sources: Sequence[int],
        source_variances: Sequence[float],
        cell_variances: Mapping[int, float],
        mode: str,
        max_variance: float,
    ) -> None:
        super().__init__(schema, metadata)
        if mode not in MODES:
            raise ReleaseError(
                f"unknown variance mode {mode!r}; expected one of {', '.join(MODES)}"
            )
        self.geometry = CubeGeometry(schema)
        lat = self.geometry.lattice
        self._cuboids = {
            int(m): np.asarray(a, dtype=np.float64).reshape(shape(lat, int(m)))
            for m, a in cuboids.items()
        }
        self._sources = tuple(int(s) for s in sources)
        self.source_variances = tuple(float(v) for v in source_variances)
        self.cell_variances = {int(m): float(v) for m, v in cell_variances.items()}
        self.mode = mode
        self.max_variance = float(max_variance)
        self._prefix: dict[int, NDArray[np.float64]] = {}

    # -- what was published ------------------------------------------------------------------
    @property
    def published(self) -> list[tuple[str, ...]]:
        """The published cuboids, as attribute-name tuples (schema order)."""
        return [self.geometry.attributes(m) for m in sorted(self._cuboids)]

    @property
    def sources(self) -> list[tuple[str, ...]]:
        """The measured cuboids (L_pre), as attribute-name tuples."""
        return [self.geometry.attributes(m) for m in self._sources]

    def _published_mask(self, attributes: Sequence[str] | str) -> int:
        mask = self.geometry.mask(attributes)
        if mask not in self._cuboids:
            raise QueryError(
                f"cuboid {self.geometry.attributes(mask)} was not published; {self._suggest(mask)}"
            )
        return mask

    def _suggest(self, mask: int) -> str:
        supers = [m for m in self._cuboids if is_subset(mask, m)]
        if supers:
            names = "; ".join(
                ",".join(self.geometry.attributes(m)) or "()" for m in sorted(supers)[:5]
            )
            return f"the published cuboids that contain its attributes are: {names}"
        wanted = ",".join(self.geometry.attributes(mask))
        return f"no published cuboid contains them; release again with publish including {wanted!r}"

    def cuboid(self, attributes: Sequence[str] | str) -> NDArray[np.float64]:
        """The released cuboid over ``attributes``, axes in the order given (a spatial attribute
        contributes its two axes)."""
        names = self._names(attributes)
        mask = self._published_mask(names)
        return self._in_order(self._cuboids[mask], mask, names)

    def derive_cuboid(self, attributes: Sequence[str] | str) -> DerivedCuboid:
        """A cuboid that need not be published, summed from the published cuboid over a superset
        of ``attributes`` whose cells then have the least noise variance (Sec. 7.4: larger cubes
        answered online from L_pre; post-processing, no budget). A cell sums ``n`` cells of the
        source, with ``n`` the product of the dropped attributes' sizes, so its variance is the
        variance of a query box over those cells (eq. 1 without consistency, the GLS variance
        with L2 consistency). A cuboid no published one contains cannot be derived: measuring it
        is a new release, charged to the ledger (``DataCube(publish=[...])``).
        """
        names = self._names(attributes)
        mask = self.geometry.mask(names)
        lat = self.geometry.lattice
        candidates = [m for m in self._cuboids if is_subset(mask, m)]
        if not candidates:
            raise QueryError(
                f"cuboid {self.geometry.attributes(mask)} cannot be derived: {self._suggest(mask)}"
            )
        dropped = {i: 1 if mask >> i & 1 else lat.cards[i] for i in range(lat.d)}

        def cost(m: int) -> tuple[float, int, int]:
            variance = self._box_variance(m, dropped)
            return (variance if variance == variance else float("inf"), lat.cells(m), m)

        source = min(candidates, key=cost)
        values = rollup(self._cuboids[source], source, mask)
        return DerivedCuboid(
            attributes=tuple(names),
            values=self._in_order(np.asarray(values, dtype=np.float64), mask, names),
            cell_variance=self._box_variance(source, dropped),
            computed_from=self.geometry.attributes(source),
        )

    @staticmethod
    def _names(attributes: Sequence[str] | str) -> list[str]:
        names = [attributes] if isinstance(attributes, str) else list(attributes)
        if len(set(names)) != len(names):
            raise QueryError(f"cuboid attributes {names} repeat a name")
        return names

    def _in_order(
        self, array: NDArray[np.float64], mask: int, names: Sequence[str]
    ) -> NDArray[np.float64]:
        """A cuboid's array (lattice layout) with the schema axes of ``names`` in that order."""
        array = array.reshape(self.geometry.shape(mask))
        order = sorted(names, key=self.geometry.names.index)
        axes: list[int] = []
        for name in names:
            start = sum(len(self.geometry.schema[n].shape) for n in order[: order.index(name)])
            axes.extend(range(start, start + len(self.geometry.schema[name].shape)))
        return np.transpose(array, axes).copy()

    def cell_variance(self, attributes: Sequence[str] | str) -> float:
        """Exact noise variance of one cell of a published cuboid (NaN when not known)."""
        mask = self._published_mask(attributes)
        return self._box_variance(mask, {})

    # -- answering ---------------------------------------------------------------------------
    def _resolve(self, box: Sequence[tuple[int, int]]) -> tuple[int, dict[int, int]]:
        """The constrained dimensions' cell counts, and the published cuboid that answers best."""
        return self._resolve_selection(tuple(((lo, hi),) for lo, hi in box))

    def _resolve_selection(
        self, selection: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[int, dict[int, int]]:
        """:meth:`_resolve` for a selection: disjoint intervals per schema axis (a set of
        categories has several on its axis). Which cuboid answers, and the variance, depend on
        each dimension's number of selected cells only, not on where they lie."""
        geo = self.geometry
        selected: dict[int, int] = {}
        constrained = 0
        for i, _name in enumerate(geo.names):
            axes = geo.schema_axes(1 << i)
            count = 1
            for axis in axes:
                count *= sum(hi - lo + 1 for lo, hi in selection[axis])
            if count < geo.lattice.cards[i]:
                constrained |= 1 << i
            selected[i] = count
        candidates = [m for m in self._cuboids if is_subset(constrained, m)]
        if not candidates:
            raise QueryError(
                f"the query constrains {', '.join(geo.attributes(constrained))}: {self._suggest(constrained)}"
            )
        lat = geo.lattice
        if self.mode == "sources":
            best = min(candidates, key=lambda m: (self._box_variance(m, selected), lat.cells(m), m))
        else:
            best = min(candidates, key=lambda m: (lat.cells(m), m))
        return best, selected

    def _box_variance(self, mask: int, selected: Mapping[int, int]) -> float:
        lat = self.geometry.lattice
        n = {i: selected.get(i, 1) for i in bits(mask)}
        if self.mode == "sources":
            return float(np.prod([float(v) for v in n.values()])) * self.cell_variances[mask]
        if self.mode == "l2":
            weights = {
                s: 1.0 / v for s, v in zip(self._sources, self.source_variances, strict=True)
            }
            return l2_variance(lat, weights, mask, n)
        return float("nan")

    def _prefix_of(self, mask: int) -> NDArray[np.float64]:
        if mask not in self._prefix:
            self._prefix[mask] = prefix_sums(self._cuboids[mask].reshape(self.geometry.shape(mask)))
        return self._prefix[mask]

    def _groups(
        self, boxes: NDArray[np.int64]
    ) -> list[tuple[NDArray[np.intp], int, dict[int, int]]]:
        """Queries grouped by the box size on every axis, with the cuboid that answers them and
        the constrained counts (:meth:`_resolve` depends on the sizes only, not the positions):
        a labelled table's rows are one group, resolved once."""
        sizes = boxes[:, :, 1] - boxes[:, :, 0]
        if len(sizes) == 0:
            return []
        keys, inverse = np.unique(sizes, axis=0, return_inverse=True)
        out = []
        for g in range(len(keys)):
            members = np.flatnonzero(inverse.ravel() == g)
            mask, selected = self._resolve([tuple(b) for b in boxes[members[0]].tolist()])
            out.append((members, mask, selected))
        return out

    def _answer_sets(self, split: SetParts) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Answers and variances of set queries, each from the one cuboid that answers its
        whole selection: the sum of its disjoint boxes there, and the exact variance of that sum
        (:meth:`_box_variance` of the selection's cell counts: the cells of a cuboid are
        exchangeable under its noise and consistency, so the variance depends on the counts)."""
        assert split.selections is not None
        answers = np.empty(len(split.selections))
        variances = np.empty(len(split.selections))
        ends = np.append(split.starts, len(split.parts))
        for k, selection in enumerate(split.selections):
            mask, selected = self._resolve_selection(selection)
            boxes = self.boxes(split.parts[ends[k] : ends[k + 1]])
            axes = self.geometry.schema_axes(mask)
            if axes:
                answers[k] = float(np.sum(box_sums(self._prefix_of(mask), boxes[:, axes, :])))
            else:
                answers[k] = float(self._cuboids[mask])
            variances[k] = self._box_variance(mask, selected)
        return answers, variances

    def answer_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        split = self.set_parts(queries)
        if split is not None:
            return self._answer_sets(split)[0]
        boxes = self.boxes(queries)
        out = np.empty(len(queries), dtype=np.float64)
        for members, mask, _ in self._groups(boxes):
            axes = self.geometry.schema_axes(mask)
            if not axes:
                out[members] = float(self._cuboids[mask])
                continue
            out[members] = box_sums(self._prefix_of(mask), boxes[members][:, axes, :])
        return out

    @property
    def linear_unbiased(self) -> bool:
        """Whether answers are linear in the noise and unbiased (no consistency, or L2
        consistency; no clamping or rounding): their exact variance is then their error
        (:mod:`dpcube.release.uncertainty`). L1/L-infinity consistency, clamping and rounding
        get a parametric bootstrap instead (:meth:`bootstrap_world`)."""
        return self.mode in ("sources", "l2")

    #: Why a non-linear data cube's answers need a bootstrap (:mod:`dpcube.release.uncertainty`).
    bootstrap_reason = "clamping, rounding or L1/L-infinity consistency make it non-linear"

    def _world_cuboid(self) -> int | None:
        """The published cuboid every measured cuboid lies inside (the one with most cells), or
        None: the bootstrap world is built from it."""
        covering = [m for m in self._cuboids if all(is_subset(s, m) for s in self._sources)]
        return max(covering, key=lambda m: self._cuboids[m].size) if covering else None

    @property
    def bootstrap_unavailable(self) -> str | None:
        """Why this release has no bootstrap (None when it has one)."""
        from dpcube.release.integer import is_integer

        if is_integer(self.metadata):
            return (
                "its cuboids were made whole by a least-squares fit over the finest table, "
                "which the bootstrap does not re-run per replicate"
            )
        if self.metadata.params.get("measure", "count") != "count":
            return "a sum measure's bootstrap would need the records' values"
        if self._world_cuboid() is None:
            return (
                "no published cuboid contains every measured cuboid, so the release holds no "
                "estimate to build a bootstrap world from"
            )
        return None

    # -- whole numbers ----------------------------------------------------------------------
    def _finest(self) -> int:
        """The cuboid over every published attribute (the union of the published cuboids): the
        finest table every published cuboid is summed from."""
        finest = 0
        for m in self._cuboids:
            finest |= m
        return finest

    @property
    def integer_unavailable(self) -> str | None:
        """Why :meth:`to_integer` cannot make this cube whole (None where it can)."""
        from dpcube.release.integer import MAX_FINEST_CELLS

        if self.metadata.params.get("measure", "count") != "count":
            return (
                "a sum measure's cells are clipped sums of a column, not counts of records; "
                "whole numbers apply to counts (measure='count')"
            )
        cells = self.geometry.lattice.cells(self._finest())
        if cells > MAX_FINEST_CELLS:
            return (
                f"the finest table over the published attributes has {cells:,} cells, more than "
                f"the {MAX_FINEST_CELLS:,} the integer fit holds; publish fewer or smaller "
                "cuboids"
            )
        return None

    def to_integer(self) -> CuboidRelease:
        """Every published cuboid as non-negative whole counts, each the roll-up of one whole
        finest table F over the union of the published attributes, so every cuboid sums exactly
        to each of its parents and all share one grand total.

        1. Fit (TopDown's L2 step, Abowd et al., HDSR 2022): F by non-negative least squares to
           every published cuboid at once, each weighted by the inverse of its cell noise
           variance where known (equal weights otherwise),
           ``min_{F >= 0} sum_C w_C ||rollup_C(F) - y_C||^2``
           (:func:`dpcube.release.integer.nonnegative_least_squares`). The coarse cuboids hold
           the marginals near the released ones while the negative cells are raised to 0: mass
           is not moved from populated cells into empty ones, as a projection under the total
           alone would. The fit is then raked (iterative proportional fitting, Deming and
           Stephan 1940: :func:`dpcube.release.integer.rake`) to the published one-way cuboids,
           whose cells the clipping of many sparse cells pushes harder than their weight holds
           (on Adult's 5-way cube the one-way error went from 40.6 without to 23.6 with it,
           against 23.4 unrounded).
        2. Rounding (TopDown's L1 step): down the chain of cuboids () < (a1) < (a1, a2) < ... <
           F in schema order, a hierarchy whose every cell splits into the next attribute's
           categories (:func:`dpcube.release.integer.topdown_chain`): the released grand total
           (the least-variance cuboid's) made whole, then each parent's children (the fit's
           roll-ups, already non-negative) projected onto the non-negative figures summing to
           the parent's whole figure and rounded under it by the largest remainders.

        Each chain cell moves from the fit by less than 1 plus its share of the gap between its
        parent's whole figure and the fit's sum of the parent's children (under 1 below the
        total; at the top, the gap between the released total and the fit's); a cuboid off the
        chain is a roll-up of the whole F, within the sum of its cells' moves (measured:
        docs/integer.md). The fit depends
        on the noise, so the exact variances no longer describe the answers: the new release's
        variance mode is ``"unknown"`` and its answers get no interval (the reason says why),
        while the release before this step keeps its exact ones. Post-processing: nothing is
        charged."""
        from dpcube.mechanisms.datacube.lattice import expand
        from dpcube.release.integer import (
            MAX_FITTED_CELLS,
            integer_metadata,
            is_integer,
            nonnegative_least_squares,
            rake,
            topdown_chain,
        )

        if is_integer(self.metadata):
            return self
        why = self.integer_unavailable
        if why is not None:
            raise ReleaseError(f"no whole-number release: {why}")
        lat = self.geometry.lattice
        finest = self._finest()
        finest_shape = shape(lat, finest)
        masks = sorted(self._cuboids)
        n = int(np.prod(finest_shape, dtype=np.int64))
        if finest not in self._cuboids and n > MAX_FITTED_CELLS:
            raise ReleaseError(
                f"no whole-number release: the finest table over the published attributes is "
                f"not published and has {n:,} cells, more than the {MAX_FITTED_CELLS:,} the "
                "least-squares fit holds; publish it (publish=[...]) or fewer attributes"
            )
        root = {}
        for m in masks:
            variance = self._box_variance(m, {})
            weight = 1.0 / variance if variance == variance and variance > 0 else 1.0
            root[m] = float(np.sqrt(weight))
        # each cuboid summed from its smallest superset among the finest and the published
        # ones (the roll-ups in one pass, finest first; their transpose in reverse)
        order = sorted(set(masks) - {finest}, key=lambda m: (-bin(m).count("1"), m))
        parent: dict[int, int] = {}
        done = [finest]
        for m in order:
            parent[m] = min((p for p in done if is_subset(m, p)), key=lat.cells)
            done.append(m)
        sizes = [lat.cells(m) for m in masks]
        offsets = dict(
            zip(masks, np.concatenate([[0], np.cumsum(sizes)])[:-1].tolist(), strict=True)
        )

        def matvec(x: NDArray[np.float64]) -> NDArray[np.float64]:
            values = {finest: np.asarray(x, dtype=np.float64).reshape(finest_shape)}
            for m in order:
                values[m] = np.asarray(rollup(values[parent[m]], parent[m], m))
            return np.concatenate([root[m] * np.ravel(values[m]) for m in masks])

        def rmatvec(r: NDArray[np.float64]) -> NDArray[np.float64]:
            flat = np.asarray(r, dtype=np.float64).ravel()
            acc = {m: np.zeros(shape(lat, m)) for m in [finest, *order]}
            for m in masks:
                part = flat[offsets[m] : offsets[m] + lat.cells(m)]
                acc[m] += root[m] * part.reshape(shape(lat, m))
            for m in reversed(order):
                acc[parent[m]] += expand(lat, acc[m], m, parent[m])
            return acc[finest].ravel()

        target = np.concatenate([root[m] * self._cuboids[m].ravel() for m in masks])
        start = self._cuboids[finest].ravel() if finest in self._cuboids else np.zeros(n)
        fitted, status = nonnegative_least_squares(matvec, rmatvec, target, start)
        estimate = fitted.reshape(finest_shape)
        # the published one-way cuboids raked back in: the clipping of many sparse cells leans
        # on them harder than their weight in the fit holds them
        single = [m for m in masks if bin(m).count("1") == 1]
        if single:
            axis_of = {i: k for k, i in enumerate(bits(finest))}
            margins = {axis_of[bits(m)[0]]: self._cuboids[m].ravel() for m in single}
            estimate = rake(estimate, margins)
        steps = [
            f"fit: the finest table ({','.join(self.geometry.attributes(finest))}) by "
            "non-negative least squares to every published cuboid at once, each weighted by "
            f"the inverse of its cell noise variance where known ({status})"
        ]
        if single:
            steps.append(
                "raking: the fit scaled by iterative proportional fitting (Deming-Stephan 1940) "
                "to the published one-way cuboids (negative cells taken as 0)"
            )
        chain = [0]
        for i in bits(finest):
            chain.append(chain[-1] | 1 << i)
        # the grand total stays the released one (its best estimate among the cuboids), made
        # whole: the fit's clipping would otherwise add the positive part of every cell's noise
        levels: list[Any] = [float(self.answer_many([{}])[0])]
        levels += [rollup(estimate, finest, m) for m in chain[1:]]
        table = topdown_chain(levels)
        cuboids = {m: np.asarray(rollup(table, finest, m), dtype=np.float64) for m in masks}
        names = [",".join(self.geometry.attributes(m)) or "()" for m in chain]
        steps += [
            "TopDown down the chain of cuboids " + " < ".join(f"({n})" for n in names) + ": the "
            "released total made whole; at each level every parent's children projected in L2 onto the "
            "non-negative figures summing to the parent's whole figure (Held-Wolfe-Crowder) and "
            "rounded under it by the largest remainders (each chain cell within 1 of its "
            "projection)",
            "every published cuboid: the roll-up of the whole finest table",
        ]
        metadata = integer_metadata(
            self.metadata,
            steps=steps,
            intervals=(
                "none: the projection depends on the noise, so the exact variances no longer "
                "describe the answers; the release before this step keeps its exact intervals"
            ),
        )
        return CuboidRelease(
            self.schema,  # type: ignore[arg-type]
            metadata,
            cuboids,
            self._sources,
            self.source_variances,
            self.cell_variances,
            "unknown",
            self.max_variance,
        )

    def trim_cache(self, max_bytes: int) -> None:
        """Drop the cuboids' summed-area tables if together they take more than ``max_bytes``."""
        if sum(p.nbytes for p in self._prefix.values()) > max_bytes:
            self._prefix.clear()

    def bootstrap_world(self) -> BootstrapWorld:
        """The parametric bootstrap's world: the published cuboid W that contains every measured
        cuboid, made non-negative whole counts (:func:`~dpcube.release.uncertainty.integer_truth`),
        placed in the full domain (the attributes outside W at their first bin: the mechanism reads
        the data only through the measured cuboids, which are roll-ups of W). Each replicate
        re-runs the whole cube mechanism (noise, consistency, clamping, rounding) on it; the truth
        of a query is its answer on W. Post-processing of the release: no budget is spent."""
        from dpcube.histogram import Histogram
        from dpcube.release.cells import CellRelease
        from dpcube.release.uncertainty import (
            BootstrapWorld,
            integer_truth,
            rebuild_mechanism,
            rerun,
        )

        world = self._world_cuboid()
        if world is None:
            raise ReleaseError(f"no bootstrap for this data cube: {self.bootstrap_unavailable}")
        inside = set(self.geometry.attributes(world))
        index: list[Any] = []
        for attribute in self.schema.attributes:  # type: ignore[union-attr]
            axes = len(attribute.shape)
            index.extend([slice(None) if attribute.name in inside else 0] * axes)
        assert self.schema is not None
        cells = np.zeros(self.schema.shape, dtype=np.int64)
        cells[tuple(index)] = integer_truth(self._cuboids[world])
        mechanism = rebuild_mechanism(self.metadata)
        data = Histogram(self.schema, cells, privacy_unit=mechanism.privacy_unit)
        return BootstrapWorld(
            CellRelease(self.schema, self.metadata, cells), lambda rng: rerun(mechanism, data, rng)
        )

    def variance_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        split = self.set_parts(queries)
        if split is not None:
            return self._answer_sets(split)[1]
        boxes = self.boxes(queries)
        out = np.empty(len(queries), dtype=np.float64)
        for members, mask, selected in self._groups(boxes):
            out[members] = self._box_variance(mask, selected)
        return out

    # -- persistence -------------------------------------------------------------------------
    # -- the labelled table, the explorer and the report -----------------------------------
    def table_cuboid(self, cuboid: Sequence[str] | None) -> list[str] | None:
        """The cuboid of the labelled table: ``cuboid`` checked, or the one published cuboid
        when none is named (several: refused, naming them)."""
        names = None if cuboid is None else list(cuboid)
        if names is None:
            if len(self.published) != 1:
                listed = "; ".join(",".join(c) or "()" for c in self.published)
                raise QueryError(
                    f"a data-cube release has one table per published cuboid; name one with "
                    f"cuboid=(...) / --cuboid a,b (published: {listed})"
                )
            names = list(self.published[0])
        schema = self.schema
        assert schema is not None  # a data cube always has its schema
        unknown = [n for n in names if n not in schema.names]
        if unknown:
            raise QueryError(
                f"cuboid names {unknown[0]!r}, which is not an attribute of this release; the "
                f"schema has {', '.join(schema.names)}"
            )
        if tuple(sorted(names, key=schema.names.index)) not in self.published:
            self.derive_cuboid(names)  # no published superset: the error says what to do
        return names

    def export_tables(self) -> list[list[str] | None]:
        """One table per published cuboid when there are several (else the one)."""
        if len(self.published) > 1:
            return [list(c) for c in self.published]
        return [None]

    def table_size(self, cuboid: Sequence[str] | None, where: Mapping[str, Any]) -> int:
        """As :meth:`Release.table_size`; no cuboid named: the one published cuboid's table
        (several: the grand total's one row, the table then being refused by name)."""
        if cuboid is None and self.published:
            cuboid = list(self.published[0]) if len(self.published) == 1 else []
        return super().table_size(cuboid, where)

    def explorer_view(self) -> dict[str, Any]:
        """The published cuboids (the page offers one at a time)."""
        return {"cuboids": [list(c) for c in self.published]}

    def report_parts(self, max_rows: int) -> tuple[ReportPart, ...]:
        """One table per published cuboid (its first ``max_rows`` cells), then the marginals."""
        tables = []
        for cuboid in self.published:
            names = list(cuboid)
            labels, queries = self.table_cells(names, None)
            n = len(queries)
            keep = min(n, max_rows)
            edges = {f"{a}_{end}" for a in names for end in ("lo", "hi")}  # an ordinal's bin edges
            shown = {c: [str(v) for v in labels[c][:keep]] for c in labels if c not in edges}
            title = ", ".join(names) if names else "total (no attribute)"
            cut = (
                f"The first {keep:,} of {n:,} rows (dpcube export --cuboid {','.join(names)} "
                "writes them all)."
            )
            tables.append(
                ReportTable(
                    ident=f"table-cuboid-{'-'.join(names) if names else 'total'}",
                    heading=f"Cuboid: {title}",
                    labels=shown,
                    queries=queries[:keep],
                    note=cut if n > keep else None,
                )
            )
        published = ReportSection(
            ident="cuboids",
            title="Published cuboids",
            note=f"{len(self.published)} cuboids were published; one table each.",
            tables=tuple(tables),
        )
        return (published, "marginals")

    def tables(self) -> dict[str, pa.Table]:
        masks = sorted(self._cuboids)
        ids = np.concatenate([np.full(self._cuboids[m].size, m, dtype=np.int64) for m in masks])
        values = np.concatenate([self._cuboids[m].ravel() for m in masks])
        from dpcube.release.integer import is_integer

        if is_integer(self.metadata):  # whole counts: written as integers
            return {"cuboids": pa.table({"cuboid": ids, "value": np.rint(values).astype(np.int64)})}
        return {"cuboids": pa.table({"cuboid": ids, "value": values})}

    def state(self) -> dict[str, Any]:
        return {
            "published": sorted(self._cuboids),
            "sources": list(self._sources),
            "source_variances": list(self.source_variances),
            "cell_variances": {str(m): v for m, v in self.cell_variances.items()},
            "mode": self.mode,
            "max_variance": self.max_variance,
        }

    @classmethod
    def restore(
        cls,
        schema: Schema | None,
        metadata: ReleaseMetadata,
        tables: dict[str, pa.Table],
        state: dict[str, Any],
    ) -> CuboidRelease:
        if schema is None:
            raise ReleaseError("a 'cuboids' release needs its schema in the manifest")
        table = tables.get("cuboids")
        if table is None or table.column_names != ["cuboid", "value"]:
            raise ReleaseError("a 'cuboids' release needs a 'cuboids' table of (cuboid, value)")
        ids = column_numpy(table, "cuboid")
        values = column_numpy(table, "value")
        lattice = CubeGeometry(schema).lattice
        published = [int(m) for m in state["published"]]
        if not set(np.unique(ids).tolist()) <= set(published):
            raise ReleaseError("the 'cuboids' table holds a cuboid that is not published")
        for m in published:
            if not 0 <= m < 2 ** len(schema.attributes):
                raise ReleaseError(f"published cuboid {m} is not one of the schema's")
            expected = int(np.prod(shape(lattice, m)))
            if int((ids == m).sum()) != expected:
                raise ReleaseError(
                    f"the 'cuboids' table has {int((ids == m).sum()):,} cells of cuboid "
                    f"{list(CubeGeometry(schema).attributes(m))} but the schema gives it "
                    f"{expected:,}; the schema or the table was edited: do not use this release"
                )
        cuboids = {m: values[ids == m] for m in published}
        return cls(
            schema,
            metadata,
            cuboids,
            state["sources"],
            state["source_variances"],
            {int(m): float(v) for m, v in state["cell_variances"].items()},
            state["mode"],
            float(state["max_variance"]),
        )

    def report_lines(self) -> list[str]:
        lines = super().report_lines()
        lines.append(
            f"- measured cuboids (L_pre): {len(self._sources)}; published cuboids: {len(self._cuboids)}"
        )
        lines.append(
            f"- largest per-cell noise variance (selection bound): {self.max_variance:.6g}"
        )
        lines.append(f"- variance model: {self.mode}")
        return lines
