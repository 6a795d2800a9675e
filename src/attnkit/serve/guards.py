"""ASGI guards in front of the API: the ``Host`` names the server answers to, and the body size limit."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Iterable

from starlette.exceptions import HTTPException as StarletteHTTPException


def allowed_host_names(host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` names a server bound to ``host`` answers to: that address, and localhost's names
    for a loopback one, and ``extra`` (``--allowed-host``; ``*`` allows any). Any other name is what a
    DNS rebinding attack sends (a page's domain resolved to this machine), so it gets 400. Bound to
    every address (0.0.0.0, ::), IP addresses are allowed too (they cannot be rebound)."""
    names = {host.lower().strip("[]"), *(e.lower().strip("[]") for e in extra)}
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    if host == "localhost" or (address is not None and address.is_loopback):
        names |= {"localhost", "127.0.0.1", "::1"}
    if address is not None and address.is_unspecified:
        names.add("<ip>")
    return frozenset(names)


class HostCheck:
    """ASGI middleware: a request whose ``Host`` header is not one of ``allowed`` answers 400."""

    def __init__(self, app, *, allowed: frozenset[str]):
        self.app, self.allowed = app, allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or "*" in self.allowed:
            return await self.app(scope, receive, send)
        host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
        if self._allows(host):
            return await self.app(scope, receive, send)
        message = "the Host header names a host this server does not answer to (see --allowed-host)"
        body = json.dumps({"error": message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _allows(self, host: str) -> bool:
        name = host.lower()
        if name.startswith("["):  # [v6]:port
            name = name[1 : name.find("]")] if "]" in name else ""
        else:
            name = name.rpartition(":")[0] if name.count(":") == 1 else name
        if name in self.allowed:
            return True
        if "<ip>" in self.allowed:
            try:
                ipaddress.ip_address(name)
                return True
            except ValueError:
                pass
        return False


class BodyLimit:
    """ASGI middleware: a body over ``max_bytes`` (declared or streamed) answers 413 before parsing,
    and one that has not arrived whole within ``read_timeout`` seconds of its first read answers 408:
    a client that sends headers and part of a body, then nothing, holds no task or descriptor for
    longer than a request may take. The deadline ends with the body's last part (a streamed answer
    then waits on the connection for as long as it streams)."""

    def __init__(self, app, *, max_bytes: int, read_timeout: float | None = None):
        self.app, self.max_bytes, self.read_timeout = app, max_bytes, read_timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(send)
        seen, complete, deadline = 0, False, None

        async def limited_receive():
            nonlocal seen, complete, deadline
            if complete or self.read_timeout is None:
                message = await receive()
            else:
                loop = asyncio.get_running_loop()
                deadline = deadline or loop.time() + self.read_timeout
                try:
                    message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
                except asyncio.TimeoutError:
                    raise StarletteHTTPException(
                        408, f"the request body did not arrive within {self.read_timeout:g} s"
                    ) from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                complete = not message.get("more_body", False)
                if seen > self.max_bytes:  # FastAPI passes an HTTPException raised while reading through
                    raise StarletteHTTPException(413, self._message())
            return message

        await self.app(scope, limited_receive, send)

    def _message(self) -> str:
        return f"the body is over the size limit of {self.max_bytes} bytes"

    async def _refuse(self, send):
        body = json.dumps({"error": self._message()}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
