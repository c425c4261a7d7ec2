"""Writing files whole: every file dpcube writes goes through :func:`write_atomic`.

The bottom layer (it imports nothing of dpcube), so that the ledger, the releases, the matrix
cache and the front ends all write the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Prefix of every temporary file a save writes; the next save into the directory removes them.
TEMP_PREFIX = ".dpcube-tmp-"


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes, *, temp_tag: str | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename.

    The file gets the permissions a plain ``open`` would give (``0o666`` less the umask), not the
    ``0o600`` of :func:`tempfile.mkstemp`; the temporary name starts with :data:`TEMP_PREFIX`,
    then ``temp_tag`` and a dash when given (:meth:`dpcube.release.base.Release.save` passes the
    random token its pending journal records, so the next save recognises a temporary file a
    crash left).
    """
    import tempfile  # here, not at the top: ``dpcube query`` writes nothing

    prefix = f"{TEMP_PREFIX}{temp_tag}-" if temp_tag else TEMP_PREFIX
    fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{path.name}.", dir=path.parent)
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
