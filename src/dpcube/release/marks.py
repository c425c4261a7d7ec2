"""How dpcube knows the files it wrote: a keyed mark per file, and reading files safely.

A *mark* is an HMAC-SHA256 (Bellare, Canetti and Krawczyk, CRYPTO 1996; RFC 2104) of a file's
name and the SHA-256 of its content under a per-user secret key, ``$DPCUBE_HOME/file-key``
(32 random bytes, created on first use with mode ``0600``). dpcube records the mark of each file
it writes (in a release's manifest, in a save's pending journal) and
removes or replaces a file only when the mark it recomputes from the file on disk matches one it
recorded. Files dpcube writes outside a release (``dpcube export``) are marked the same way, by
their absolute path and content, in ``$DPCUBE_HOME/written``. Nobody without the key can make a file that passes as dpcube's, so a list of names in a
manifest or journal (which anyone can edit) never decides what is deleted: a file whose mark does
not verify is left alone and the save refuses, naming it.

:func:`read_regular_file` opens a file as a regular file only (``O_NOFOLLOW | O_NONBLOCK``, then
``fstat``): a FIFO, device or directory is refused before a byte is read, a file larger than the
limit is refused before reading, and the SHA-256 is computed while the bytes stream in.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from dpcube.errors import ReleaseError

#: The per-user key file under ``$DPCUBE_HOME``.
KEY_FILE = "file-key"
_KEY_BYTES = 32
_CHUNK = 1 << 20


def dpcube_home() -> Path:
    """``$DPCUBE_HOME`` (default ``~/.dpcube``)."""
    return Path(os.environ.get("DPCUBE_HOME", Path.home() / ".dpcube"))


def file_key() -> bytes:
    """The per-user secret key, created (``0600``) on first use.

    It is written whole to a file of its own, then linked into place (``os.link`` fails when
    the key exists): a process racing another one's first use reads either no key (and links
    its own) or a complete one, never a partly written file.
    """
    home = dpcube_home()
    path = home / KEY_FILE
    try:
        home.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            fd, draft = tempfile.mkstemp(prefix=".file-key-", dir=home)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(os.urandom(_KEY_BYTES))
                    f.flush()
                    os.fsync(f.fileno())
                try:
                    os.link(draft, path)
                except FileExistsError:
                    pass  # another process linked its key first: that one is the key
            finally:
                os.unlink(draft)
        content, _ = read_regular_file(path, 4096, what="dpcube's file key")
        key = bytes(content)
    except OSError as exc:
        raise ReleaseError(
            f"dpcube's file key {str(path)!r} cannot be created or read ({exc.strerror}); "
            "set DPCUBE_HOME to a writable directory"
        ) from None
    if len(key) != _KEY_BYTES:
        raise ReleaseError(
            f"dpcube's file key {str(path)!r} is damaged ({len(key)} bytes, not {_KEY_BYTES}); "
            "remove it (dpcube then no longer recognises the files it wrote with it)"
        )
    return key


def mark(name: str, content_sha256: str, key: bytes | None = None) -> str:
    """The mark of a file called ``name`` whose content has SHA-256 ``content_sha256``."""
    message = json.dumps(["dpcube-file", name, content_sha256]).encode()
    return hmac.new(key if key is not None else file_key(), message, hashlib.sha256).hexdigest()


def mark_json(what: str, value: Any, key: bytes | None = None) -> str:
    """The mark of a JSON value (a pending journal's body): ``what`` names its role."""
    body = json.dumps(value, sort_keys=True, separators=(",", ":"))
    message = json.dumps(["dpcube-json", what, body]).encode()
    return hmac.new(key if key is not None else file_key(), message, hashlib.sha256).hexdigest()


def verifies(recorded: Any, name: str, content_sha256: str, key: bytes | None = None) -> bool:
    """Whether ``recorded`` is the mark of ``name`` with that content (constant time)."""
    if not isinstance(recorded, str):
        return False
    return hmac.compare_digest(
        recorded.encode("utf-8", "replace"), mark(name, content_sha256, key).encode()
    )


def open_regular(path: Path, what: str) -> tuple[int, os.stat_result]:
    """A descriptor of ``path`` opened for reading as a regular file only, with its ``fstat``.

    ``O_NOFOLLOW``: a symbolic link as the last component is refused; ``O_NONBLOCK``: opening a
    FIFO does not wait for a writer; then anything but a regular file is refused before reading.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if Path(path).is_symlink():
            raise ReleaseError(
                f"{what} {str(path)!r} is a symbolic link; dpcube reads only regular files"
            ) from None
        raise ReleaseError(f"{what} {str(path)!r} cannot be read: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ReleaseError(
            f"{what} {str(path)!r} is not a regular file (a FIFO, device or directory); "
            "dpcube reads only regular files"
        )
    return fd, info


def read_regular_file(
    path: Path, limit: int, *, what: str, expected_size: int | None = None
) -> tuple[bytearray, str]:
    """The content of the regular file ``path`` and its SHA-256, hashed while it streams in.

    Refused before reading: anything but a regular file (:func:`open_regular`), a file larger
    than ``limit`` bytes, a file whose size differs from ``expected_size``. A file that grows
    or shrinks while it is read is refused too (never more than its size is read). The bytes are
    read into one buffer of the file's size (no second copy).
    """
    fd, info = open_regular(path, what)
    with os.fdopen(fd, "rb", buffering=0) as f:
        size = info.st_size
        if expected_size is not None and size != expected_size:
            raise ReleaseError(
                f"{what} {str(path)!r} has {size:,} bytes, not the {expected_size:,} "
                "recorded: it was modified or corrupted; do not use it"
            )
        if size > limit:
            raise ReleaseError(
                f"{what} {str(path)!r} has {size:,} bytes, more than the {limit:,} "
                "dpcube reads; it is not what dpcube wrote"
            )
        os.set_blocking(fd, True)
        digest = hashlib.sha256()
        buffer = bytearray(size)
        view = memoryview(buffer)
        done = 0
        while done < size:
            got = f.readinto(view[done : min(size, done + _CHUNK)])
            if not got:
                break
            digest.update(view[done : done + got])
            done += got
        view.release()
        if done != size or f.read(1):
            raise ReleaseError(
                f"{what} {str(path)!r} changed size while it was read; read it again when "
                "nothing is writing it"
            )
    return buffer, digest.hexdigest()


def file_sha256(path: Path, limit: int, what: str) -> str | None:
    """The SHA-256 of the regular file ``path`` (streamed, nothing kept), or None when it is not
    a regular file one may read (missing, a link, a FIFO, over ``limit``)."""
    try:
        fd, info = open_regular(path, what)
    except ReleaseError:
        return None
    try:
        if info.st_size > limit:
            return None
        os.set_blocking(fd, True)
        digest = hashlib.sha256()
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def owned_by_dpcube(path: Path, recorded: Any, limit: int, key: bytes | None = None) -> bool:
    """Whether the file ``path`` carries the mark ``recorded`` (dpcube wrote it, unchanged)."""
    if not isinstance(recorded, str):
        return False
    digest = file_sha256(path, limit, "file")
    return digest is not None and verifies(recorded, path.name, digest, key)


#: Where the marks of files dpcube writes outside a release directory are kept (one empty file
#: per mark, under ``$DPCUBE_HOME``): ``dpcube export``'s tables.
WRITTEN_DIR = "written"
#: The most bytes hashed of an existing file to see whether dpcube wrote it.
WRITTEN_LIMIT = 1 << 40


def _written_entry(path: Path, content_sha256: str, key: bytes) -> Path:
    return dpcube_home() / WRITTEN_DIR / mark(str(Path(path).resolve()), content_sha256, key)


def remember_written(path: Path, content_sha256: str) -> None:
    """Record that dpcube writes ``path`` with this content (call it before the write: a write
    that then fails leaves a mark nothing matches)."""
    key = file_key()
    entry = _written_entry(path, content_sha256, key)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        entry.touch(mode=0o600)
    except OSError as exc:
        raise ReleaseError(
            f"cannot record the file dpcube writes in {str(entry.parent)!r} ({exc.strerror}); "
            "set DPCUBE_HOME to a writable directory"
        ) from None


def forget_written(path: Path, content_sha256: str) -> None:
    """Drop the mark of ``path`` with that content (once it was replaced)."""
    _written_entry(path, content_sha256, file_key()).unlink(missing_ok=True)


def written_sha256(path: Path) -> str | None:
    """The SHA-256 of ``path`` when dpcube wrote it with exactly that content at that place
    (:func:`remember_written`), else None: a file anyone else wrote or edited since, a link,
    a FIFO."""
    digest = file_sha256(Path(path), WRITTEN_LIMIT, "file")
    if digest is None:
        return None
    return digest if _written_entry(path, digest, file_key()).is_file() else None


__all__ = [
    "KEY_FILE",
    "dpcube_home",
    "file_key",
    "file_sha256",
    "forget_written",
    "mark",
    "mark_json",
    "open_regular",
    "owned_by_dpcube",
    "read_regular_file",
    "remember_written",
    "verifies",
    "written_sha256",
]
