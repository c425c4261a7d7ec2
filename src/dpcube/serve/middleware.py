"""ASGI middleware of the service: :class:`AllowedHosts` (answer only the named hosts) and
:class:`BodyLimit` (refuse a request body over the limit before it is parsed)."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dpcube.serve.errors import error


def host_name(header: str) -> str:
    """The host name of a ``Host`` header, without its port, lower case.

    >>> host_name("127.0.0.1:8000"), host_name("[::1]:80"), host_name("LocalHost")
    ('127.0.0.1', '::1', 'localhost')
    """
    text = header.strip().lower()
    if text.startswith("["):
        return text[1:].partition("]")[0]
    return text.rpartition(":")[0] if text.count(":") == 1 else text


class AllowedHosts:
    """ASGI middleware: answer only requests whose ``Host`` names one of ``hosts``.

    ``dpcube serve`` on a loopback address allows the loopback names only: a web page that
    rebinds its own domain name to 127.0.0.1 (DNS rebinding) then cannot read the service
    through a visitor's browser.
    """

    def __init__(self, app: ASGIApp, hosts: Sequence[str]) -> None:
        self.app = app
        self.hosts = {h.lower() for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = next((v for k, v in scope.get("headers", []) if k == b"host"), b"")
            name = host_name(header.decode("latin-1"))
            if name not in self.hosts:
                shown = name[:100] or "(none)"
                refusal = error(
                    400,
                    f"Host {shown!r} is not served here (this service answers "
                    f"{', '.join(sorted(self.hosts))}); start dpcube serve with --host to serve "
                    "another name",
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BodyLimit:
    """ASGI middleware: refuse a request body over ``limit`` bytes with 413, before parsing.

    A declared ``Content-Length`` over the limit is refused at once; a body without one is read
    up to the limit and refused as soon as it passes it.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def too_large(self) -> JSONResponse:
        return error(413, f"request body larger than {self.limit:,} bytes; send fewer queries")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await error(400, "Content-Length is not a number")(scope, receive, send)
                    return
                if declared > self.limit:
                    await self.too_large()(scope, receive, send)
                    return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # disconnect: pass it on
                buffered = message
                break
            body = message.get("body", b"")
            size += len(body)
            if size > self.limit:
                await self.too_large()(scope, receive, send)
                return
            chunks.append(body)
            more = bool(message.get("more_body", False))
        else:
            buffered = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return buffered
            return await receive()

        await self.app(scope, replay, send)


__all__ = ["AllowedHosts", "BodyLimit", "host_name"]
