"""Slow and idle clients cannot take the service down: read timeouts and a connection limit.

uvicorn closes a keep-alive connection idle after a response (``timeout_keep_alive``) but puts
no time limit on reading a request: a client that connects and sends nothing, or sends its
headers or body a byte at a time, holds a file descriptor for ever, and about 20,000 of them
fill the process's descriptor limit, after which every request fails. uvicorn's
``limit_concurrency`` does not help: it answers 503 to *new* requests once the limit is
reached, so a flood of idle connections shuts out everyone else.

:class:`GuardedHttpProtocol` is uvicorn's httptools protocol with three guards:

- **header timeout**: a request's line and headers must be complete within
  :attr:`ConnectionLimits.header_timeout` seconds of the moment the service waits for them (the
  connection opened, or the previous response was sent), else the connection is closed (with a
  408 in the one error shape if part of a request came);
- **body timeout**: its body must be complete within :attr:`ConnectionLimits.body_timeout`
  seconds of its headers, else a 408 and the connection is closed;
- **connection limit**: at most :attr:`ConnectionLimits.max_connections` open connections,
  chosen below the process's descriptor limit (:func:`dpcube.serve.limits.connection_limit`);
  a connection opened
  over the limit closes the one that has waited longest for its client (idle, or still sending
  its request), so a new client always gets in while any connection is only waiting, and a
  request being answered is never cut. A flood of slow clients then costs each of them its
  connection, while ``/api/health`` (whose request arrives at once) is answered.

Also: request line and headers over :attr:`ConnectionLimits.max_header_bytes` are refused with
431, and a request the HTTP parser cannot read gets its 400 in the one error shape.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from dpcube.serve.limits import ConnectionLimits

log = logging.getLogger("dpcube.serve")

#: Seconds between two warnings that the connection limit closed a connection.
WARN_EVERY = 60.0


def error_response(status: int, reason: str, line: str) -> bytes:
    """A complete HTTP/1.1 response in the one error shape, closing the connection.

    >>> error_response(408, "Request Timeout", "too slow").split(b"\\r\\n")[0]
    b'HTTP/1.1 408 Request Timeout'
    """
    body = json.dumps({"error": line}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the guards of the module docstring.

    Subclassed per server by :func:`guarded_protocol`, which sets :attr:`limits` and gives the
    subclass its own :attr:`waiting` registry (the connections waiting for their client, oldest
    first).
    """

    limits: ClassVar[ConnectionLimits]
    waiting: ClassVar[dict[GuardedHttpProtocol, None]]
    last_warning: ClassVar[float] = -WARN_EVERY

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timer: asyncio.TimerHandle | None = None
        self.body_timer: asyncio.TimerHandle | None = None
        self.header_bytes = 0  # of the request being read, before its headers are complete

    # -- the waiting registry and the timers -----------------------------------------------------
    def _start_waiting(self) -> None:
        """The service now waits for this client's next request."""
        self.waiting.pop(self, None)
        self.waiting[self] = None
        self.header_bytes = 0
        self._cancel(self.header_timer)
        self.header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_late)

    def _stop_waiting(self) -> None:
        self.waiting.pop(self, None)
        self._cancel(self.header_timer)
        self._cancel(self.body_timer)
        self.header_timer = self.body_timer = None

    @staticmethod
    def _cancel(timer: asyncio.TimerHandle | None) -> None:
        if timer is not None:
            timer.cancel()

    def _refuse(self, status: int, reason: str, line: str) -> None:
        """Answer ``status`` in the one error shape, unless a response has begun, and close."""
        self._stop_waiting()
        if self.transport.is_closing():
            return
        cycle = self.cycle  # the request being read, or the last one answered
        if cycle is None or cycle.response_complete or not cycle.response_started:
            if cycle is not None and not cycle.response_complete:
                # as uvicorn does when the client leaves: the app reads http.disconnect and
                # whatever it sends is dropped (this answer is the connection's last)
                cycle.disconnected = True
                cycle.message_event.set()
            self.transport.write(error_response(status, reason, line))
        self.transport.close()

    def _headers_late(self) -> None:
        if self.header_bytes == 0:  # nothing of a request came: close quietly
            self._stop_waiting()
            if not self.transport.is_closing():
                self.transport.close()
            return
        self._refuse(
            408,
            "Request Timeout",
            f"the request's headers did not arrive within {self.limits.header_timeout:g} s",
        )

    def _body_late(self) -> None:
        self._refuse(
            408,
            "Request Timeout",
            f"the request's body did not arrive within {self.limits.body_timeout:g} s of its "
            "headers",
        )

    # -- uvicorn's protocol, guarded -------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_waiting()
        if len(self.connections) > self.limits.max_connections:
            oldest = next(iter(self.waiting))  # this one, if every other is being answered
            now = time.monotonic()
            if now - type(self).last_warning >= WARN_EVERY:
                type(self).last_warning = now
                log.warning(
                    "%d connections, the limit (--max-connections): closing the one that "
                    "waited longest for its client (this warning is given once a minute)",
                    len(self.connections),
                )
            oldest._refuse(
                503,
                "Service Unavailable",
                "too many connections: this one waited longest for its request and was closed",
            )

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        reading_headers = self.header_timer is not None
        if reading_headers:
            self.header_bytes += len(data)
        super().data_received(data)
        if (
            reading_headers
            and self.header_timer is not None  # still no complete headers
            and self.header_bytes > self.limits.max_header_bytes
        ):
            self._refuse(
                431,
                "Request Header Fields Too Large",
                f"the request line and headers exceed {self.limits.max_header_bytes:,} bytes",
            )

    def on_headers_complete(self) -> None:
        self._cancel(self.header_timer)
        self.header_timer = None
        super().on_headers_complete()
        self.body_timer = self.loop.call_later(self.limits.body_timeout, self._body_late)

    def on_message_complete(self) -> None:
        self._stop_waiting()  # the service's turn: never closed by the limit while answering
        super().on_message_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing():
            self._start_waiting()

    def send_400_response(self, msg: str) -> None:
        """A request the HTTP parser cannot read: 400 in the one error shape."""
        self._refuse(400, "Bad Request", f"{msg.rstrip('.')} (malformed HTTP)")


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedHttpProtocol]:
    """A :class:`GuardedHttpProtocol` class for one server, with ``limits``."""
    return type(
        "GuardedHttpProtocol",
        (GuardedHttpProtocol,),
        {"limits": limits, "waiting": {}, "__module__": __name__},
    )


def run_server(
    app: Any, sockets: list[Any], settings: dict[str, Any], limits: ConnectionLimits
) -> None:
    """Serve ``app`` on ``sockets`` with uvicorn (``settings``: its ``Config`` keywords) and
    the guards of ``limits``."""
    import uvicorn

    config = uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        timeout_keep_alive=limits.keep_alive,  # type: ignore[arg-type]  # a float works
        **settings,
    )
    uvicorn.Server(config).run(sockets=sockets)


__all__ = ["GuardedHttpProtocol", "guarded_protocol", "run_server"]
