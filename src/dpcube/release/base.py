"""What a mechanism hands back: a :class:`Release`, and how releases live on disk.

A release answers queries from its noisy tables alone (never the raw data) and carries a
:class:`ReleaseMetadata` (mechanism, parameters, privacy guarantee, noise, provenance).

On disk a release is a directory::

    manifest.json                  what this is: kind, schema, metadata, table files, state
    <table>-<token>.parquet        the noisy tables
    report.md                      a short human-readable report (derived from the manifest)
    report.html                    the HTML report (``dpcube report``; :mod:`dpcube.report`), if
                                   written: a function of the release alone, owned by it only
                                   when it carries dpcube's marker (:func:`is_dpcube_report`)

:meth:`Release.save` never destroys what it did not write (:func:`check_output_directory`): it
writes into a new or empty directory, or replaces an earlier dpcube release there (only with
``overwrite=True``), removing only the files that release's manifest lists. Any other file in the
directory is an error before anything is written. Saving is atomic: the tables are written under
temporary names (``.dpcube-tmp-*``, listed first in a pending journal), renamed to new file names,
then the manifest is replaced in one ``os.replace`` (the commit point); then the report is written
and the earlier release's tables are removed. A crash at any point leaves either the earlier
release or the new one, whole; the next save removes the leftovers its journal names.

The manifest records the format version and a SHA-256 of every table; :func:`load_release`
refuses an unknown format version, a table outside the directory and a table whose hash differs.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from dpcube import registry
from dpcube.errors import ReleaseError
from dpcube.schema import Box, BoxedQuery, Schema

MANIFEST = "manifest.json"
REPORT = "report.md"
#: The HTML report ``dpcube report`` writes into a release directory by default.
REPORT_HTML = "report.html"
#: The ``<meta>`` tag that marks an HTML file as written by ``dpcube report`` (first 4 KiB).
REPORT_HTML_MARKER = '<meta name="generator" content="dpcube report">'
#: Format 2 added the per-table SHA-256 (format 1 is refused: it cannot be verified).
FORMAT_VERSION = 2
#: Prefix of every temporary file a save writes; the next save into the directory removes them.
TEMP_PREFIX = ".dpcube-tmp-"


def _library_version() -> str:
    from dpcube import __version__

    return __version__


@dataclass
class ReleaseMetadata:
    """Provenance and guarantee of a release; written to the manifest."""

    mechanism: str
    params: dict[str, Any]
    epsilon: float
    delta: float | None
    neighbour: str
    sensitivity: dict[str, float] = field(default_factory=dict)
    noise: dict[str, Any] = field(default_factory=dict)
    seeded: bool = False
    noiseless: bool = False
    #: Whether the release was charged to a budget ledger (False: ``account=False``, or seeded).
    accounted: bool = True
    release_id: str = field(default_factory=lambda: os.urandom(16).hex())
    created: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    )
    library_version: str = field(default_factory=_library_version)
    #: Notes on the guarantee (privacy unit, warnings); never a figure computed from the data
    #: (those go to :attr:`Release.curator_log`, which is not saved).
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def for_publication(self) -> bool:
        """False when the noise was seeded (reproducible) or switched off, or nothing was charged."""
        return not (self.seeded or self.noiseless) and self.accounted

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["for_publication"] = self.for_publication
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReleaseMetadata:
        fields = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**fields)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return repr(x)
    return x


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename.

    The file gets the permissions a plain ``open`` would give (``0o666`` less the umask), not the
    ``0o600`` of :func:`tempfile.mkstemp`; the temporary name starts with :data:`TEMP_PREFIX`.
    """
    import tempfile  # here, not at the top: ``dpcube query`` writes nothing

    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _plain_file_name(directory: Path, name: Any, what: str) -> Path:
    """``directory / name`` for a bare file name that stays inside ``directory``; else an error."""
    bad = (
        not isinstance(name, str)
        or not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or os.path.isabs(name)
    )
    if bad:
        raise ReleaseError(
            f"{str(directory / MANIFEST)!r}: {what} {name!r} is not a plain file name inside the "
            "release directory (refusing to read or remove it)"
        )
    path = directory / name
    if path.resolve().parent != directory.resolve():
        raise ReleaseError(
            f"{str(directory / MANIFEST)!r}: {what} {name!r} resolves outside the release directory"
        )
    return path


def _read_manifest(directory: Path) -> dict[str, Any]:
    """The parsed manifest of the release in ``directory`` (errors name the file)."""
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReleaseError(f"{str(directory)!r} is not a dpcube release (no {MANIFEST})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReleaseError(f"{str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "dpcube-release":
        raise ReleaseError(f"{str(path)!r} is not a dpcube release manifest")
    if not isinstance(manifest.get("tables"), dict):
        raise ReleaseError(f"{str(path)!r}: 'tables' must map table names to file names")
    return manifest


def is_dpcube_report(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an HTML report ``dpcube report`` wrote (its head carries
    :data:`REPORT_HTML_MARKER`); False for a missing file or anyone else's.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a.html").write_text("<html><head>" + REPORT_HTML_MARKER + "</head></html>")
    >>> _ = (d / "b.html").write_text("<html>my notes</html>")
    >>> is_dpcube_report(d / "a.html"), is_dpcube_report(d / "b.html"), is_dpcube_report(d / "c")
    (True, False, False)
    """
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return REPORT_HTML_MARKER.encode() in head


def _owned_files(directory: Path, manifest: Mapping[str, Any]) -> set[str]:
    """Names of the files the release described by ``manifest`` owns in ``directory`` (its
    ``report.html`` only when ``dpcube report`` wrote it: a user's file of that name is not)."""
    tables = {
        _plain_file_name(directory, f, "table file").name for f in manifest["tables"].values()
    }
    html = {REPORT_HTML} if is_dpcube_report(directory / REPORT_HTML) else set()
    return tables | {MANIFEST, REPORT} | html


def check_output_directory(directory: str | os.PathLike[str], overwrite: bool = False) -> set[str]:
    """Refuse an output directory a release may not be saved into; return what saving may replace.

    Acceptable: a directory that does not exist yet but can be created, an empty directory, or one
    holding an earlier dpcube release (recognised by its manifest) and nothing else, which needs
    ``overwrite=True``. Leftover temporary files of an interrupted save (:data:`TEMP_PREFIX`) are
    ignored. Returns the names of the earlier release's files (empty when there is none). Pure:
    reads the file system, writes nothing. ``dpcube release`` calls it before charging the budget.
    """
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"--out {str(out)!r} is a file, not a directory; choose a new directory")
    if not out.exists():
        parent = out.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise ReleaseError(
                f"--out {str(out)!r} cannot be created ({str(parent)!r} is not a writable "
                "directory); choose another directory"
            )
        return set()
    if not os.access(out, os.W_OK | os.X_OK):
        raise ReleaseError(f"--out {str(out)!r} is not writable; choose another directory")
    entries = sorted(p.name for p in out.iterdir() if not p.name.startswith(TEMP_PREFIX))
    owned: set[str] = set()
    if MANIFEST in entries:
        try:
            manifest = _read_manifest(out)
        except ReleaseError as exc:
            raise ReleaseError(
                f"--out {str(out)!r} holds a {MANIFEST} that is not a dpcube release ({exc}); "
                "choose a new or empty directory"
            ) from None
        owned = _owned_files(out, manifest)
        if not overwrite:
            raise ReleaseError(
                f"--out {str(out)!r} already holds a dpcube release; pass --overwrite "
                "(overwrite=True) to replace it, or choose a new directory"
            )
    leftovers = _pending_tables(out)
    foreign = [name for name in entries if name not in owned and name not in leftovers]
    if foreign:
        raise ReleaseError(
            f"--out {str(out)!r} holds files that are not a dpcube release ({foreign[0]!r}"
            + (f" and {len(foreign) - 1} more" if len(foreign) > 1 else "")
            + "); choose a new or empty directory"
        )
    return owned


def _journal_name(token: str) -> str:
    return f"{TEMP_PREFIX}{token}.pending"


#: The file name :meth:`Release.save` gives a table: ``<table>-<12 hex digits>.parquet``.
_TABLE_FILE = re.compile(r"[A-Za-z0-9_]+-[0-9a-f]{12}\.parquet")


def _pending_tables(out: Path) -> set[str]:
    """Table files named by the pending journals of interrupted saves in ``out`` (never committed)."""
    names: set[str] = set()
    for journal in out.glob(f"{TEMP_PREFIX}*.pending"):
        try:
            listed = json.loads(journal.read_text())
        except (OSError, ValueError):
            continue
        for name in listed if isinstance(listed, list) else []:
            if not (isinstance(name, str) and _TABLE_FILE.fullmatch(name)):
                continue  # only names a save gives its tables: never a user's file
            try:
                names.add(_plain_file_name(out, name, "pending table file").name)
            except ReleaseError:
                continue
    return names


def _remove_leftovers(out: Path, keep: set[str]) -> None:
    """Remove what interrupted saves left in ``out``: their temporary files and the table files
    their pending journals list (except names in ``keep``, the committed release's)."""
    for name in _pending_tables(out) - keep:
        (out / name).unlink(missing_ok=True)
    for entry in out.iterdir():
        if entry.name.startswith(TEMP_PREFIX) and entry.is_file():
            entry.unlink(missing_ok=True)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Release(ABC):
    """The answer-giving result of a mechanism. Subclasses say how tables answer queries."""

    #: The ``kind`` written to the manifest (see :data:`dpcube.registry.RELEASE_KINDS`).
    kind: ClassVar[str]

    def __init__(self, schema: Schema | None, metadata: ReleaseMetadata) -> None:
        self.schema = schema
        self.metadata = metadata
        #: Exact figures of the input (rows read, counted, dropped, clipped, users bounded...)
        #: for the data curator: NOT private, never written by :meth:`save`, empty after
        #: :func:`load_release`. ``dpcube release --curator-log FILE`` writes it outside the release.
        self.curator_log: dict[str, Any] = {}
        #: Bootstrap replicates saved with the release (:mod:`dpcube.release.replicates`), set by
        #: :func:`dpcube.release.uncertainty.store_bootstrap` or by :func:`load_release`.
        self.stored_replicates: Any = None

    # -- answering ---------------------------------------------------------------------------
    def boxes(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.int64]:
        """Queries as an int array of shape (q, axes, 2) of inclusive index intervals."""
        if self.schema is None:
            raise ReleaseError(f"a {self.kind!r} release has no schema to resolve queries against")
        schema = self.schema
        if len(queries) == 0:
            return np.zeros((0, len(schema.shape), 2), dtype=np.int64)
        boxes = getattr(queries, "box_array", None)  # BoxedQueries: a table's rows, all at once
        if boxes is not None:
            return np.asarray(boxes, dtype=np.int64)
        if all(isinstance(q, BoxedQuery) for q in queries):  # a table's rows: resolved at once
            return np.stack([q.box_array for q in queries]).astype(np.int64)  # type: ignore[attr-defined]
        return np.array([schema.box(q) for q in queries], dtype=np.int64).reshape(
            len(queries), -1, 2
        )

    def answer(self, query: Mapping[str, Any]) -> float:
        """The released answer to one query."""
        return float(self.answer_many([query])[0])

    @abstractmethod
    def answer_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        """Released answers to many queries (vectorised)."""

    def variance(self, query: Mapping[str, Any]) -> float:
        """The exact noise variance of the answer to ``query`` (NaN where not known)."""
        return float(self.variance_many([query])[0])

    def variance_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        return np.full(len(queries), np.nan)

    def stddev(self, query: Mapping[str, Any]) -> float:
        return float(np.sqrt(self.variance(query)))

    # -- uncertainty and labelled tables (dpcube.release.uncertainty, dpcube.release.tables) ---
    def uncertainty(
        self,
        queries: Sequence[Mapping[str, Any]],
        *,
        level: float = 0.95,
        runs: int | None = None,
        seed: int | None = None,
        intervals: str = "trusted",
    ) -> Any:
        """The answers to ``queries`` with their error estimate and intervals at ``level``
        (an :class:`dpcube.release.uncertainty.Uncertainty`: exact, bound, bootstrap or none;
        ``intervals="model"`` asks for the model-based bootstrap, never trusted)."""
        from dpcube.release.uncertainty import answer_uncertainty

        return answer_uncertainty(
            self, queries, level=level, runs=runs, seed=seed, intervals=intervals
        )

    def intervals(
        self,
        queries: Sequence[Mapping[str, Any]],
        level: float = 0.95,
        *,
        runs: int | None = None,
        seed: int | None = None,
    ) -> NDArray[np.float64]:
        """Intervals ``[lower, upper]`` at ``level`` for many queries: an array of shape (q, 2)
        (NaN where the release has no error estimate; see :meth:`uncertainty`)."""
        u = self.uncertainty(queries, level=level, runs=runs, seed=seed)
        return np.stack([np.asarray(u.lower), np.asarray(u.upper)], axis=1).reshape(-1, 2)

    def interval(
        self,
        query: Mapping[str, Any],
        level: float = 0.95,
        *,
        runs: int | None = None,
        seed: int | None = None,
    ) -> tuple[float, float]:
        """The interval ``(lower, upper)`` at ``level`` of the answer to ``query``."""
        lower, upper = self.intervals([query], level, runs=runs, seed=seed)[0]
        return float(lower), float(upper)

    def table_cells(
        self, attributes: Sequence[str] | None = None, where: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], Sequence[Mapping[str, Any]]]:
        """The rows of this release's labelled table: label columns and one query per row.

        Default: every cell of the product of ``attributes`` (all of the schema's when None)
        inside ``where`` (:func:`dpcube.release.tables.grid_cells`). Releases whose rows are
        something else (spatial leaves, census regions x sizes) override it.
        """
        from dpcube.release.tables import grid_cells

        if self.schema is None:
            raise ReleaseError(f"a {self.kind!r} release has no schema to list its cells by")
        return grid_cells(self.schema, attributes, where)

    def to_arrow(
        self,
        level: float = 0.95,
        *,
        cuboid: Sequence[str] | str | None = None,
        runs: int | None = None,
        seed: int | None = None,
        intervals: str = "trusted",
    ) -> pa.Table:
        """One row per released cell (leaf, cuboid cell, region x size) with its labels,
        ``estimate``, ``stddev``, ``lower``, ``upper`` at ``level``, ``trusted``,
        ``interval_kind`` and ``interval_reason`` (see
        :func:`dpcube.release.tables.labelled_table`; ``intervals="model"``: the model-based
        bootstrap, never trusted)."""
        from dpcube.release.tables import labelled_table

        return labelled_table(
            self, level=level, cuboid=cuboid, runs=runs, seed=seed, intervals=intervals
        )

    def to_pandas(
        self,
        level: float = 0.95,
        *,
        cuboid: Sequence[str] | str | None = None,
        runs: int | None = None,
        seed: int | None = None,
        intervals: str = "trusted",
    ) -> Any:
        """:meth:`to_arrow` as a pandas DataFrame."""
        table = self.to_arrow(level, cuboid=cuboid, runs=runs, seed=seed, intervals=intervals)
        return table.to_pandas()

    def to_polars(
        self,
        level: float = 0.95,
        *,
        cuboid: Sequence[str] | str | None = None,
        runs: int | None = None,
        seed: int | None = None,
        intervals: str = "trusted",
    ) -> Any:
        """:meth:`to_arrow` as a Polars DataFrame."""
        import polars as pl

        table = self.to_arrow(level, cuboid=cuboid, runs=runs, seed=seed, intervals=intervals)
        return pl.from_arrow(table)

    # -- persistence -------------------------------------------------------------------------
    @abstractmethod
    def tables(self) -> dict[str, pa.Table]:
        """The noisy tables, as Arrow tables (written as Parquet)."""

    def state(self) -> dict[str, Any]:
        """Small JSON-able state needed besides the tables to rebuild the release."""
        return {}

    @classmethod
    @abstractmethod
    def restore(
        cls,
        schema: Schema | None,
        metadata: ReleaseMetadata,
        tables: dict[str, pa.Table],
        state: dict[str, Any],
    ) -> Release:
        """Rebuild a release from what :meth:`save` wrote."""

    def report_lines(self) -> list[str]:
        """Lines of the human-readable report (subclasses add their own)."""
        m = self.metadata
        lines = [
            f"# dpcube release {m.release_id}",
            "",
            f"- mechanism: `{m.mechanism}` {json.dumps(_jsonable(m.params))}",
            f"- privacy: epsilon = {m.epsilon}"
            + (f", delta = {m.delta}" if m.delta else "")
            + f", neighbour = {m.neighbour}",
            f"- sensitivity: {json.dumps(_jsonable(m.sensitivity))}",
            f"- noise: {json.dumps(_jsonable(m.noise))}",
            f"- created: {m.created} with dpcube {m.library_version}",
            f"- HTML report: {REPORT_HTML} (`dpcube report <this directory>` writes it)",
        ]
        if not m.for_publication:
            why = "noise switched off" if m.noiseless else "seeded randomness"
            lines.append(f"- **NOT FOR PUBLICATION** ({why}: the noise is reproducible)")
        for key, value in m.report.items():
            lines.append(f"- {key}: {json.dumps(_jsonable(value))}")
        return lines

    def save(self, directory: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the release to ``directory`` atomically (see the module docstring).

        ``directory`` must be new, empty, or hold an earlier dpcube release (replaced only with
        ``overwrite=True``): see :func:`check_output_directory`.
        """
        import pyarrow.parquet as pq  # writing only: see read_parquet_bytes

        out = Path(directory)
        earlier = check_output_directory(out, overwrite)
        out.mkdir(parents=True, exist_ok=True)
        _remove_leftovers(out, keep=earlier)
        token = os.urandom(6).hex()
        tables = self.tables()
        stored = getattr(self, "stored_replicates", None)
        if stored is not None:  # post-processing of this release: see dpcube.release.replicates
            tables = {**tables, **stored.packed}
        files = {name: f"{name}-{token}.parquet" for name in tables}
        for fname in files.values():
            _plain_file_name(out, fname, "table file")
        journal = out / _journal_name(token)
        write_atomic(journal, json.dumps(sorted(files.values())).encode())
        hashes: dict[str, str] = {}
        for name, table in tables.items():
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink)
            data = sink.getvalue().to_pybytes()
            hashes[name] = _sha256(data)
            write_atomic(out / files[name], data)
        manifest = {
            "format": "dpcube-release",
            "format_version": FORMAT_VERSION,
            "kind": self.kind,
            "schema": self.schema.to_dict() if self.schema is not None else None,
            "metadata": self.metadata.to_dict(),
            "tables": files,
            "sha256": hashes,
            "state": self.state(),
        }
        if stored is not None:
            manifest["bootstrap"] = stored.manifest_entry()
        write_atomic(out / MANIFEST, json.dumps(_jsonable(manifest), indent=2).encode())
        journal.unlink(missing_ok=True)
        write_atomic(out / REPORT, ("\n".join(self.report_lines()) + "\n").encode())
        for stale in earlier - set(files.values()) - {MANIFEST, REPORT}:
            (out / stale).unlink(missing_ok=True)
        return out


def publication_warning(metadata: ReleaseMetadata) -> str | None:
    """One line saying why a release is NOT FOR PUBLICATION, or None when it may be published.

    Every reason a release is not for publication is one entry of ``reasons`` below.
    """
    if metadata.for_publication:
        return None
    reasons = [
        ("noise switched off", metadata.noiseless),
        ("seeded randomness: the noise is reproducible", metadata.seeded),
        ("budget not accounted", getattr(metadata, "accounted", True) is False),
    ]
    why = "; ".join(text for text, applies in reasons if applies) or "see its manifest"
    return f"warning: this release is NOT FOR PUBLICATION ({why})"


def load_release(directory: str | os.PathLike[str]) -> Release:
    """Read and verify a release written by :meth:`Release.save`.

    Refuses a manifest of another format version, a table file that is not a plain name inside
    the directory, and a table whose SHA-256 differs from the one the manifest records.
    """
    d = Path(directory)
    manifest = _read_manifest(d)
    where = str(d / MANIFEST)
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise ReleaseError(
            f"{where!r} has format_version {version!r}; this dpcube {_library_version()} reads "
            f"version {FORMAT_VERSION} only (re-run the release with this version)"
        )
    try:
        cls = registry.resolve(registry.RELEASE_KINDS, manifest["kind"], "release kind")
    except KeyError as exc:
        raise ReleaseError(str(exc.args[0])) from None
    hashes = manifest.get("sha256")
    if not isinstance(hashes, dict):
        raise ReleaseError(f"{where!r} records no 'sha256' of its tables")
    tables: dict[str, pa.Table] = {}
    for name, fname in manifest["tables"].items():
        path = _plain_file_name(d, fname, "table file")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ReleaseError(f"table file {str(path)!r} cannot be read: {exc.strerror}") from None
        if hashes.get(name) != _sha256(data):
            raise ReleaseError(
                f"table file {str(path)!r} does not match the SHA-256 in {where!r}: it was "
                "modified or corrupted; do not use this release"
            )
        tables[name] = read_parquet_bytes(data)
    schema = Schema.from_dict(manifest["schema"]) if manifest.get("schema") else None
    metadata = ReleaseMetadata.from_dict(manifest["metadata"])
    entry = manifest.get("bootstrap")
    packed = {n: tables.pop(n) for n in list(tables) if n.startswith("bootstrap.")}
    release: Release = cls.restore(schema, metadata, tables, manifest.get("state", {}))
    if entry is not None:
        from dpcube.release.replicates import StoredReplicates

        stored = StoredReplicates.from_saved(entry, packed, where)
        # replicates drawn in another version of the bootstrap world are ignored (recomputed)
        release.stored_replicates = stored if stored.matches(release) else None
    elif packed:
        raise ReleaseError(f"{where!r} lists bootstrap tables but no 'bootstrap' entry")
    return release


def read_parquet_bytes(data: bytes) -> pa.Table:
    """The table in the Parquet file ``data``.

    Read with pyarrow's Parquet reader itself (``pyarrow._parquet.ParquetReader``, what
    ``pyarrow.parquet.ParquetFile.read`` calls): the public ``pyarrow.parquet`` module also imports
    ``pyarrow.fs`` (S3, SSL), about 30 ms of every ``dpcube query``, and ``read_table`` imports
    ``pyarrow.dataset`` and pandas. Falls back to ``pyarrow.parquet`` if that internal API moves.

    >>> import pyarrow.parquet as pq
    >>> sink = pa.BufferOutputStream()
    >>> pq.write_table(pa.table({"a": [1, 2]}), sink)
    >>> read_parquet_bytes(sink.getvalue().to_pybytes()).column("a").to_pylist()
    [1, 2]
    """
    try:
        from pyarrow._parquet import ParquetReader

        reader = ParquetReader()
        reader.open(pa.BufferReader(data))
        table: pa.Table = reader.read_all()
        return table
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - another pyarrow
        import pyarrow.parquet as pq

        fallback: pa.Table = pq.ParquetFile(pa.BufferReader(data)).read()
        return fallback


#: Arrow primitive type names whose numpy dtype has another name.
_NUMPY_DTYPE = {"double": "float64", "float": "float32", "halffloat": "float16"}


def column_numpy(table: pa.Table, column: str | int) -> NDArray[Any]:
    """A numeric column of an Arrow table as a numpy array.

    Read from the column's data buffer where it is a primitive type without nulls: pyarrow's own
    ``to_numpy`` imports pandas (half a second of ``dpcube query``'s start-up).

    >>> column_numpy(pa.table({"a": pa.array([1, 2, 3])}).slice(1), "a").tolist()
    [2, 3]
    """
    array = table.column(column).combine_chunks()
    name = str(array.type)
    dtype = _NUMPY_DTYPE.get(name, name)
    if (
        array.null_count == 0
        and (pa.types.is_integer(array.type) or pa.types.is_floating(array.type))
        and len(array.buffers()) == 2
    ):
        np_dtype = np.dtype(dtype)
        data = array.buffers()[1]
        if data is None:
            return np.zeros(0, dtype=np_dtype)
        return np.frombuffer(
            data, dtype=np_dtype, count=len(array), offset=array.offset * np_dtype.itemsize
        ).copy()
    return np.asarray(array.to_numpy(zero_copy_only=False))


def box_sizes(boxes: NDArray[np.int64]) -> NDArray[np.int64]:
    """Number of cells in each box of a (q, axes, 2) array."""
    return np.prod(boxes[:, :, 1] - boxes[:, :, 0] + 1, axis=1)


__all__ = [
    "Box",
    "Release",
    "ReleaseMetadata",
    "box_sizes",
    "check_output_directory",
    "column_numpy",
    "is_dpcube_report",
    "load_release",
    "publication_warning",
    "read_parquet_bytes",
    "write_atomic",
]
