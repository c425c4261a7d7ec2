"""A release of one estimate per cell of the domain, answering range queries by prefix sums."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from dpcube.errors import ReleaseError
from dpcube.linalg.summed_area import box_sums, prefix_sums
from dpcube.release.base import Release, ReleaseMetadata, column_numpy
from dpcube.release.variance import VarianceModel, load_variance_model
from dpcube.release.views import ReportPart
from dpcube.schema import Schema

if TYPE_CHECKING:
    from dpcube.release.uncertainty import BootstrapWorld


class CellRelease(Release):
    """Noisy (or estimated) counts for every cell, in the schema's shape."""

    kind = "cells"

    def __init__(
        self,
        schema: Schema,
        metadata: ReleaseMetadata,
        counts: NDArray[Any],
        variance_model: VarianceModel | None = None,
    ) -> None:
        super().__init__(schema, metadata)
        if tuple(counts.shape) != schema.shape:
            raise ReleaseError(
                f"counts of shape {counts.shape} do not match the schema's {schema.shape}"
            )
        self.counts = counts
        self.variance_model = variance_model
        self._prefix: NDArray[Any] | None = None

    @property
    def prefix(self) -> NDArray[Any]:
        if self._prefix is None:
            self._prefix = prefix_sums(self.counts)
        return self._prefix

    def answer_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        split = self.set_parts(queries)
        if split is not None:  # sets of categories: the sum of their disjoint boxes
            return split.sum(self.answer_many(split.parts))
        boxes = self.boxes(queries)
        # A query of one cell (every row of a labelled table) is the cell itself, read directly
        # (no prefix sums, and the same figure whatever other queries come with it).
        single = np.all(boxes[:, :, 0] == boxes[:, :, 1], axis=1)
        out = np.empty(len(boxes), dtype=np.float64)
        out[single] = self.counts[tuple(boxes[single, :, 0].T)]
        if not single.all():
            out[~single] = box_sums(self.prefix, boxes[~single]).astype(np.float64)
        return out

    @property
    def linear_unbiased(self) -> bool:
        """Whether the answers are linear in the noise and unbiased, so the variance model's exact
        noise variance is the answer's error (every cell mechanism with a variance model)."""
        return self.variance_model is not None

    @property
    def bootstrap_unavailable(self) -> str | None:
        """None: every cell release has a bootstrap (:meth:`bootstrap_world`)."""
        return None

    def trim_cache(self, max_bytes: int) -> None:
        """Drop the summed-area table if it takes more than ``max_bytes``."""
        if self._prefix is not None and self._prefix.nbytes > max_bytes:
            self._prefix = None

    @property
    def integer_unavailable(self) -> str | None:
        """None: every cell release can be made whole (:meth:`to_integer`)."""
        return None

    def to_integer(self) -> CellRelease:
        """The cells made non-negative whole counts, every block of the tree below summing
        exactly to its whole figure and the cells to the released total made whole
        (:func:`dpcube.release.integer.topdown_blocks`: TopDown on a tree of blocks of 4
        consecutive cells in the schema's cell order, then blocks of 4 blocks, up to the total).
        Every derived figure (a range, a marginal, the total) is a sum of the whole cells. The
        exact noise variance no longer describes the answers (the projection depends on the
        noise): the new release has no variance model, and its intervals are the parametric
        bootstrap's (``model``, never trusted), each replicate made whole the same way.
        Post-processing: nothing is charged."""
        from dpcube.release.integer import integer_metadata, is_integer, topdown_blocks

        if is_integer(self.metadata):
            return self
        metadata = integer_metadata(
            self.metadata,
            steps=[
                "tree: blocks of 4 consecutive cells (schema order), blocks of 4 blocks, ... up "
                "to the total, each block's figure the sum of the released cells under it",
                "total: made the nearest whole number >= 0",
                "each level: every block's children projected in L2 onto the non-negative "
                "figures summing to the block's whole figure (Held-Wolfe-Crowder 1974), then "
                "rounded under it by the largest remainders (each moves by less than 1)",
            ],
            intervals=(
                "the exact noise sd described the unrounded cells; the whole cells get the "
                "model-based bootstrap, each replicate made whole the same way"
            ),
        )
        return CellRelease(self.schema, metadata, topdown_blocks(self.counts))  # type: ignore[arg-type]

    def bootstrap_world(self) -> BootstrapWorld:
        """The parametric bootstrap's world (:mod:`dpcube.release.uncertainty`): the released cells,
        made non-negative whole counts, as the truth; the mechanism re-run on them (and each
        replicate made whole, :meth:`to_integer`, where this release was)."""
        from dpcube.histogram import Histogram
        from dpcube.release.integer import is_integer
        from dpcube.release.uncertainty import (
            BootstrapWorld,
            integer_truth,
            rebuild_mechanism,
            rerun,
        )

        assert self.schema is not None
        truth = integer_truth(self.counts)
        mechanism = rebuild_mechanism(self.metadata)
        data = Histogram(self.schema, truth, privacy_unit=mechanism.privacy_unit)
        if is_integer(self.metadata):
            return BootstrapWorld(
                CellRelease(self.schema, self.metadata, truth),
                lambda rng: rerun(mechanism, data, rng).to_integer(),
            )
        return BootstrapWorld(
            CellRelease(self.schema, self.metadata, truth), lambda rng: rerun(mechanism, data, rng)
        )

    def variance_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        if self.variance_model is None:
            return np.full(len(queries), np.nan)
        split = self.set_parts(queries)
        if split is not None:  # one linear query each: the covariances of its boxes count
            assert split.selections is not None
            return self.variance_model.selection_variance_many(split.selections)
        return self.variance_model.variance_many(self.boxes(queries))

    def report_parts(self, max_rows: int) -> tuple[ReportPart, ...]:
        return ("marginals",)

    def tables(self) -> dict[str, pa.Table]:
        assert self.schema is not None
        index = np.indices(self.counts.shape).reshape(self.counts.ndim, -1)
        names = index_columns(self.schema)
        columns = {name: pa.array(index[k].astype(np.int32)) for k, name in enumerate(names)}
        columns["count"] = pa.array(self.counts.ravel())
        return {"cells": pa.table(columns)}

    def state(self) -> dict[str, Any]:
        return {"variance_model": self.variance_model.dump() if self.variance_model else None}

    @classmethod
    def restore(
        cls,
        schema: Schema | None,
        metadata: ReleaseMetadata,
        tables: dict[str, pa.Table],
        state: dict[str, Any],
    ) -> CellRelease:
        if schema is None:
            raise ReleaseError("a cell release needs its schema in the manifest")
        table = tables.get("cells")
        if table is None:
            raise ReleaseError("a cell release has no 'cells' table")
        check_cells_table(schema, table)
        counts_col = column_numpy(table, "count")
        counts = np.zeros(schema.shape, dtype=counts_col.dtype)
        index = tuple(column_numpy(table, n) for n in index_columns(schema))
        counts[index] = counts_col
        return cls(schema, metadata, counts, load_variance_model(state.get("variance_model")))


def index_columns(schema: Schema) -> list[str]:
    """The names of a cell table's index columns: one per axis of the schema (an attribute's
    name; ``<name>_row`` and ``<name>_col`` for a two-axis spatial attribute)."""
    return [
        f"{a}" if len(schema[a].shape) == 1 else f"{a}_{('row', 'col')[i]}" for a, i in schema.axes
    ]


def check_cells_table(schema: Schema, table: pa.Table) -> None:
    """Refuse a cell table that does not fit ``schema``: other columns than one index column per
    axis and ``count``, another number of rows than cells, an index outside the axis or a cell
    given twice (a schema or table edited after the save)."""
    names = index_columns(schema)
    if table.column_names != [*names, "count"]:
        raise ReleaseError(
            f"the 'cells' table has columns {table.column_names} but the schema's axes give "
            f"{[*names, 'count']}; the schema or the table was edited: do not use this release"
        )
    cells = int(np.prod(schema.shape))
    if table.num_rows != cells:
        raise ReleaseError(
            f"the 'cells' table has {table.num_rows:,} rows but the schema's shape "
            f"{schema.shape} has {cells:,} cells; do not use this release"
        )
    index = [column_numpy(table, n).astype(np.int64) for n in names]
    for name, column, size in zip(names, index, schema.shape, strict=True):
        if column.size and (column.min() < 0 or column.max() >= size):
            raise ReleaseError(
                f"the 'cells' table's column {name!r} holds an index outside 0..{size - 1} "
                "(the schema's axis); do not use this release"
            )
    flat = np.ravel_multi_index(tuple(index), schema.shape) if index else np.zeros(0, np.int64)
    # every index is in its axis (checked above) and there are as many rows as cells: a cell
    # given twice leaves another cell out (a bincount, not np.unique, which imports numpy.ma)
    if len(index) and np.count_nonzero(np.bincount(flat, minlength=cells)) != cells:
        raise ReleaseError("the 'cells' table gives a cell twice; do not use this release")
