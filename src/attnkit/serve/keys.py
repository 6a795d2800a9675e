"""API keys and per-client limits: who may ask the server to decode, and how much at once.

Off unless keys are given (``--api-key``, ``--api-key-file``, or ``ATTNKIT_API_KEYS``, several
separated by commas or spaces); then every request but liveness and the pages that only describe
the API (``OPEN``) carries ``Authorization: Bearer KEY``, and any other answers 401 with a one-line
JSON reason and ``WWW-Authenticate: Bearer``, as OpenAI's and most self-hosted APIs ask. A key is
compared with every accepted key in constant time (:func:`hmac.compare_digest`, no early exit), so
the time an answer takes says nothing about how much of a key was right; no key is ever printed,
logged or echoed in an error.

A :class:`Quota` bounds what one client (the key it bears; without keys, every request together)
may hold at once: requests in flight and source tokens waiting or decoding. Over either, a request
answers 429 with ``Retry-After``, before any of its work is queued.
"""

from __future__ import annotations

import contextlib
import contextvars
import hmac
import json
import os
import re
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from ..errors import ConfigError
from ..plugin.http import ServeError
from .errors import plain

ENV = "ATTNKIT_API_KEYS"
# Answered without a key: liveness (a load balancer's probe) and what only describes the API (the
# attention page and the API's own page ask for the key before their first call).
OPEN = frozenset({"/health", "/", "/docs", "/openapi.json"})
MIN_LENGTH = 16  # a key a person typed as a password is guessed; generate one (docs/howto/deploy.md)
_KEY = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what an HTTP header carries unchanged


def read_keys(
    keys: Iterable[str] = (), files: Iterable[str | Path] = (), environ: Mapping[str, str] = os.environ
) -> tuple[bytes, ...]:
    """Every accepted key: those given, those in each file (one a line; blank lines and ``#``
    comments skipped) and those in ``ATTNKIT_API_KEYS``. A key that is too short or holds a
    character a header cannot carry is a ConfigError that names where it came from, not the key."""
    found: list[tuple[str, str]] = [("--api-key", k) for k in keys]
    for file in files:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"--api-key-file {file}: cannot read it ({type(e).__name__})") from None
        lines = [line.strip() for line in text.splitlines()]
        in_file = [
            (f"--api-key-file {file}, line {i}", k) for i, k in enumerate(lines, 1) if k and k[0] != "#"
        ]
        if not in_file:
            raise ConfigError(f"--api-key-file {file}: holds no key (one a line)")
        found += in_file
    found += [(ENV, k) for k in re.split(r"[,\s]+", environ.get(ENV, "")) if k]
    for where, key in found:
        if not _KEY.fullmatch(key):
            raise ConfigError(f"{where}: a key may hold visible ASCII characters only (no spaces)")
        if len(key) < MIN_LENGTH:
            raise ConfigError(f"{where}: a key must be at least {MIN_LENGTH} characters")
    return tuple(dict.fromkeys(key.encode() for _, key in found))


def accepted(given: bytes, keys: tuple[bytes, ...]) -> int | None:
    """Which of ``keys`` ``given`` is (its index), or None: every key compared whatever the outcome."""
    found = None
    for i, key in enumerate(keys):
        if hmac.compare_digest(given, key):
            found = i
    return found


# The client of the request being served: the index of the key it bore (-1: no keys asked), set by
# KeyCheck for the request's task and read where its tokens are counted (Server.run_job).
CLIENT: contextvars.ContextVar[int] = contextvars.ContextVar("attnkit_client", default=-1)
RETRY_AFTER_S = 1


class Quota:
    """What one client may hold at once: ``max_requests`` requests in flight and ``max_tokens``
    source tokens waiting or decoding (0: no limit)."""

    def __init__(self, max_requests: int = 0, max_tokens: int = 0):
        self.max_requests, self.max_tokens = max_requests, max_tokens
        self.requests: Counter[int] = Counter()
        self.tokens: Counter[int] = Counter()

    def _refuse(self, what: str) -> ServeError:
        return ServeError(
            429, f"{what}; retry after {RETRY_AFTER_S} s", headers={"Retry-After": str(RETRY_AFTER_S)}
        )

    def admit(self, client: int) -> None:
        """One more request of ``client`` in flight (until :meth:`leave`), or a 429."""
        if self.max_requests and self.requests[client] >= self.max_requests:
            raise self._refuse(f"{self.max_requests} requests of this client are in flight, the limit")
        self.requests[client] += 1

    def leave(self, client: int) -> None:
        self.requests[client] -= 1

    def take(self, cost: int) -> Callable[[], None]:
        """``cost`` more source tokens of the current client queued, or a 429; what gives them back."""
        client = CLIENT.get()
        if self.max_tokens and self.tokens[client] + cost > self.max_tokens:
            raise self._refuse(
                f"this client's queued work would be {self.tokens[client] + cost} source tokens, over "
                f"the limit of {self.max_tokens}"
            )
        self.tokens[client] += cost

        def give_back() -> None:
            self.tokens[client] -= cost

        return give_back

    @contextlib.contextmanager
    def holding(self, cost: int) -> Iterator[None]:
        """:meth:`take` for the time the block runs."""
        give_back = self.take(cost)
        try:
            yield
        finally:
            give_back()


def bearer(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, or None without one."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else None
    return None


class KeyCheck:
    """ASGI middleware: with ``keys``, a request to anything but the server's open paths
    (:data:`OPEN` and those its routes add) without an accepted key answers 401; every request past
    that is its client's (:data:`CLIENT`), within the server's quota. On the server's
    ``body_key_paths`` (LibreTranslate's) the key may instead be the body's ``api_key`` field, read
    here (within the body limit) and handed on unchanged."""

    def __init__(self, app, *, keys: tuple[bytes, ...], server):  # server: attnkit.serve.app.Server
        self.app, self.keys, self.server = app, keys, server

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] != "http" or path in self.server.open_paths:
            return await self.app(scope, receive, send)
        shape = self.server.error_shapes.get(path, plain)
        client = -1
        if self.keys:
            token = bearer(scope.get("headers", []))
            if token is None and path in self.server.body_key_paths:
                token, receive = await body_key(scope, receive, self.server.limits.max_body_bytes)
            found = None if token is None else accepted(token, self.keys)
            if found is None:
                if token is None:
                    where = "the body's api_key or " if path in self.server.body_key_paths else ""
                    reason = f"this server needs an API key: send {where}the header Authorization: Bearer KEY"
                else:
                    reason = "the API key is not one this server accepts"
                return await _answer(send, shape(401, reason), {"WWW-Authenticate": "Bearer"})
            client = found
        CLIENT.set(client)
        quota = self.server.quota
        try:
            quota.admit(client)
        except ServeError as e:
            return await _answer(send, shape(e.status, e.message), e.headers)
        try:
            await self.app(scope, receive, send)  # a streamed answer: until its last event is sent
        finally:
            quota.leave(client)


async def body_key(scope, receive, max_bytes: int) -> tuple[bytes | None, Callable]:
    """The ``api_key`` field of a JSON or form body (None without one), and a ``receive`` that hands
    the body on as it came. Past ``max_bytes`` the body is not read further (the body limit behind
    refuses it)."""
    chunks, size, more = [], 0, True
    while more and size <= max_bytes:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        more = message.get("more_body", False)
    body = b"".join(chunks)
    kind = dict(scope.get("headers", [])).get(b"content-type", b"").split(b";")[0].strip().lower()
    key = None
    if kind == b"application/x-www-form-urlencoded":
        values = urllib.parse.parse_qs(body.decode("latin-1")).get("api_key") if not more else None
        key = values[0].encode("latin-1") if values else None
    elif not more:
        with contextlib.suppress(ValueError):
            data = json.loads(body)
            if isinstance(data, dict) and isinstance(data.get("api_key"), str):
                key = data["api_key"].encode("utf-8", "replace")
    replayed = False

    async def replay():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return key, replay


async def _answer(send, said: tuple[int, dict], extra: Mapping[str, str] | None) -> None:
    status, answer = said
    body = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
