"""``dpcube serve REL... [--host 127.0.0.1] [--port 8000]``: the read-only query service.

The releases are loaded and verified before the port is opened (a bad release is one error line
and nothing listens). ``--port 0`` picks a free port; the URL served is printed on stdout. A host
that is not a loopback address prints a warning on stderr: the service is then reachable by
anyone who can reach the machine (releases are public by construction, but say so).
"""

from __future__ import annotations

import argparse
import ipaddress
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

from dpcube.errors import UsageError

#: The ``Host`` names a service bound to a loopback address answers (DNS rebinding guard).
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback name or address.

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_of(host: str, port: int) -> str:
    """The URL of ``host:port`` (IPv6 addresses in brackets).

    >>> url_of("127.0.0.1", 8000), url_of("::1", 80)
    ('http://127.0.0.1:8000/', 'http://[::1]:80/')
    """
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/"


def bind(host: str, port: int, count: int = 1) -> list[socket.socket]:
    """``count`` listening TCP sockets on ``host:port`` (``port`` 0: a free one, the same for
    all); errors are one line. Several sockets share the address through ``SO_REUSEPORT``, one
    per worker of ``--workers N`` (:mod:`dpcube.serve.workers`): the kernel spreads connections
    over them.

    >>> socks = bind("127.0.0.1", 0, 2)
    >>> len({s.getsockname() for s in socks})  # one address, two sockets
    1
    >>> for s in socks: s.close()
    """
    if count > 1 and not hasattr(socket, "SO_REUSEPORT"):
        raise UsageError(
            "--workers above 1 needs SO_REUSEPORT (Linux, macOS, BSD), which this platform "
            "lacks; run one worker per port behind a proxy instead"
        )
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {port}")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM
        )[0]
    except socket.gaierror as exc:
        raise UsageError(f"--host {host!r} cannot be resolved: {exc.strerror}") from None
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if count > 1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address)
            sock.listen(2048)
            sock.set_inheritable(True)
            address = sock.getsockname()  # port 0: the others join the port the first got
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc} (choose another --port, "
            "or 0 for a free one)"
        ) from None
    return sockets


def _release_dirs(given: list[str]) -> list[str]:
    """The release directories to serve: a publication directory (``dpcube release --plan``)
    stands for its tables, each served under its name, after its manifest is verified."""
    from dpcube.planning.publication import is_publication, publication_members

    dirs: list[str] = []
    for d in given:
        if is_publication(d):
            dirs.extend(str(m.resolve()) for m in publication_members(d))
        else:
            dirs.append(str(Path(d).resolve()))
    return dirs


def cmd_serve(args: argparse.Namespace) -> int:
    from dpcube.serve.app import create_app
    from dpcube.serve.connections import run_server
    from dpcube.serve.limits import ConnectionLimits, connection_limit, descriptor_limit

    if args.max_batch < 1 or args.max_body_bytes < 1 or args.max_table_rows < 1:
        raise UsageError("--max-batch, --max-body-bytes and --max-table-rows must be positive")
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    limits = ConnectionLimits(
        max_connections=connection_limit(args.max_connections, descriptor_limit()),
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        keep_alive=args.keep_alive_timeout,
    )
    seed = args.bootstrap_seed
    if args.workers > 1 and seed is None:
        # every worker draws the same bootstrap replicates: the same query gets the same interval
        # whichever worker answers (a seed of the bootstrap changes no guarantee)
        seed = secrets.randbits(63)
    options: dict[str, Any] = {
        "release_dirs": _release_dirs(args.releases),
        "max_batch": args.max_batch,
        "max_body_bytes": args.max_body_bytes,
        "max_table_rows": args.max_table_rows,
        "allowed_hosts": list(LOOPBACK_NAMES) if is_loopback(args.host) else None,
        "runs": args.runs,
        "bootstrap_seed": seed,
    }
    # loaded and verified here first, so that a bad release is one line and nothing listens (the
    # workers each load them again and compute their own bootstrap replicates)
    app = create_app(
        options["release_dirs"],
        **{k: v for k, v in options.items() if k != "release_dirs"},
        warm=args.workers == 1,
    )
    sockets = bind(args.host, args.port, args.workers)
    port = int(sockets[0].getsockname()[1])
    if not is_loopback(args.host):
        print(
            f"warning: --host {args.host} is not a loopback address: the service is PUBLIC to "
            "every machine that can reach this one (read-only; releases are public by "
            "construction)",
            file=sys.stderr,
        )
    from dpcube.release.base import publication_warning

    for name, item in app.state.served.items():
        warning = publication_warning(item.release.metadata)
        if warning:
            print(f"{name}: {warning}", file=sys.stderr)
    url = url_of(args.host, port)
    names = ", ".join(app.state.served)
    print(f"serving {len(app.state.served)} release(s) ({names}) at {url}", flush=True)
    print(f"API documentation: {url}docs  (Ctrl-C stops)", flush=True)
    settings: dict[str, Any] = {
        "log_level": args.log_level,
        "access_log": args.access_log,
        "server_header": False,
        "proxy_headers": False,
    }
    try:
        if args.workers == 1:
            run_server(app, sockets, settings, limits)
            return 0
        from dpcube.serve.workers import Workers

        return Workers(sockets, options, settings, limits).run()
    finally:
        for sock in sockets:
            sock.close()


def register(sub: Any) -> None:
    """Add ``dpcube serve`` to the sub-command parsers."""
    from dpcube.serve.app import DEFAULT_MAX_BATCH, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_TABLE_ROWS

    p = sub.add_parser("serve", help="answer queries on releases over HTTP (read-only)")
    p.add_argument("releases", nargs="+", metavar="REL", help="release directories to serve")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; another address makes the service public)",
    )
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = a free one)")
    p.add_argument(
        "--max-batch",
        type=int,
        default=DEFAULT_MAX_BATCH,
        help=f"most queries in one request (default {DEFAULT_MAX_BATCH:,})",
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help=f"largest request body (default {DEFAULT_MAX_BODY_BYTES:,} bytes)",
    )
    p.add_argument(
        "--max-table-rows",
        type=int,
        default=DEFAULT_MAX_TABLE_ROWS,
        help=f"largest table sent (default {DEFAULT_MAX_TABLE_ROWS:,} rows)",
    )
    from dpcube.serve.limits import (
        DEFAULT_BODY_TIMEOUT,
        DEFAULT_HEADER_TIMEOUT,
        DEFAULT_KEEP_ALIVE,
        FD_RESERVE,
    )

    p.add_argument(
        "--max-connections",
        type=int,
        default=None,
        help="most open connections per process (default: the file-descriptor limit, ulimit -n, "
        f"less {FD_RESERVE}); one over the limit closes the connection that waited longest for "
        "its client",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT,
        help=f"seconds to receive a request's headers (default {DEFAULT_HEADER_TIMEOUT:g})",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT,
        help=f"seconds to receive a request's body after its headers (default "
        f"{DEFAULT_BODY_TIMEOUT:g})",
    )
    p.add_argument(
        "--keep-alive-timeout",
        type=float,
        default=DEFAULT_KEEP_ALIVE,
        help=f"seconds an idle connection is kept after a response (default "
        f"{DEFAULT_KEEP_ALIVE:g})",
    )
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        help="bootstrap replicates of spatial/census releases (default: those stored with the "
        "release, else 200; computed once at start-up when not stored)",
    )
    p.add_argument(
        "--bootstrap-seed", type=int, default=None, help="seed of the bootstrap replicates"
    )
    p.add_argument(
        "--log-level",
        default="warning",
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn's log level (default warning)",
    )
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes (default 1), each on its own SO_REUSEPORT socket; each loads the releases and their bootstrap "
        "replicates (drawn with one shared seed)",
    )
    p.set_defaults(func=cmd_serve)
