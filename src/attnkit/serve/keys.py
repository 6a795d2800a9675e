"""API keys: who may ask the server to decode.

Off unless keys are given (``--api-key``, ``--api-key-file``, or ``ATTNKIT_API_KEYS``, several
separated by commas or spaces); then every request but liveness and the pages that only describe
the API (``OPEN``) carries ``Authorization: Bearer KEY``, and any other answers 401 with a one-line
JSON reason and ``WWW-Authenticate: Bearer``, as OpenAI's and most self-hosted APIs ask. A key is
compared with every accepted key in constant time (:func:`hmac.compare_digest`, no early exit), so
the time an answer takes says nothing about how much of a key was right; no key is ever printed,
logged or echoed in an error.
"""

from __future__ import annotations

import hmac
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import ConfigError

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


def accepted(given: bytes, keys: tuple[bytes, ...]) -> bool:
    """Whether ``given`` is one of ``keys``, every key compared whatever the outcome."""
    match = False
    for key in keys:
        match |= hmac.compare_digest(given, key)
    return match


def bearer(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, or None without one."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else None
    return None


class KeyCheck:
    """ASGI middleware: without an accepted key, a request to anything but :data:`OPEN` answers 401."""

    def __init__(self, app, *, keys: tuple[bytes, ...]):
        if not keys:
            raise ValueError("KeyCheck needs at least one key")
        self.app, self.keys = app, keys

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN:
            return await self.app(scope, receive, send)
        token = bearer(scope.get("headers", []))
        if token is not None and accepted(token, self.keys):
            return await self.app(scope, receive, send)
        if token is None:
            reason = "this server needs an API key: send the header Authorization: Bearer KEY"
        else:
            reason = "the API key is not one this server accepts"
        body = json.dumps({"error": reason}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b"Bearer"),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})
