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
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from ..errors import ConfigError
from ..plugin.http import ServeError

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
    """ASGI middleware: with ``keys``, a request to anything but :data:`OPEN` without an accepted key
    answers 401; every request past that is its client's (:data:`CLIENT`), within ``quota``."""

    def __init__(self, app, *, keys: tuple[bytes, ...], quota: Quota):
        self.app, self.keys, self.quota = app, keys, quota

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN:
            return await self.app(scope, receive, send)
        client = -1
        if self.keys:
            token = bearer(scope.get("headers", []))
            found = None if token is None else accepted(token, self.keys)
            if found is None:
                if token is None:
                    reason = "this server needs an API key: send the header Authorization: Bearer KEY"
                else:
                    reason = "the API key is not one this server accepts"
                return await _answer(send, 401, reason, {"WWW-Authenticate": "Bearer"})
            client = found
        CLIENT.set(client)
        try:
            self.quota.admit(client)
        except ServeError as e:
            return await _answer(send, e.status, e.message, e.headers)
        try:
            await self.app(scope, receive, send)  # a streamed answer: until its last event is sent
        finally:
            self.quota.leave(client)


async def _answer(send, status: int, reason: str, extra: Mapping[str, str]) -> None:
    body = json.dumps({"error": reason}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
