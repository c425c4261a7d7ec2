"""Labelled tables out of a release: one row per released cell, leaf, cuboid
cell or region x size, with the attribute values as the user wrote them and the error.

Columns, per attribute of the row's cell:

- ordinal ``a``: ``a`` (the bin's label: the value for width-1 bins of whole numbers, else
  ``[lo, hi)``), ``a_lo`` and ``a_hi`` (the bin's edges, ``lo`` inclusive, ``hi`` exclusive);
- nominal ``a``: ``a`` (the category);
- spatial ``a``: ``a_lat_lo``, ``a_lat_hi``, ``a_lon_lo``, ``a_lon_hi`` (the cell's or leaf's
  bounds in degrees);

then ``estimate`` (the release's answer for that row), ``stddev`` (the answer's error sd: the
exact noise sd, or the bootstrap error), ``lower`` and ``upper`` (the interval at ``level``),
``level`` (the confidence level, in every kind's table: a census table names the region's
level in the hierarchy ``region_level``); and, where the error is not exact, ``noise_sd`` and ``error_kind`` ("bootstrap" or
"none"). The uncertainty is :func:`dpcube.release.uncertainty.answer_uncertainty`'s; the table's
Arrow metadata (key ``dpcube``) records the release id, kind, level, error kind and its reason.

A data-cube release gives one table per cuboid (``cuboid=("sex", "income")``): the rows are
that cuboid's cells, each estimate the release's answer to that cell (for a consistent release,
the cuboid's released value; for a cuboid that was not published, the sum over the published
superset with the least variance, as :meth:`CuboidRelease.derive_cuboid`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from dpcube.errors import DomainTooLargeError, QueryError, ReleaseError
from dpcube.schema import (
    BoxedQueries,
    Nominal,
    Ordinal,
    Schema,
    Spatial,
    default_max_cells,
    has_set,
)

#: The key of the Arrow schema metadata that marks a table dpcube wrote.
METADATA_KEY = b"dpcube"


def attribute_columns(attribute: Any, index: Sequence[Any]) -> dict[str, Any]:
    """Label columns of ``attribute`` for rows whose bins are ``index`` (one int array per axis).

    >>> s = Schema.from_dict({"attributes": [
    ...     {"name": "inc", "kind": "ordinal", "edges": [0, 10, 50]}]})
    >>> attribute_columns(s["inc"], [np.array([0, 1])])
    {'inc': ['[0, 10)', '[10, 50)'], 'inc_lo': [0.0, 10.0], 'inc_hi': [10.0, 50.0]}
    """
    name = attribute.name
    if isinstance(attribute, Ordinal):
        i = np.asarray(index[0], dtype=np.int64)
        edges = np.asarray(attribute.edges, dtype=np.float64)
        labels = np.asarray(attribute.labels, dtype=object)
        return {
            name: labels[i].tolist(),
            f"{name}_lo": edges[i].tolist(),
            f"{name}_hi": edges[i + 1].tolist(),
        }
    if isinstance(attribute, Nominal):
        cats = np.asarray(attribute.categories, dtype=object)
        return {name: cats[np.asarray(index[0], dtype=np.int64)].tolist()}
    assert isinstance(attribute, Spatial)
    lat, lon = (np.asarray(s.edges, dtype=np.float64) for s in attribute.scales)
    rows, cols = (np.asarray(x, dtype=np.int64) for x in index)
    return {
        f"{name}_lat_lo": lat[rows].tolist(),
        f"{name}_lat_hi": lat[rows + 1].tolist(),
        f"{name}_lon_lo": lon[cols].tolist(),
        f"{name}_lon_hi": lon[cols + 1].tolist(),
    }


def grid_cells(
    schema: Schema,
    attributes: Sequence[str] | None = None,
    where: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], Sequence[Mapping[str, Any]]]:
    """Every cell of the product of ``attributes`` (default: all) inside ``where``: the label
    columns and one query per cell (``where`` and the cell's bins by number).

    >>> s = Schema.from_dict({"attributes": [
    ...     {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
    ...     {"name": "age", "kind": "ordinal", "range": [0, 2], "width": 1}]})
    >>> labels, queries = grid_cells(s, ["sex"], {"age": [1, 2]})
    >>> labels, queries[1]
    ({'sex': ['F', 'M']}, {'age': [1, 2], 'sex': {'bins': [1, 1]}})
    """
    names = list(schema.names if attributes is None else attributes)
    for name in names:
        schema[name]  # unknown names: one clear error
    if len(set(names)) != len(names):
        raise QueryError(f"attributes {names} repeat a name")
    where = dict(where or {})
    # a set of categories in ``where`` selects several runs on its axis: a grouped attribute
    # lists the categories of its runs, any other keeps the set in every row (a sum of boxes)
    runs = schema.box_set(where)
    box = tuple((axis[0][0], axis[-1][1]) for axis in runs)
    values: list[NDArray[np.int64]] = []
    for name in names:
        for axis in runs[schema.axis_slice(name)]:
            values.append(np.concatenate([np.arange(lo, hi + 1) for lo, hi in axis]))
    count = math.prod(len(v) for v in values)
    if count > default_max_cells():
        raise DomainTooLargeError(
            f"a table of {count:,} rows is more than the {default_max_cells():,} cells that may be "
            "materialised; group by fewer attributes or constrain them with --where"
        )
    index = [grid.ravel() for grid in np.meshgrid(*values, indexing="ij")] if values else []
    labels: dict[str, Any] = {}
    position = 0
    boxes = np.repeat(np.asarray(box, dtype=np.int64)[None, :, :], count, axis=0)
    own_bins: dict[str, list[NDArray[np.int64]]] = {}
    for name in names:
        attribute = schema[name]
        width = len(attribute.shape)
        own = index[position : position + width]
        position += width
        labels.update(attribute_columns(attribute, own))
        start = schema.axis_slice(name).start
        for k in range(width):
            boxes[:, start + k, 0] = own[k]
            boxes[:, start + k, 1] = own[k]
        own_bins[name] = own

    def row(k: int) -> dict[str, Any]:
        """Row ``k``'s constraints: its bins by number (built only when a row is asked for)."""
        out: dict[str, Any] = {}
        for name, own in own_bins.items():
            bins = [int(o[k]) for o in own]
            out[name] = (
                {"bins": [bins[0], bins[0]]}
                if len(bins) == 1
                else {"bins": [[bins[0], bins[0]], [bins[1], bins[1]]]}
            )
        return out

    if any(has_set({n: v}) for n, v in where.items() if n not in names):
        return labels, [{**where, **row(k)} for k in range(count)]
    return labels, BoxedQueries(boxes, where, row)


def _cuboid_names(cuboid: Sequence[str] | str | None) -> list[str] | None:
    if cuboid is None:
        return None
    return [cuboid] if isinstance(cuboid, str) else list(cuboid)


def labelled_table(
    release: Any,
    *,
    level: float = 0.95,
    cuboid: Sequence[str] | str | None = None,
    runs: int | None = None,
    seed: int | None = None,
    intervals: str = "trusted",
    where: Mapping[str, Any] | None = None,
) -> pa.Table:
    """The release's labelled table (see the module docstring).

    ``cuboid``: the attributes of one published cuboid of a data-cube release (required there
    when more than one cuboid was published); refused for other releases, whose rows are their
    own cells. ``where`` restricts the rows (and constrains the other attributes).
    """
    names = release.table_cuboid(_cuboid_names(cuboid))
    labels, queries = release.table_cells(names, where)
    return table_from_cells(
        release,
        labels,
        queries,
        level=level,
        runs=runs,
        seed=seed,
        cuboid=names,
        intervals=intervals,
    )


@dataclass
class LabelledRows:
    """A labelled table as plain columns (lists) and what it is (``info``); :meth:`to_arrow`
    makes the Arrow table. Kept apart from Arrow so that ``dpcube query --group-by`` prints a
    table without importing pandas (which building any Arrow array does)."""

    columns: dict[str, Any]  # lists (labels) and float arrays (estimates and errors)
    info: dict[str, Any]

    @property
    def num_rows(self) -> int:
        return len(next(iter(self.columns.values()), []))

    def to_arrow(self) -> pa.Table:
        table = pa.table({k: pa.array(v) for k, v in self.columns.items()})
        return table.replace_schema_metadata({METADATA_KEY: json.dumps(self.info).encode()})


def rows_from_cells(
    release: Any,
    labels: Mapping[str, Any],
    queries: Sequence[Mapping[str, Any]],
    *,
    level: float = 0.95,
    runs: int | None = None,
    seed: int | None = None,
    cuboid: Sequence[str] | None = None,
    intervals: str = "trusted",
) -> LabelledRows:
    """The labelled rows given by their label columns and queries (one per row); ``intervals``
    as in :func:`dpcube.release.uncertainty.answer_uncertainty`."""
    u = release.uncertainty(queries, level=level, runs=runs, seed=seed, intervals=intervals)
    columns: dict[str, Any] = {k: list(v) for k, v in labels.items()}
    n = len(queries)

    def floats(values: Any) -> NDArray[np.float64]:
        return np.asarray(values, dtype=np.float64)

    columns["estimate"] = floats(u.answers)
    columns["stddev"] = floats(u.stddev)
    columns["lower"] = floats(u.lower)
    columns["upper"] = floats(u.upper)
    if "level" in columns:  # a kind's label may not take the interval's column
        raise ReleaseError(
            f"a {release.kind!r} release labels its rows with a column 'level', which every "
            "labelled table keeps for the interval's confidence level"
        )
    columns["level"] = np.full(n, float(level))
    if u.kind != "exact":
        columns["noise_sd"] = floats(u.noise_sd)
        columns["error_kind"] = [str(u.kind)] * n
    # every row says whether its interval is valid by construction, what it is and why
    columns["trusted"] = [u.trusted(i) for i in range(n)]
    columns["interval_kind"] = [str(k) for k in u.interval_kind]
    columns["interval_reason"] = list(u.reasons)
    info = {
        "release_id": release.metadata.release_id,
        "kind": release.kind,
        "mechanism": release.metadata.mechanism,
        "for_publication": release.metadata.for_publication,
        "level": float(level),
        "error_kind": u.kind,
        "error_reason": u.reason,
        "cuboid": list(cuboid) if cuboid is not None else None,
    }
    return LabelledRows(columns, info)


def table_from_cells(
    release: Any,
    labels: Mapping[str, Any],
    queries: Sequence[Mapping[str, Any]],
    *,
    level: float = 0.95,
    runs: int | None = None,
    seed: int | None = None,
    cuboid: Sequence[str] | None = None,
    intervals: str = "trusted",
) -> pa.Table:
    """:func:`rows_from_cells` as an Arrow table (its ``info`` in the metadata key ``dpcube``)."""
    return rows_from_cells(
        release,
        labels,
        queries,
        level=level,
        runs=runs,
        seed=seed,
        cuboid=cuboid,
        intervals=intervals,
    ).to_arrow()


def table_info(table: pa.Table) -> dict[str, Any]:
    """What :func:`labelled_table` recorded in a table's metadata ({} for a foreign table)."""
    meta = table.schema.metadata or {}
    raw = meta.get(METADATA_KEY)
    return json.loads(raw) if raw else {}


__all__ = [
    "METADATA_KEY",
    "LabelledRows",
    "attribute_columns",
    "grid_cells",
    "labelled_table",
    "rows_from_cells",
    "table_from_cells",
    "table_info",
]
