"""The releases a service answers from: loaded once, verified, and answered from memory.

A :class:`ServedRelease` wraps one release directory read by :func:`dpcube.release.load_release`
(which verifies the manifest and every table's SHA-256). Queries are resolved to their boxes once
(:class:`QueryResolver`, :class:`dpcube.schema.BoxedQueries`), so the release's vectorised prefix-sum path answers them and
:meth:`dpcube.release.base.Release.uncertainty` does not resolve them a second time for the
variance. A bootstrap-kind release (spatial trees, census) has its replicates computed once
(:func:`warm_bootstrap`) and kept in memory for the life of the process.

Serving reads releases only: it spends no privacy budget, since a release is public by
construction and every answer is post-processing of it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpcube.errors import DPCubeError, QueryError, UsageError
from dpcube.release.base import (
    MANIFEST,
    Release,
    _jsonable,
    _plain_file_name,
    load_release,
    publication_warning,
)
from dpcube.release.formats import answers_json, json_ready
from dpcube.schema import BoxedQueries, Nominal, Ordinal, Schema, Spatial, has_set

#: The report file served when the manifest names none (``dpcube report`` writes it).
REPORT_HTML = "report.html"
#: Manifest keys that may name the HTML report file (a plain file name inside the release).
REPORT_KEYS = ("report_html", "report_file")


def warm_bootstrap(release: Release, runs: int, seed: int | None) -> None:
    """Compute ``release``'s bootstrap replicates once, now, and keep them in memory.

    The one place serving touches the replicate cache: the replicates stored with the release
    when they are the ``runs`` asked for, else it fills the per-release cache of
    :mod:`dpcube.release.uncertainty` (keyed by ``(runs, seed)``), which every later
    ``release.uncertainty(..., runs=runs, seed=seed)`` on the same release object reuses; swap
    this function if that cache moves.
    """
    from dpcube.release.uncertainty import bootstrap_errors, bootstrap_replicates

    bootstrap_replicates(release, runs, seed)  # the stored ones when they are those asked for
    # one answer through every replicate builds their summed-area tables now (kept while they
    # fit in dpcube.release.uncertainty.KEEP_REPLICATE_PREFIX_BYTES), not at the first request
    bootstrap_errors(release, [{}], runs=runs, seed=seed)


#: Constraints remembered per attribute before the memo is emptied (bounds its memory).
MEMO_LIMIT = 1 << 16


class RememberingAttribute:
    """An attribute whose :meth:`constraint` results are remembered, keyed by the ``repr`` of
    the constraint (a JSON value: ``repr`` tells apart ``1``, ``1.0``, ``True`` and ``"1"``).

    Everything else is the attribute's own; a constraint is a pure function of its value, so
    remembering it changes no answer and no error (errors are not remembered).
    """

    def __init__(self, attribute: Any, limit: int = MEMO_LIMIT) -> None:
        self._attribute = attribute
        #: the remembered constraints by ``repr`` (:class:`QueryResolver` reads it directly; it
        #: is emptied when full, never replaced)
        self.memo: dict[str, Any] = {}
        self._limit = limit
        self.name = attribute.name
        self.shape = attribute.shape

    def __getattr__(self, name: str) -> Any:
        return getattr(self._attribute, name)

    def constraint(self, value: Any) -> Any:
        key = repr(value)
        intervals = self.memo.get(key)
        if intervals is None:
            intervals = self._attribute.constraint(value)
            if len(self.memo) >= self._limit:
                self.memo.clear()
            self.memo[key] = intervals
        return intervals


def remembering_schema(schema: Schema) -> Schema:
    """``schema`` with :class:`RememberingAttribute` attributes: ``box`` resolves a query as
    :meth:`dpcube.schema.Schema.box` does (same boxes, same errors), each distinct constraint
    of an attribute worked out once (a service sees the same values again and again).

    >>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 9], "width": 1}]})
    >>> r = remembering_schema(s)
    >>> r.box({"x": [2, 5]}) == s.box({"x": [2, 5]}), r.box({"x": [2, 5]})
    (True, ((2, 5),))
    """
    # duck-typed: Schema only reads name, shape and constraint() of its attributes here
    attributes: tuple[Any, ...] = tuple(RememberingAttribute(a) for a in schema.attributes)
    return Schema(attributes)


class QueryResolver:
    """Resolves a batch of queries to one int array of boxes (q, axes, 2), as
    :meth:`dpcube.schema.Schema.box` resolves each (same boxes, same errors), in one tight loop:
    each attribute's distinct constraints are worked out once (:func:`remembering_schema`), an
    attribute a query leaves out spans its whole axis, and a query that names an attribute the
    schema lacks goes through ``Schema.box`` for its error line.

    >>> s = Schema.from_dict({"attributes": [
    ...     {"name": "x", "kind": "ordinal", "range": [0, 9], "width": 1},
    ...     {"name": "c", "kind": "nominal", "categories": ["a", "b"]}]})
    >>> QueryResolver(s).boxes([{"x": [2, 5]}, {"c": "b"}]).tolist()
    [[[2, 5], [0, 1]], [[0, 9], [1, 1]]]
    >>> QueryResolver(s).boxes([{"y": 1}])
    Traceback (most recent call last):
    dpcube.errors.QueryError: queries[0]: unknown attribute 'y' in query; the schema has x, c
    """

    def __init__(self, schema: Schema) -> None:
        self._schema = remembering_schema(schema)
        self._names = frozenset(schema.names)
        self._axes = len(schema.shape)
        # per attribute: its name, its memo (RememberingAttribute's, read here without a call)
        # and its constraint, and the whole axis for a query that leaves it out
        remembering: tuple[Any, ...] = self._schema.attributes
        self._parts = tuple(
            (a.name, a.memo, a.constraint, tuple((0, n - 1) for n in a.shape)) for a in remembering
        )

    def boxes(self, queries: Sequence[Any]) -> Any:
        """The boxes of ``queries``; an error names ``queries[i]``."""
        names, parts = self._names, self._parts
        flat: list[tuple[int, int]] = []
        extend = flat.extend
        for i, query in enumerate(queries):
            if not isinstance(query, Mapping):
                raise QueryError(f"queries[{i}] must be an object {{attribute: constraint}}")
            try:
                if not names.issuperset(query):
                    self._schema.box(query)  # raises the schema's own line for the unknown name
                for name, memo, constraint, whole in parts:
                    if name in query:
                        value = query[name]
                        intervals = memo.get(repr(value))
                        extend(constraint(value) if intervals is None else intervals)
                    else:
                        extend(whole)
            except DPCubeError as exc:
                raise QueryError(f"queries[{i}]: {exc}") from None
            except (TypeError, ValueError, OverflowError) as exc:
                raise QueryError(f"queries[{i}] could not be read: {exc}") from None
        return np.array(flat, dtype=np.int64).reshape(len(queries), self._axes, 2)


def attribute_info(attribute: Any) -> dict[str, Any]:
    """What a query widget needs to know about one attribute (labels, bins, edges, ranges)."""
    info: dict[str, Any] = attribute.to_dict()
    info["bins"] = [int(n) for n in attribute.shape]
    if isinstance(attribute, Ordinal):
        info["labels"] = list(attribute.labels)
        info["bin_edges"] = [float(e) for e in attribute.edges]
        info["value_range"] = [float(attribute.low), float(attribute.high)]
    elif isinstance(attribute, Nominal):
        info["labels"] = list(attribute.categories)
        if attribute.hierarchy is not None:
            info["nodes"] = list(attribute.hierarchy.nodes)
    elif isinstance(attribute, Spatial):
        lat0, lon0, lat1, lon1 = attribute.bbox
        info["lat_range"] = [lat0, lat1]
        info["lon_range"] = [lon0, lon1]
        # the grid's edges as the library computes them (exactly from the bbox's decimals)
        info["lat_edges"], info["lon_edges"] = (list(s.edges) for s in attribute.scales)
    return info


@dataclass
class ServedRelease:
    """One release loaded for serving, under its folder name."""

    name: str
    directory: Path
    release: Release
    runs: int
    seed: int | None
    error_kind: str
    error_reason: str
    report_paths: tuple[Path, ...]
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _answer_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _warm: bool = False
    _resolver: QueryResolver | None = field(default=None, repr=False)

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], *, runs: int | None, seed: int | None
    ) -> ServedRelease:
        """``runs=None``: the bootstrap replicates stored with the release, if any (answers then
        come from them, nothing is re-run), else :data:`~dpcube.release.uncertainty.DEFAULT_RUNS`."""
        from dpcube.release.uncertainty import default_runs, uncertainty_kind

        path = Path(directory)
        release = load_release(path)
        kind, reason = uncertainty_kind(release)
        return cls(
            name=path.resolve().name,
            directory=path.resolve(),
            release=release,
            runs=default_runs(release) if runs is None else runs,
            seed=seed,
            error_kind=kind,
            error_reason=reason,
            report_paths=_report_paths(path.resolve()),
        )

    def report_file(self) -> Path | None:
        """The HTML report file if it exists now (its possible names were fixed at load)."""
        return next((p for p in self.report_paths if p.is_file()), None)

    @property
    def bootstrap(self) -> bool:
        return self.error_kind == "bootstrap"

    def warm(self) -> None:
        """Compute the bootstrap replicates once (no-op for exact/none releases)."""
        if not self.bootstrap or self._warm:
            return
        with self._lock:
            if not self._warm:
                warm_bootstrap(self.release, self.runs, self.seed)
                self._warm = True

    # -- describing ------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The entry of ``GET /api/releases``."""
        m = self.release.metadata
        return {
            "name": self.name,
            "kind": self.release.kind,
            "mechanism": m.mechanism,
            "epsilon": json_ready(m.epsilon),
            "delta": json_ready(m.delta),
            "neighbour": m.neighbour,
            "for_publication": m.for_publication,
            "release_id": m.release_id,
            "error_kind": self.error_kind,
        }

    def describe(self) -> dict[str, Any]:
        """``GET /api/releases/{name}``: manifest metadata, guarantee, schema and structure."""
        release = self.release
        m = release.metadata
        out: dict[str, Any] = {
            **self.summary(),
            "not_for_publication": publication_warning(m),
            "guarantee": _jsonable(
                {
                    "epsilon": json_ready(m.epsilon),
                    "delta": json_ready(m.delta),
                    "neighbour": m.neighbour,
                    "privacy_unit": m.privacy_unit,
                    "sensitivity": m.sensitivity,
                    "noise": m.noise,
                    "notes": m.report,
                }
            ),
            "metadata": _jsonable(m.to_dict()),
            "error_reason": self.error_reason,
            "bootstrap_runs": self.runs if self.bootstrap else None,
            "schema": None,
            "report": self.report_file() is not None,
        }
        if release.schema is not None:
            out["schema"] = {
                "attributes": [attribute_info(a) for a in release.schema.attributes],
            }
        out.update(release.explorer_view())
        return out

    def table_rows(self, cuboid: Sequence[str] | None, where: Mapping[str, Any]) -> int:
        """How many rows the labelled table of ``cuboid`` inside ``where`` has at most (before
        it is built: a service refuses a table too large to send)."""
        return self.release.table_size(None if cuboid is None else list(cuboid), where)

    # -- answering -------------------------------------------------------------------------------
    def resolve(self, queries: Sequence[Any]) -> Sequence[Mapping[str, Any]]:
        """The queries checked one by one (an error names ``queries[i]``) and, where the release
        has a schema, resolved to their boxes at once (:class:`QueryResolver`, handed on as
        :class:`dpcube.schema.BoxedQueries`: the release reads the box array and builds no
        query dict)."""
        if self.release.schema is None or any(has_set(q) for q in queries):
            # census queries, and sets of categories (sums of boxes the release splits itself)
            for i, query in enumerate(queries):
                if not isinstance(query, Mapping):
                    raise QueryError(f"queries[{i}] must be an object {{attribute: constraint}}")
            return list(queries)
        if not queries:
            return []
        if self._resolver is None:
            self._resolver = QueryResolver(self.release.schema)
        listed = list(queries)
        return BoxedQueries(self._resolver.boxes(listed), {}, listed.__getitem__)

    def uncertainty(self, queries: Sequence[Any], level: float) -> Any:
        """The release's :class:`dpcube.release.uncertainty.Uncertainty` for ``queries``."""
        resolved = self.resolve(queries)
        self.warm()
        runs = self.runs if self.bootstrap else None
        seed = self.seed if self.bootstrap else None
        try:
            if not self.bootstrap:
                return self.release.uncertainty(resolved, level=level, runs=runs, seed=seed)
            # bootstrap answers run in worker threads and share the cached replicates, whose
            # summed-area tables the uncertainty module may drop after a call: one at a time
            with self._answer_lock:
                return self.release.uncertainty(resolved, level=level, runs=runs, seed=seed)
        except (DPCubeError, TypeError, ValueError, KeyError, IndexError, OverflowError) as exc:
            # a query the release could not read (census queries are not resolved above): name
            # the first one that fails on its own; if none does, the error is re-raised as it is
            # (a DPCubeError is a 400, anything else a bug: a 500 logged on the server)
            self._locate_bad_query(resolved)
            raise exc from None

    def _locate_bad_query(self, queries: Sequence[Mapping[str, Any]]) -> None:
        """Raise a :class:`QueryError` naming the first query the release cannot answer alone."""
        for i, query in enumerate(queries):
            try:
                self.release.answer_many([query])
                self.release.variance_many([query])
            except DPCubeError as exc:
                raise QueryError(f"queries[{i}]: {exc}") from None
            except Exception as exc:
                raise QueryError(f"queries[{i}] could not be read: {exc}") from None

    def answer(self, queries: Sequence[Any], level: float) -> dict[str, Any]:
        """The answers with their intervals, as the JSON of ``POST .../answer``."""
        if not 0.0 < level < 1.0:
            raise UsageError(f"level must be a confidence level between 0 and 1, got {level}")
        u = self.uncertainty(queries, level)
        kind = str(u.kind)
        return {
            "answers": answers_json(u),
            "level": level,
            "error_kind": kind,
            "error_reason": u.reason,
            "bootstrap_runs": int(u.runs) if kind == "bootstrap" else None,
            "not_for_publication": publication_warning(self.release.metadata),
        }


def _report_paths(directory: Path) -> tuple[Path, ...]:
    """Where the HTML report of the release in ``directory`` may be, decided once at load: the
    plain file name the manifest gives (``report_html``/``report_file``), then ``report.html``.
    Requests never build a path."""
    import json

    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        manifest = {}
    names = [manifest.get(k) for k in REPORT_KEYS if isinstance(manifest.get(k), str)]
    paths: list[Path] = []
    for name in [*names, REPORT_HTML]:
        try:
            paths.append(_plain_file_name(directory, name, "report file"))
        except DPCubeError:
            continue
    return tuple(paths)


def load_served(
    release_dirs: Sequence[str | os.PathLike[str]], *, runs: int | None, seed: int | None
) -> dict[str, ServedRelease]:
    """Load every release directory once, keyed by folder name; duplicate names are refused."""
    if not release_dirs:
        raise UsageError("name at least one release directory to serve")
    served: dict[str, ServedRelease] = {}
    for directory in release_dirs:
        item = ServedRelease.load(directory, runs=runs, seed=seed)
        if item.name in served:
            raise UsageError(
                f"two releases are named {item.name!r} ({str(served[item.name].directory)!r} and "
                f"{str(item.directory)!r}); releases are served by folder name, rename one"
            )
        served[item.name] = item
    return served


__all__ = [
    "REPORT_HTML",
    "ServedRelease",
    "attribute_info",
    "load_served",
    "warm_bootstrap",
]
