"""The curator log: exact diagnostics of a release's input, kept OUT of the release.

Engines and input builders measure the data exactly (rows read, counted, dropped and clipped per
attribute, users and points removed by contribution bounding, census group and person totals).
Those figures are not covered by any mechanism's guarantee (under add/remove neighbours an exact
row count alone tells whether one person is in the data), so they never enter a release
directory. A :class:`dpcube.release.Release` keeps them in memory as ``curator_log``;
``dpcube release --curator-log FILE`` writes them, labelled, to a file that must lie outside the
release directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpcube.errors import ReleaseError

#: Heading of every curator log, in the file and on the terminal.
LABEL = "NOT PRIVATE, DO NOT PUBLISH: exact figures of the input data, for the data curator only"


def check_path(path: str | os.PathLike[str], release_dir: str | os.PathLike[str]) -> Path:
    """``path`` resolved; raises :class:`ReleaseError` if it lies inside ``release_dir`` (or is it),
    is a directory, is a file dpcube did not write, or cannot be created (its nearest existing
    directory is not writable). ``dpcube release`` calls it before counting and charging."""
    log = Path(path).expanduser().resolve()
    out = Path(release_dir).expanduser().resolve()
    if log == out or out in log.parents:
        raise ReleaseError(
            f"--curator-log {str(path)!r} lies inside the release directory {str(release_dir)!r}; "
            "exact diagnostics must be kept outside what is published"
        )
    if log.is_dir():
        raise ReleaseError(f"--curator-log {str(path)!r} is a directory; give a file name")
    parent = log.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ReleaseError(
            f"--curator-log {str(path)!r} cannot be written ({str(parent)!r} is not a writable "
            "directory); give a file name in a writable directory"
        )
    if log.exists() and not _is_curator_log(log):
        raise ReleaseError(
            f"--curator-log {str(path)!r} exists and is not a curator log dpcube wrote; "
            "give a new file name (dpcube never overwrites a file it did not write)"
        )
    return log


def _is_curator_log(path: Path) -> bool:
    """Whether ``path`` holds a curator log written by :func:`write` (which a rerun may replace)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("WARNING") == LABEL


def write(path: Path, log: Mapping[str, Any], release_id: str) -> None:
    """Write ``log`` as JSON under :data:`LABEL`, naming the release it belongs to."""
    from dpcube.files import write_atomic
    from dpcube.release.base import _jsonable

    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"WARNING": LABEL, "release_id": release_id, "diagnostics": _jsonable(dict(log))}
    write_atomic(path, (json.dumps(doc, indent=2) + "\n").encode())


def summary(log: Mapping[str, Any]) -> str:
    """One line for the terminal: the label and the figures (empty string for an empty log)."""
    if not log:
        return ""
    from dpcube.release.base import _jsonable

    figures = ", ".join(f"{k}={json.dumps(_jsonable(v))}" for k, v in log.items())
    return f"curator log ({LABEL}): {figures}"
