"""``dpcube serve --workers N``: N uvicorn servers, each accepting on a listening socket of its own.

uvicorn's own ``--workers`` hands one listening socket to every worker and the workers race to
accept from it. Clients that keep their connection open (every HTTP/1.1 client, and the
benchmark's 32) are then served by whichever worker won the race when they connected, for as long
as they stay connected: measured with two workers, one run split them evenly (3,763 requests/s)
and another left nearly all of them with one worker (1,802 requests/s, that worker at 101 % of a
core, the other idle).

Here every worker listens on its own socket, all bound to the same address with ``SO_REUSEPORT``
(Linux 3.9+, macOS, the BSDs): the kernel assigns each new connection to one of the sockets by a
hash of its addresses and ports, so connections are spread over the workers independently of
which worker is awake. The parent creates the sockets (:func:`dpcube.serve.cli.bind`, so ``--port 0`` picks one port
for all),
starts the workers (``spawn``: each loads the releases itself), restarts a worker that dies (its
socket stays open in the parent, so connections hashed to it wait for the replacement instead of
being refused), stops everything if a worker fails while starting, and ends the workers on
SIGINT/SIGTERM.
"""

from __future__ import annotations

import multiprocessing
import signal
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpcube.serve.limits import ConnectionLimits

#: A worker that exits by itself (not killed by a signal) within this many seconds of being started
#: failed to start (a release it could not load, a port it could not use): the parent stops instead
#: of restarting it, since the same error would come back at once, forever.
STARTUP_SECONDS = 30.0
#: More restarts than this within :data:`RESTART_WINDOW` seconds stop the service (a worker killed
#: again and again, e.g. by the out-of-memory killer while it loads).
MAX_RESTARTS = 5
RESTART_WINDOW = 60.0
#: How often the parent checks its workers.
POLL_SECONDS = 0.5


def worker_main(
    options: dict[str, Any],
    settings: dict[str, Any],
    limits: ConnectionLimits,
    sock: socket.socket,
) -> None:
    """One worker: the app of :func:`dpcube.serve.app.create_app` on ``sock`` (uvicorn, with
    the read timeouts and connection limit of :mod:`dpcube.serve.connections`)."""
    from dpcube.serve.app import create_app
    from dpcube.serve.connections import run_server

    options = dict(options)
    app = create_app(options.pop("release_dirs"), **options)
    run_server(app, [sock], settings, limits)


class Workers:
    """The parent of ``--workers N``: one process per socket, kept alive until a signal.

    ``options`` are :func:`~dpcube.serve.app.create_app`'s arguments (``release_dirs`` and the
    keywords), ``settings`` uvicorn's ``Config`` keywords, ``limits`` each worker's timeouts and
    connection limit.
    """

    def __init__(
        self,
        sockets: list[socket.socket],
        options: dict[str, Any],
        settings: dict[str, Any],
        limits: ConnectionLimits,
    ) -> None:
        self.sockets = sockets
        self.options = options
        self.settings = settings
        self.limits = limits
        self.context = multiprocessing.get_context("spawn")
        self.processes: list[Any] = []
        self.started: list[float] = []
        self.stop = threading.Event()

    def start(self, index: int) -> Any:
        process = self.context.Process(
            target=worker_main,
            args=(self.options, self.settings, self.limits, self.sockets[index]),
            name=f"dpcube-serve-worker-{index}",
        )
        process.start()
        return process

    def run(self) -> int:
        """Start the workers and watch them; 0 after a signal, 1 if a worker failed to start."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop.set())
        for index in range(len(self.sockets)):
            self.processes.append(self.start(index))
            self.started.append(time.monotonic())
        status = 0
        restarts: list[float] = []
        try:
            while not self.stop.wait(POLL_SECONDS):
                for index, process in enumerate(self.processes):
                    if process.is_alive() or self.stop.is_set():
                        continue
                    now = time.monotonic()
                    restarts = [t for t in restarts if now - t < RESTART_WINDOW]
                    exited = process.exitcode is not None and process.exitcode >= 0
                    if (exited and now - self.started[index] < STARTUP_SECONDS) or len(
                        restarts
                    ) >= MAX_RESTARTS:
                        print(
                            f"error: serve worker {index} ended (exit code {process.exitcode}) "
                            f"{'while starting' if exited else 'too often'}; see the messages "
                            "above",
                            file=sys.stderr,
                            flush=True,
                        )
                        status = 1
                        self.stop.set()
                        break
                    print(
                        f"serve worker {index} ended (exit code {process.exitcode}); restarting it",
                        file=sys.stderr,
                        flush=True,
                    )
                    self.processes[index] = self.start(index)
                    self.started[index] = now
                    restarts.append(now)
        finally:
            for process in self.processes:
                if process.is_alive():
                    process.terminate()  # SIGTERM: uvicorn finishes the requests in flight
            for process in self.processes:
                process.join(timeout=30)
                if process.is_alive():
                    process.kill()
                    process.join()
        return status
