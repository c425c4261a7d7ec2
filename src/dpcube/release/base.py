"""What a mechanism hands back: a :class:`Release`, and how releases live on disk.

A release answers queries from its noisy tables alone (never the raw data) and carries a
:class:`ReleaseMetadata` (mechanism, parameters, privacy guarantee, noise, provenance).

On disk a release is a directory::

    manifest.json                  what this is: kind, schema, metadata, table files, state
    <table>-<token>.parquet        the noisy tables
    report.md                      a short human-readable report (derived from the manifest)

:meth:`Release.save` is atomic: the tables go to new file names, then the manifest is replaced in
one ``os.replace`` (the commit point); then the report is written and the files of any earlier
release in the directory are removed. A crash at any point leaves either the earlier release or
the new one, whole (a crash right after the commit can leave the earlier report beside it; the
report names its release id).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from dpcube import registry
from dpcube.errors import ReleaseError
from dpcube.schema import Box, Schema

MANIFEST = "manifest.json"
REPORT = "report.md"
FORMAT_VERSION = 1


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
    release_id: str = field(default_factory=lambda: secrets.token_hex(16))
    created: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    )
    library_version: str = field(default_factory=_library_version)
    #: Notes on the guarantee (privacy unit, warnings); never a figure computed from the data
    #: (those go to :attr:`Release.curator_log`, which is not saved).
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def for_publication(self) -> bool:
        """False when the noise was seeded (reproducible) or switched off."""
        return not (self.seeded or self.noiseless)

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


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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

    # -- answering ---------------------------------------------------------------------------
    def boxes(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.int64]:
        """Queries as an int array of shape (q, axes, 2) of inclusive index intervals."""
        if self.schema is None:
            raise ReleaseError(f"a {self.kind!r} release has no schema to resolve queries against")
        schema = self.schema
        if len(queries) == 0:
            return np.zeros((0, len(schema.shape), 2), dtype=np.int64)
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
        ]
        if not m.for_publication:
            why = "noise switched off" if m.noiseless else "seeded randomness"
            lines.append(f"- **NOT FOR PUBLICATION** ({why}: the noise is reproducible)")
        for key, value in m.report.items():
            lines.append(f"- {key}: {json.dumps(_jsonable(value))}")
        return lines

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the release to ``directory`` atomically (see the module docstring)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(6)
        files: dict[str, str] = {}
        for name, table in self.tables().items():
            fname = f"{name}-{token}.parquet"
            tmp = out / f".{fname}.tmp"
            pq.write_table(table, tmp)
            os.replace(tmp, out / fname)
            files[name] = fname
        manifest = {
            "format": "dpcube-release",
            "format_version": FORMAT_VERSION,
            "kind": self.kind,
            "schema": self.schema.to_dict() if self.schema is not None else None,
            "metadata": self.metadata.to_dict(),
            "tables": files,
            "state": self.state(),
        }
        write_atomic(out / MANIFEST, json.dumps(_jsonable(manifest), indent=2).encode())
        write_atomic(out / REPORT, ("\n".join(self.report_lines()) + "\n").encode())
        keep = set(files.values()) | {MANIFEST, REPORT}
        for stale in out.glob("*.parquet"):
            if stale.name not in keep:
                stale.unlink(missing_ok=True)
        return out


def load_release(directory: str | os.PathLike[str]) -> Release:
    """Read a release written by :meth:`Release.save`."""
    d = Path(directory)
    try:
        manifest = json.loads((d / MANIFEST).read_text())
    except FileNotFoundError:
        raise ReleaseError(f"{str(d)!r} is not a dpcube release (no {MANIFEST})") from None
    except json.JSONDecodeError as exc:
        raise ReleaseError(f"{str(d / MANIFEST)!r} is not valid JSON: {exc}") from None
    if manifest.get("format") != "dpcube-release":
        raise ReleaseError(f"{str(d / MANIFEST)!r} is not a dpcube release manifest")
    try:
        cls = registry.resolve(registry.RELEASE_KINDS, manifest["kind"], "release kind")
    except KeyError as exc:
        raise ReleaseError(str(exc.args[0])) from None
    schema = Schema.from_dict(manifest["schema"]) if manifest.get("schema") else None
    tables = {name: pq.read_table(d / fname) for name, fname in manifest["tables"].items()}
    metadata = ReleaseMetadata.from_dict(manifest["metadata"])
    release: Release = cls.restore(schema, metadata, tables, manifest.get("state", {}))
    return release


def box_sizes(boxes: NDArray[np.int64]) -> NDArray[np.int64]:
    """Number of cells in each box of a (q, axes, 2) array."""
    return np.prod(boxes[:, :, 1] - boxes[:, :, 0] + 1, axis=1)


__all__ = ["Box", "Release", "ReleaseMetadata", "box_sizes", "load_release", "write_atomic"]
