"""What a mechanism hands back: a :class:`Release`, and how releases live on disk.

A release answers queries from its noisy tables alone (never the raw data) and carries a
:class:`ReleaseMetadata` (mechanism, parameters, privacy guarantee, noise, provenance).

On disk a release is a directory::

    manifest.json                  what this is: kind, schema, metadata, table files, state
    <table>-<token>.parquet        the noisy tables
    report.md                      a short human-readable report (derived from the manifest)
    report.html                    the HTML report (``dpcube report``; :mod:`dpcube.report`), if
                                   written: a function of the release alone, owned by it only
                                   when it carries dpcube's mark (:func:`is_dpcube_report`)

:meth:`Release.save` never destroys what it did not write (:func:`check_output_directory`): it
writes into a new or empty directory, or replaces an earlier dpcube release there (only with
``overwrite=True``). It knows its own files by a mark it can check, never by a name or a list a
user can edit (:mod:`dpcube.release.marks`): the manifest records, for itself, each table and
``report.md``, a keyed hash (HMAC under a per-user key in ``$DPCUBE_HOME``) of the file's name and
content, and a file is replaced or removed only when the hash recomputed from the file on disk
matches. Any other file in the directory is an error before anything is written, and is never
touched. Saving is atomic: a pending journal (``.dpcube-tmp-<token>.pending``, itself carrying a
keyed hash) records the save's random token and table names first; the tables are written under
temporary names carrying that token, renamed, then the manifest is replaced in one ``os.replace``
(the commit point); then the report is written, the earlier release's tables are removed, and the
journal last. A crash at any point leaves either the earlier release or the new one, whole; the
next save removes the leftovers a journal that verifies names.

The manifest records the format version, each table's SHA-256 and size, and ``integrity``: the
SHA-256 of the canonical JSON of every other field (schema, state, metadata, parameters, variance
model, table hashes). :func:`load_release` verifies the whole: it refuses an unknown format
version, a table outside the directory, a field that differs from what was saved (naming it), a
table that is not a regular file or whose size or hash differs (the size before reading, the hash
while streaming), and tables that do not fit the schema. The hashes carry no key: they catch
damage and casual edits, not someone who rewrites a table and recomputes every hash.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from dpcube import registry
from dpcube.errors import DPCubeError, QueryError, ReleaseError
from dpcube.files import TEMP_PREFIX, write_atomic
from dpcube.release.columns import column_numpy
from dpcube.release.guarantee import guarantee_markdown
from dpcube.release.marks import (
    file_key,
    file_sha256,
    mark,
    mark_json,
    open_regular,
    owned_by_dpcube,
    read_regular_file,
    written_sha256,
)
from dpcube.release.metadata import ReleaseMetadata, _library_version
from dpcube.release.views import ReportPart
from dpcube.schema import Box, BoxedQueries, BoxedQuery, Interval, Schema, has_set

MANIFEST = "manifest.json"
REPORT = "report.md"
#: The HTML report ``dpcube report`` writes into a release directory by default.
REPORT_HTML = "report.html"
#: The ``<meta>`` tag that marks an HTML file as written by ``dpcube report`` (first 4 KiB).
REPORT_HTML_MARKER = '<meta name="generator" content="dpcube report">'
#: Format 2 added the per-table SHA-256; format 3 the sizes, the marks of dpcube's files and the
#: ``integrity`` of every field of the manifest.
FORMAT_VERSION = 3
#: Formats written by earlier versions: refused with how to re-create the release.
OLDER_FORMATS = (1, 2)
#: The most bytes read of a manifest, and of a pending journal.
MANIFEST_LIMIT = 256 << 20
JOURNAL_LIMIT = 1 << 20
#: The most bytes hashed of a file to see whether it carries dpcube's mark.
OWNED_LIMIT = 1 << 40


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
    """The parsed manifest of the release in ``directory`` (errors name the file).

    Read as a regular file only, at most :data:`MANIFEST_LIMIT` bytes (:mod:`dpcube.release.marks`).
    """
    path = directory / MANIFEST
    if not os.path.lexists(path):
        raise ReleaseError(f"{str(directory)!r} is not a dpcube release (no {MANIFEST})")
    data, _ = read_regular_file(path, MANIFEST_LIMIT, what="manifest")
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReleaseError(f"{str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "dpcube-release":
        raise ReleaseError(f"{str(path)!r} is not a dpcube release manifest")
    if not isinstance(manifest.get("tables"), dict):
        raise ReleaseError(f"{str(path)!r}: 'tables' must map table names to file names")
    return manifest


def is_dpcube_report(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an HTML report ``dpcube report`` wrote there, unchanged since: it
    carries the keyed mark recorded when it was written (:func:`dpcube.release.marks.
    remember_written`) and :data:`REPORT_HTML_MARKER` in its head. False for a missing file or
    anyone else's, whatever its content (the ``<meta>`` tag alone is not proof: anyone can
    write it).

    >>> import os, tempfile; os.environ["DPCUBE_HOME"] = tempfile.mkdtemp()
    >>> from dpcube.release.marks import remember_written
    >>> d = Path(tempfile.mkdtemp()); page = "<html><head>" + REPORT_HTML_MARKER + "</head></html>"
    >>> _ = (d / "a.html").write_text(page); _ = (d / "b.html").write_text(page)
    >>> remember_written(d / "a.html", _sha256(page.encode()))
    >>> is_dpcube_report(d / "a.html"), is_dpcube_report(d / "b.html"), is_dpcube_report(d / "c")
    (True, False, False)
    """
    path = Path(path)
    try:
        fd, _ = open_regular(path, "report")
    except ReleaseError:
        return False
    with os.fdopen(fd, "rb") as f:
        os.set_blocking(fd, True)
        head = f.read(4096)
    return REPORT_HTML_MARKER.encode() in head and written_sha256(path) is not None


def _canonical(value: Any) -> bytes:
    """The canonical JSON of a manifest value: sorted keys, no spaces, ASCII."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def manifest_integrity(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The SHA-256 of the canonical JSON of every field of ``manifest`` but ``integrity`` itself
    (the tables' own SHA-256 and sizes are fields, so the tables are covered too)."""
    return {k: _sha256(_canonical(v)) for k, v in manifest.items() if k != "integrity"}


def _check_integrity(manifest: Mapping[str, Any], where: str) -> None:
    """Refuse a manifest whose fields differ from what :meth:`Release.save` wrote, naming the
    first field that does."""
    recorded = manifest.get("integrity")
    if not isinstance(recorded, dict):
        raise ReleaseError(f"{where!r} records no 'integrity'; it was not written by dpcube")
    actual = manifest_integrity(manifest)
    for name in sorted(set(actual) | set(recorded)):
        if name not in recorded:
            raise ReleaseError(
                f"{where!r}: field {name!r} is not covered by 'integrity' (added after the "
                "save); the manifest was edited; do not use this release"
            )
        if name not in actual:
            raise ReleaseError(
                f"{where!r}: field {name!r} was removed (it is recorded in 'integrity'); the "
                "manifest was edited; do not use this release"
            )
        if recorded[name] != actual[name]:  # no secret here: a plain comparison
            raise ReleaseError(
                f"{where!r}: field {name!r} does not match its SHA-256 in 'integrity': the "
                "manifest was edited or damaged; do not use this release"
            )


def _manifest_mark(manifest: Mapping[str, Any], key: bytes) -> str:
    """The keyed mark of a manifest: of every field but ``integrity`` and the mark itself
    (``marks["manifest.json"]``), so an edited manifest is no longer dpcube's to replace."""
    body = {k: v for k, v in manifest.items() if k != "integrity"}
    marks = body.get("marks")
    if isinstance(marks, dict):
        body["marks"] = {n: m for n, m in marks.items() if n != MANIFEST}
    return mark_json(MANIFEST, body, key)


def _journal_name(token: str) -> str:
    return f"{TEMP_PREFIX}{token}.pending"


@dataclass
class _Survey:
    """What an output directory holds, by whose files they are (see :func:`_survey`)."""

    #: Files of the committed release there that verify as dpcube's (manifest, tables, reports).
    owned: set[str]
    #: Files of interrupted saves named by a pending journal that verifies (and the journals).
    leftovers: set[str]
    #: Everything else: never removed nor replaced.
    foreign: list[str]
    #: Whether the directory holds a dpcube release manifest.
    has_release: bool
    #: The format version of that manifest (None when there is none).
    version: Any = None


def _verified_journal(path: Path, key: bytes) -> dict[str, Any] | None:
    """The body of the pending journal ``path`` when its mark verifies, else None."""
    try:
        data, _ = read_regular_file(path, JOURNAL_LIMIT, what="pending journal")
        doc = json.loads(data.decode("utf-8"))
    except (ReleaseError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("mark"), str):
        return None
    body = doc.get("journal")
    if not isinstance(body, dict) or not hmac.compare_digest(
        doc["mark"].encode("utf-8", "replace"), mark_json(path.name, body, key).encode()
    ):
        return None
    token, tables = body.get("token"), body.get("tables")
    if not (isinstance(token, str) and re.fullmatch(r"[0-9a-f]{32}", token)):
        return None
    if not (isinstance(tables, list) and all(isinstance(t, str) for t in tables)):
        return None
    if path.name != _journal_name(token):
        return None
    return body


def _survey(out: Path) -> _Survey:
    """Sort the entries of the existing directory ``out`` into dpcube's and anyone else's.

    A file is dpcube's only by a mark it can check (:mod:`dpcube.release.marks`): a table or
    report whose keyed hash of name and content matches the one the manifest records, a pending
    journal whose keyed hash verifies and the files it names (temporary files carrying its random
    token, table files it listed), and the manifest itself when it is a dpcube manifest. A name,
    a prefix or a list a user can edit never makes a file dpcube's.
    """
    entries = sorted(p.name for p in out.iterdir())
    journals = [n for n in entries if n.startswith(TEMP_PREFIX) and n.endswith(".pending")]
    # The key is needed (and created) only when there is something to verify.
    key = file_key() if journals or MANIFEST in entries else b""
    leftovers: set[str] = set()
    for name in journals:
        body = _verified_journal(out / name, key)
        if body is None:
            continue
        leftovers.add(name)
        token_prefix = f"{TEMP_PREFIX}{body['token']}-"
        leftovers.update(n for n in entries if n.startswith(token_prefix))
        leftovers.update(n for n in body["tables"] if n in entries and f"-{body['token']}." in n)
        replaced = body.get("replaces")
        for n, recorded in (replaced if isinstance(replaced, dict) else {}).items():
            if (
                n in entries
                and n != MANIFEST
                and owned_by_dpcube(out / n, recorded, OWNED_LIMIT, key)
            ):
                leftovers.add(n)
    owned: set[str] = set()
    has_release = MANIFEST in entries
    if has_release:
        manifest = _read_manifest(out)
        marks = manifest.get("marks")
        marks = marks if isinstance(marks, dict) else {}
        recorded = marks.get(MANIFEST)
        if isinstance(recorded, str) and hmac.compare_digest(
            recorded.encode("utf-8", "replace"), _manifest_mark(manifest, key).encode()
        ):
            owned.add(MANIFEST)
        for name in entries:
            if name in marks and owned_by_dpcube(out / name, marks[name], OWNED_LIMIT, key):
                owned.add(name)
        if REPORT_HTML in entries and is_dpcube_report(out / REPORT_HTML):
            owned.add(REPORT_HTML)
    foreign = [n for n in entries if n not in owned and n not in leftovers]
    version = manifest.get("format_version") if has_release else None
    return _Survey(owned, leftovers - owned, foreign, has_release, version)


def check_output_directory(directory: str | os.PathLike[str], overwrite: bool = False) -> set[str]:
    """Refuse an output directory a release may not be saved into; return what saving may replace.

    Acceptable: a directory that does not exist yet but can be created, an empty directory, or one
    holding an earlier dpcube release and nothing else, which needs ``overwrite=True``. The earlier
    release's files and the leftovers of dpcube's own interrupted saves are recognised by their
    marks (:func:`_survey`); any other file, whatever its name, is refused, named, and never
    touched. Returns the names of the earlier release's files (empty when there is none). Reads
    the file system and writes nothing there (it may create dpcube's key under
    ``$DPCUBE_HOME``). ``dpcube release`` calls it before charging the budget.
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
    survey = _checked_survey(out, overwrite)
    return survey.owned if survey is not None else set()


def _checked_survey(out: Path, overwrite: bool) -> _Survey | None:
    """:func:`_survey` of the existing directory ``out`` when a release may be saved there (None
    when it does not exist); else the refusal of :func:`check_output_directory`."""
    if not out.exists():
        return None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ReleaseError(f"--out {str(out)!r} is not writable; choose another directory")
    try:
        survey = _survey(out)
    except ReleaseError as exc:
        raise ReleaseError(
            f"--out {str(out)!r} holds a {MANIFEST} that is not a dpcube release ({exc}); "
            "choose a new or empty directory"
        ) from None
    if survey.has_release and not overwrite:
        raise ReleaseError(
            f"--out {str(out)!r} already holds a dpcube release; pass --overwrite "
            "(overwrite=True) to replace it, or choose a new directory"
        )
    if survey.foreign and survey.version in OLDER_FORMATS:
        raise ReleaseError(
            f"--out {str(out)!r} holds a release written by an earlier dpcube (format_version "
            f"{survey.version}) whose files carry no mark dpcube can check ({survey.foreign[0]!r}); "
            "remove that release yourself or choose a new directory"
        )
    if survey.foreign:
        foreign = survey.foreign
        raise ReleaseError(
            f"--out {str(out)!r} holds files that are not a dpcube release ({foreign[0]!r}"
            + (f" and {len(foreign) - 1} more" if len(foreign) > 1 else "")
            + "); dpcube replaces or removes only files carrying its own mark under this "
            "DPCUBE_HOME: choose a new or empty directory, or move them away"
        )
    return survey


def _remove_leftovers(out: Path, leftovers: set[str], keep: set[str]) -> None:
    """Remove what dpcube's own interrupted saves left in ``out`` (verified by :func:`_survey`),
    except the files of the committed release (``keep``); pending journals last."""
    for name in sorted(leftovers - keep, key=lambda n: n.endswith(".pending")):
        path = out / name
        if path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class SetParts:
    """Queries some of which select sets of categories (``{"attr": {"in": [...]}}``), each as
    the disjoint queries whose answers it sums (:meth:`Release.set_parts`).

    A set query is one linear query: its answer is the sum of its parts' answers, but its
    variance is *not* the sum of theirs where their noises are correlated; each kind's
    ``variance_many`` and bound work it out from the whole selection (``selections``).
    """

    #: The parts of every query, one query after another (a query without a set is one part).
    parts: Sequence[Mapping[str, Any]]
    #: The index in ``parts`` of each query's first part.
    starts: NDArray[np.intp]
    #: Per query, the cells it selects as disjoint intervals per axis (their product);
    #: None for a kind without a schema (census regions).
    selections: tuple[tuple[tuple[Interval, ...], ...], ...] | None = None

    def sum(self, values: Any) -> NDArray[np.float64]:
        """Each query's total of ``values`` (one per part; (runs, parts) gives (runs, q))."""
        return np.add.reduceat(np.asarray(values, dtype=np.float64), self.starts, axis=-1)

    def owners(self) -> NDArray[np.intp]:
        """The query each part belongs to."""
        counts = np.diff(np.append(self.starts, len(self.parts)))
        return np.repeat(np.arange(len(self.starts)), counts)


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

    def set_parts(self, queries: Sequence[Mapping[str, Any]]) -> SetParts | None:
        """``queries`` as the disjoint boxes they sum (:class:`SetParts`) when one of them
        selects a set of categories; None when none does (each query is then one box). A
        hierarchy node in a set counts as its leaves; a set naming a category twice is refused
        (:meth:`dpcube.schema.Nominal.members`)."""
        import itertools

        if isinstance(queries, BoxedQueries) or not any(has_set(q) for q in queries):
            return None
        if self.schema is None:
            raise QueryError(f"a {self.kind!r} release answers no set of categories")
        parts: list[BoxedQuery] = []
        starts: list[int] = []
        selections = []
        for i, query in enumerate(queries):
            try:
                runs = self.schema.box_set(query)
            except DPCubeError as exc:
                if len(queries) == 1:
                    raise
                raise QueryError(f"queries[{i}]: {exc}") from None
            starts.append(len(parts))
            selections.append(runs)
            parts.extend(
                BoxedQuery(query, np.array(box, dtype=np.int64)) for box in itertools.product(*runs)
            )
        return SetParts(parts, np.array(starts, dtype=np.intp), tuple(selections))

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

    # -- what the uncertainty of the answers rests on (dpcube.release.uncertainty) -------------
    # Each hook has a default that says "this kind has none"; a kind overrides the ones it has.
    # :func:`dpcube.release.uncertainty.answer_uncertainty` calls them directly.

    #: What a bound interval of this kind rests on, for the reason line a user reads; None (the
    #: default): the kind has no interval valid on any data (:meth:`bound_interval_many`).
    #: Spatial leaf releases and census releases set it.
    bound_reason: ClassVar[str | None] = None
    #: Why this kind's answers need a bootstrap (the reason line of a ``model`` interval).
    #: Kinds with a bootstrap whose estimate is not linear in the noise say why.
    bootstrap_reason: ClassVar[str] = "the estimate is not linear in the noise"

    @property
    def linear_unbiased(self) -> bool:
        """Whether the answers are linear in the noise and unbiased, so that
        :meth:`variance_many` is the exact error variance (``exact`` intervals). False by
        default; cell releases with a variance model and data cubes without clamping, rounding
        or L1/L-infinity consistency say True."""
        return False

    @property
    def bound_unavailable(self) -> str | None:
        """Why :meth:`bound_interval_many` cannot be used on this release, None where it can.
        Only read where :attr:`bound_reason` is set; a kind with bounds overrides it with what
        its proof needs (e.g. each leaf count its own discrete Laplace draw)."""
        return f"a {self.kind!r} release has no interval valid on any data"

    def bound_interval_many(
        self, queries: Sequence[Mapping[str, Any]], level: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], list[str]]:
        """``(lower, upper, reasons)``: for each query an interval at ``level`` that covers the
        true answer whatever the data (``bound`` intervals), with its one-line reason. The
        default refuses: a kind that sets :attr:`bound_reason` overrides it."""
        raise ReleaseError(f"no bound interval for this release: {self.bound_unavailable}")

    @property
    def bootstrap_unavailable(self) -> str | None:
        """Why this release has no parametric bootstrap (:meth:`bootstrap_world`), None where
        it has one. The default: none (the reason then reads in the ``none`` interval's line).
        Kinds with a bootstrap return None, or why this release cannot have one."""
        return "it has no exact variance and no bootstrap"

    def bootstrap_world(self) -> Any:
        """The parametric bootstrap's world (:class:`dpcube.release.uncertainty.BootstrapWorld`:
        the truth, a release built from this one, and a way to re-run the mechanism on it).
        Kinds whose :attr:`bootstrap_unavailable` can be None override it; the default
        refuses."""
        raise ReleaseError(
            f"a {self.kind!r} release of {self.metadata.mechanism!r} has no bootstrap "
            f"({self.bootstrap_unavailable})"
        )

    @property
    def bootstrap_world_version(self) -> str | None:
        """The version of this kind's bootstrap world, recorded with stored replicates so that
        replicates drawn in another world are recomputed rather than mixed with this one's
        truth; None (the default): the kind's world has one version. Spatial leaf releases,
        whose world changed, say which."""
        return None

    def uniformity_widening(
        self, queries: Sequence[Mapping[str, Any]], kappa: float
    ) -> tuple[NDArray[np.float64] | None, NDArray[np.float64] | None, str | None]:
        """``(extra, modelled, note)``: a variance added in quadrature to each bootstrap interval
        for an error the bootstrap cannot see (None: not widened), the modelled variance of that
        error (None: none), and what the reason line says of it. The default: no widening;
        spatial leaf releases override it for the uniformity assumption inside their leaves."""
        return None, None, None

    def assumed_many(self, queries: Sequence[Mapping[str, Any]]) -> NDArray[np.float64] | None:
        """The part of each answer resting on an assumption the bootstrap cannot see, or None
        where it does not apply (the default). Spatial leaf releases give the part spread into
        the query by the uniformity assumption."""
        return None

    def parsed(self, queries: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
        """``queries`` resolved once into what this kind answers from, as a sequence of the same
        queries that every release of this kind (its bootstrap replicates too) answers without
        parsing them again. The default: their boxes in the schema
        (:class:`~dpcube.schema.BoxedQueries`); a kind without a schema returns them as given
        unless it overrides this (census releases: region and size range)."""
        if self.schema is None or isinstance(queries, BoxedQueries):
            return queries
        if self.set_parts(queries) is not None:  # sums of boxes: each kind splits them itself
            return queries
        boxes = self.boxes(queries)
        listed = list(queries)
        return BoxedQueries(boxes, {}, lambda k: listed[k])

    def replicate_answers(
        self,
        replicates: Sequence[Release],
        queries: Sequence[Mapping[str, Any]],
        keep_bytes: int = 0,
    ) -> NDArray[np.float64]:
        """The (runs, q) answers of ``replicates`` (re-runs of this release's mechanism, releases
        of this kind) to ``queries`` (:meth:`parsed`). The replicates keep what speeds up the
        next call (summed-area tables) only while it all fits in ``keep_bytes``: a service
        answering many calls from one release then sums boxes instead of rebuilding a table per
        replicate and call. The default answers replicate by replicate; a kind that can answer
        every replicate in one vectorised pass overrides it (spatial leaf releases, census
        releases)."""
        out = np.empty((len(replicates), len(queries)))
        budget = keep_bytes // max(len(replicates), 1)
        for b, rep in enumerate(replicates):
            out[b] = np.asarray(rep.answer_many(queries), dtype=np.float64)
            rep.trim_cache(budget)
        return out

    def packed_replicate_answers(
        self, packed: Mapping[str, pa.Table], runs: int, queries: Sequence[Mapping[str, Any]]
    ) -> NDArray[np.float64] | None:
        """The (runs, q) answers of bootstrap replicates stored with the release, from their
        packed tables (:mod:`dpcube.release.replicates`: each table of every replicate one after
        another, numbered by ``_replicate``) without restoring them one by one; None (the
        default) where the kind has no such pass: the replicates are then restored and answered
        by :meth:`replicate_answers`."""
        return None

    def trim_cache(self, max_bytes: int) -> None:
        """Drop what this release keeps between calls to answer faster (a summed-area table) if
        it takes more than ``max_bytes``; the default keeps nothing."""
        return None

    # -- whole numbers (dpcube.release.integer) ------------------------------------------------
    @property
    def integer_unavailable(self) -> str | None:
        """Why :meth:`to_integer` cannot make this release whole, None where it can. The
        default: this kind has no integer post-processing; each kind that has one overrides
        both."""
        return f"a {self.kind!r} release has no whole-number post-processing"

    def to_integer(self) -> Release:
        """A new release of this kind whose figures are non-negative whole numbers, every
        released aggregate the sum of its parts (:mod:`dpcube.release.integer`: TopDown's
        non-negative fit and controlled rounding). Post-processing of the released figures:
        nothing is charged. The default refuses with :attr:`integer_unavailable`."""
        raise ReleaseError(f"no whole-number release: {self.integer_unavailable}")

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

    def table_cuboid(self, cuboid: Sequence[str] | None) -> list[str] | None:
        """The attributes of the labelled table asked for as ``cuboid``, checked (None: the
        release's own rows). A release has one table: naming a cuboid is refused; a data-cube
        release overrides it."""
        if cuboid is not None:
            raise QueryError(
                f"cuboid= applies to data-cube releases; this is a {self.kind!r} release"
            )
        return None

    def export_tables(self) -> list[list[str] | None]:
        """The tables ``dpcube export`` writes when no cuboid is named, each as
        :meth:`table_cuboid` takes it: ``[None]``, the release's one table."""
        return [None]

    def table_size(self, cuboid: Sequence[str] | None, where: Mapping[str, Any]) -> int:
        """How many rows the labelled table of ``cuboid`` inside ``where`` has at most, worked
        out before it is built (a service refuses a table too large to send): the product of
        the bins ``where`` leaves to the table's attributes (all of the schema's when None)."""
        schema = self.schema
        if schema is None:
            return 0
        runs = schema.box_set(where)
        rows = 1
        for name in schema.names if cuboid is None else cuboid:
            if name in schema.names:
                rows *= math.prod(
                    sum(hi - lo + 1 for lo, hi in axis) for axis in runs[schema.axis_slice(name)]
                )
        return rows

    def explorer_view(self) -> dict[str, Any]:
        """What a query page needs to know of this release beyond its schema, as JSON values
        (``GET /api/releases/{name}`` adds it to the description): ``{}`` here; a data cube
        lists its ``cuboids``, a census release its region ``hierarchy`` (the page then asks
        for a region and a size rather than attributes), a spatial one its ``bounds``."""
        return {}

    def report_parts(self, max_rows: int) -> tuple[ReportPart, ...]:
        """What the HTML report shows of this release, in order (:mod:`dpcube.release.views`):
        families of figures it draws from the schema and the answers, and sections this kind
        describes itself, whose tables list at most ``max_rows`` rows. None: the report points
        to the labelled table instead."""
        return ()

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
        """Lines of the human-readable report: the guarantee in sentences and small tables,
        then notes on the release (subclasses add their own ``- ...`` lines)."""
        m = self.metadata
        lines = [
            f"# dpcube release {m.release_id}",
            "",
            f"- mechanism: `{m.mechanism}`",
            f"- privacy: epsilon = {m.epsilon:g}"
            + (f", delta = {m.delta:g}" if m.delta else "")
            + f", neighbour = {m.neighbour}",
            f"- created: {m.created} with dpcube {m.library_version}",
            f"- HTML report: {REPORT_HTML} (`dpcube report <this directory>` writes it)",
        ]
        if not m.for_publication:
            why = "noise switched off" if m.noiseless else "seeded randomness"
            lines.append(f"- **NOT FOR PUBLICATION** ({why}: the noise is reproducible)")
        lines += ["", *guarantee_markdown(m, publication_warning(m))]
        lines += ["## This release", "", f"- release kind: {self.kind}"]
        return lines

    def save(self, directory: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the release to ``directory`` atomically (see the module docstring).

        ``directory`` must be new, empty, or hold an earlier dpcube release (replaced only with
        ``overwrite=True``): see :func:`check_output_directory`.
        """
        import pyarrow.parquet as pq  # writing only: see read_parquet_bytes

        out = Path(directory)
        if out.is_dir():
            survey = _checked_survey(out, overwrite)
        else:
            survey = None
            check_output_directory(out, overwrite)
        key = file_key()
        out.mkdir(parents=True, exist_ok=True)
        earlier = survey.owned if survey is not None else set()
        if survey is not None:
            _remove_leftovers(out, survey.leftovers, keep=earlier)
        token = os.urandom(16).hex()
        tables = self.tables()
        stored = self.stored_replicates
        if stored is not None:  # post-processing of this release: see dpcube.release.replicates
            tables = {**tables, **stored.packed}
        files = {name: f"{name}-{token}.parquet" for name in tables}
        for fname in files.values():
            _plain_file_name(out, fname, "table file")
        journal = out / _journal_name(token)
        # The earlier release's files this save removes once it commits, with their marks: a
        # crash after the commit leaves them to the next save, which removes them only if they
        # still carry these marks.
        replaces = {}
        for name in sorted(earlier - {MANIFEST}):
            digest = file_sha256(out / name, OWNED_LIMIT, "file")
            if digest is not None:
                replaces[name] = mark(name, digest, key)
        body = {"token": token, "tables": sorted(files.values()), "replaces": replaces}
        doc = {"journal": body, "mark": mark_json(journal.name, body, key)}
        write_atomic(journal, json.dumps(doc).encode(), temp_tag=token)
        hashes: dict[str, str] = {}
        sizes: dict[str, int] = {}
        marks: dict[str, str] = {}
        for name, table in tables.items():
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink)
            data = sink.getvalue().to_pybytes()
            hashes[name] = _sha256(data)
            sizes[name] = len(data)
            marks[files[name]] = mark(files[name], hashes[name], key)
            write_atomic(out / files[name], data, temp_tag=token)
        report = ("\n".join(self.report_lines()) + "\n").encode()
        marks[REPORT] = mark(REPORT, _sha256(report), key)
        manifest: dict[str, Any] = {
            "format": "dpcube-release",
            "format_version": FORMAT_VERSION,
            "kind": self.kind,
            "schema": self.schema.to_dict() if self.schema is not None else None,
            "metadata": self.metadata.to_dict(),
            "tables": files,
            "sha256": hashes,
            "sizes": sizes,
            "state": self.state(),
            "marks": marks,
        }
        if stored is not None:
            manifest["bootstrap"] = stored.manifest_entry()
        manifest = json.loads(json.dumps(_jsonable(manifest)))  # exactly what is read back
        manifest["marks"][MANIFEST] = _manifest_mark(manifest, key)
        manifest["integrity"] = manifest_integrity(manifest)
        write_atomic(out / MANIFEST, json.dumps(manifest, indent=2).encode(), temp_tag=token)
        write_atomic(out / REPORT, report, temp_tag=token)
        for stale in earlier - set(files.values()) - {MANIFEST, REPORT}:
            (out / stale).unlink(missing_ok=True)
        journal.unlink(missing_ok=True)
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
    """Read and verify a release written by :meth:`Release.save`: the whole of it.

    Refuses a manifest of another format version; a table file that is not a plain name inside
    the directory; a manifest any field of which differs from what was saved (its ``integrity``:
    the SHA-256 of every field, the schema, state, metadata, parameters, variance model, table
    hashes and sizes included), naming the field; a table file that is not a regular file (a
    FIFO, device, directory or symbolic link: refused before a byte is read), whose size differs
    from the one recorded (refused before reading), or whose SHA-256, computed while it streams
    in, differs; and tables whose columns and shape do not fit the schema
    (:meth:`Release.restore`).
    """
    d = Path(directory)
    manifest = _read_manifest(d)
    where = str(d / MANIFEST)
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        if version in OLDER_FORMATS:
            raise ReleaseError(
                f"{where!r} has format_version {version!r}, written by an earlier dpcube whose "
                "manifest did not cover its schema, state and metadata; it cannot be verified: "
                "re-create it with `dpcube release` (this version) from the data"
            )
        raise ReleaseError(
            f"{where!r} has format_version {version!r}; this dpcube {_library_version()} reads "
            f"version {FORMAT_VERSION} only (re-run the release with this version)"
        )
    try:
        cls = registry.resolve(registry.RELEASE_KINDS, manifest["kind"], "release kind")
    except KeyError as exc:
        raise ReleaseError(str(exc.args[0])) from None
    paths = {
        name: _plain_file_name(d, fname, "table file") for name, fname in manifest["tables"].items()
    }
    _check_integrity(manifest, where)
    hashes, sizes = manifest.get("sha256"), manifest.get("sizes")
    if not isinstance(hashes, dict) or not isinstance(sizes, dict):
        raise ReleaseError(f"{where!r} records no 'sha256' and 'sizes' of its tables")
    tables: dict[str, pa.Table] = {}
    for name, path in paths.items():
        size = sizes.get(name)
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ReleaseError(f"{where!r}: field 'sizes' records no size of table {name!r}")
        data, digest = read_regular_file(path, size, what="table file", expected_size=size)
        if hashes.get(name) != digest:
            raise ReleaseError(
                f"table file {str(path)!r} does not match the SHA-256 in {where!r}: it was "
                "modified or corrupted; do not use this release"
            )
        try:
            tables[name] = read_parquet_bytes(data)
        except (pa.ArrowException, OSError) as exc:
            raise ReleaseError(f"table file {str(path)!r} is not a Parquet table: {exc}") from None
    entry = manifest.get("bootstrap")
    packed = {n: tables.pop(n) for n in list(tables) if n.startswith("bootstrap.")}
    try:
        schema = Schema.from_dict(manifest["schema"]) if manifest.get("schema") else None
        metadata = ReleaseMetadata.from_dict(manifest["metadata"])
        release: Release = cls.restore(schema, metadata, tables, manifest.get("state", {}))
    except DPCubeError as exc:
        raise ReleaseError(f"{where!r}: {exc}") from None
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise ReleaseError(
            f"{where!r}: the tables do not fit the manifest's schema and state "
            f"({type(exc).__name__}: {exc}); do not use this release"
        ) from None
    if entry is not None:
        from dpcube.release.replicates import StoredReplicates

        stored = StoredReplicates.from_saved(entry, packed, where)
        # replicates drawn in another version of the bootstrap world are ignored (recomputed)
        release.stored_replicates = stored if stored.matches(release) else None
    elif packed:
        raise ReleaseError(f"{where!r} lists bootstrap tables but no 'bootstrap' entry")
    return release


def read_parquet_bytes(data: bytes | bytearray) -> pa.Table:
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


def box_sizes(boxes: NDArray[np.int64]) -> NDArray[np.int64]:
    """Number of cells in each box of a (q, axes, 2) array."""
    return np.prod(boxes[:, :, 1] - boxes[:, :, 0] + 1, axis=1)


__all__ = [
    "Box",
    "Release",
    "ReleaseMetadata",
    "SetParts",
    "box_sizes",
    "check_output_directory",
    "column_numpy",
    "is_dpcube_report",
    "load_release",
    "publication_warning",
    "read_parquet_bytes",
]
