"""Server-Sent Events for ``POST /v1/generate`` with ``"stream": true``: tokens as they are chosen.

The answer is ``text/event-stream``. Each event is an ``event:`` line naming it and one ``data:``
line of JSON, then a blank line::

    event: token
    data: {"token": 57, "text": " dog"}            one per generated token, the moment it is chosen

    event: result
    data: {"model": "lm", "generations": [...]}    the answer the same request without "stream" gets

    data: [DONE]                                    the end (OpenAI's convention), always last

The ``text`` pieces concatenate to the result's ``continuation``. An error after the stream has begun
(its deadline passed, the decoding process died) is an ``error`` event, ``{"error": "one line",
"status": 504}`` with the status the request would have answered, then ``[DONE]``. A client that
disconnects cancels its request: the decoding process drops it at its next step and frees its rows.

Another API's stream (OpenAI's chunks) is the same loop told how to say each thing: a
:class:`Speaker` (:class:`Events` is attnkit's own).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from typing import Any, Protocol

from .errors import status_and_line

_END = object()  # the feed's last item: the future is done
DONE = b"data: [DONE]\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # no proxy may hold events back


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One event: its name and its data as one line of JSON (JSON escapes every newline)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class Speaker(Protocol):
    """How one streamed request says its tokens, its result and an error after the start."""

    def token(self, item: dict[str, Any]) -> tuple[bytes, bool]:
        """The bytes that say one token event (b"": nothing yet), and whether the stream ends here
        (a stop sequence came: the decoding is cancelled)."""
        ...

    def result(self, result: Any) -> bytes: ...

    def error(self, status: int, line: str) -> bytes: ...


class Events:
    """attnkit's own events (above): ``token``, ``result`` (``answer(result)``) and ``error``."""

    def __init__(self, answer: Callable[[Any], dict[str, Any]]):
        self.answer = answer

    def token(self, item: dict[str, Any]) -> tuple[bytes, bool]:
        return sse("token", item), False

    def result(self, result: Any) -> bytes:
        return sse("result", self.answer(result))

    def error(self, status: int, line: str) -> bytes:
        return sse("error", {"error": line, "status": status})


class EventFeed:
    """Carries a request's events, and the end of its future, from a decoding or reader thread onto
    the event loop, in the order they happened."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop, self.queue = loop, asyncio.Queue[Any]()

    def put(self, item: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody listens any more
            pass

    def watch(self, future: Future) -> None:
        """End the feed when ``future`` is done (its result or error is read from it then)."""
        future.add_done_callback(lambda _: self.put(_END))


async def sse_events(
    feed: EventFeed,
    future: Future,
    *,
    speaker: Speaker,
    cancel: Callable[[], object],
    expire: Callable[[], object],
    timeout_s: float,
) -> AsyncIterator[bytes]:
    """The events of one streamed request as ``speaker`` says them: its tokens, then its result (or
    an error), then [DONE]. Past ``timeout_s`` seconds from now, ``expire()`` gives the request up
    (504); a client gone (the task is cancelled, or the generator closed) ``cancel()``s it."""
    deadline = feed.loop.time() + timeout_s
    try:
        while True:
            try:
                item = await asyncio.wait_for(feed.queue.get(), max(0.0, deadline - feed.loop.time()))
            except asyncio.TimeoutError:  # TimeoutError since Python 3.11, not yet in 3.10
                expire()
                yield speaker.error(504, late(timeout_s))
                break
            if item is _END:
                yield speaker.result(future.result())
                break
            said, end = speaker.token(item)
            if said:
                yield said
            if end:
                break
    except Exception as e:  # noqa: BLE001 - after the 200 only an event can tell the client
        status, line = status_and_line(e, "a streamed request")
        yield speaker.error(status, line)
    finally:
        if not future.done():  # the client left: its decoding stops
            cancel()
    yield DONE


def late(timeout_s: float) -> str:
    """What a request past its deadline answers (504)."""
    return f"the request was not decoded within {timeout_s:g} s (the server's deadline)"
