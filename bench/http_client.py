"""A lean HTTP/1.1 client for load tests: one keep-alive connection, POSTs with a known body.

On loopback the load generator shares the server's cores, so every millisecond it spends per
request is taken from the server it measures. httpx's async client spent 1.2-2.2 ms of CPU per
request at 16 clients (6-7 ms at 64), this client 0.2-0.3 ms (``client_cpu_ms_per_request`` in
bench.serve_load's results); wrk and hey, the usual tools, are compiled. This client writes the
request bytes itself and reads the answer by its Content-Length, nothing more: it is the measuring
instrument, not something users call.
"""

from __future__ import annotations

import asyncio


class HTTPError(Exception):
    """The connection failed or the answer was not an HTTP/1.1 response with a Content-Length."""


class Connection:
    """One keep-alive connection to ``host:port``; ``post`` sends one request and awaits its answer."""

    def __init__(
        self, host: str, port: int, *, timeout: float = 120.0, headers: dict[str, str] | None = None
    ):
        """``headers``: sent with every request besides Host, Content-Type and Content-Length."""
        self.host, self.port, self.timeout = host, port, timeout
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """(status, body) of ``POST path`` with a JSON ``body``. After any failure the connection is
        closed (its stream may be out of step) and the next request opens a fresh one; so does an
        answer that says ``Connection: close``."""
        try:
            return await asyncio.wait_for(self._exchange(path, body), self.timeout)
        except HTTPError:
            await self.close()
            raise
        except (
            OSError,
            ValueError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            asyncio.TimeoutError,
        ) as e:
            await self.close()
            raise HTTPError(f"{type(e).__name__}: {e}") from e

    async def _exchange(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{self.extra}\r\n"
        )
        self._writer.write(head.encode("ascii") + body)
        await self._writer.drain()
        lines = (await self._reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise HTTPError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise HTTPError("the answer has no Content-Length (chunked answers are not read)")
        answer = await self._reader.readexactly(int(headers["content-length"]))
        if "close" in (t.strip() for t in headers.get("connection", "").lower().split(",")):
            await self.close()
        return int(parts[1]), answer

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
