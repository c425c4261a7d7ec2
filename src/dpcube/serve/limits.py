"""The limits of ``dpcube serve``'s HTTP layer (:mod:`dpcube.serve.connections`): read timeouts,
header size and a connection limit below the process's file-descriptor limit. Kept apart from
the protocol so that the command line reads its defaults without importing uvicorn.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpcube.errors import UsageError

#: Seconds to receive a request's line and headers (from the moment the service waits for them).
DEFAULT_HEADER_TIMEOUT = 10.0
#: Seconds to receive a request's body after its headers (1 MiB at 35 KB/s).
DEFAULT_BODY_TIMEOUT = 30.0
#: Seconds an idle keep-alive connection is kept after a response (uvicorn's default).
DEFAULT_KEEP_ALIVE = 5.0
#: Largest request line and headers (bytes); browsers send 1-2 KB.
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
#: Descriptors kept free of client connections for everything else the process opens: the
#: listening sockets, the event loop's own, log files, report and static files being sent, and
#: the connections a burst of accepts opens before the limit closes the oldest.
FD_RESERVE = 64


def descriptor_limit() -> int | None:
    """The process's soft limit on open file descriptors (None where there is none to read)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def connection_limit(requested: int | None, descriptors: int | None) -> int:
    """The connection limit: ``requested``, or by default the descriptor limit less
    :data:`FD_RESERVE`; a request that leaves fewer than :data:`FD_RESERVE` descriptors free is
    refused with the fix.

    >>> connection_limit(None, 1024), connection_limit(100, 1024), connection_limit(None, None)
    (960, 100, 65536)
    >>> connection_limit(1000, 1024)
    Traceback (most recent call last):
    dpcube.errors.UsageError: --max-connections 1000 leaves fewer than 64 of the process's 1024 file descriptors for anything else; give at most 960, or raise the limit (ulimit -n)
    """
    if requested is not None and requested < 1:
        raise UsageError(f"--max-connections must be at least 1, got {requested}")
    if descriptors is None:
        return requested if requested is not None else 65536
    most = descriptors - FD_RESERVE
    if most < 1:
        raise UsageError(
            f"the process may open only {descriptors} file descriptors, too few to serve "
            f"(at least {FD_RESERVE + 1}); raise the limit (ulimit -n)"
        )
    if requested is None:
        return most
    if requested > most:
        raise UsageError(
            f"--max-connections {requested} leaves fewer than {FD_RESERVE} of the process's "
            f"{descriptors} file descriptors for anything else; give at most {most}, or raise "
            "the limit (ulimit -n)"
        )
    return requested


@dataclass(frozen=True)
class ConnectionLimits:
    """The guards of :class:`dpcube.serve.connections.GuardedHttpProtocol` (seconds, bytes,
    connections)."""

    max_connections: int
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    keep_alive: float = DEFAULT_KEEP_ALIVE
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "keep_alive"):
            value = getattr(self, name)
            if not value > 0 or value == float("inf"):
                flag = "--" + name.replace("_", "-") + ("-timeout" if name == "keep_alive" else "")
                raise UsageError(f"{flag} must be a positive number of seconds, got {value}")
        if self.max_connections < 1 or self.max_header_bytes < 1:
            raise UsageError("max_connections and max_header_bytes must be positive")


__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_KEEP_ALIVE",
    "DEFAULT_MAX_HEADER_BYTES",
    "FD_RESERVE",
    "ConnectionLimits",
    "connection_limit",
    "descriptor_limit",
]
