"""Where the models run: on a thread of the server's process, or in a decoding process of their own.

A request reaches a model as a :class:`Call`, plain data (model name, operation, options), so it
can cross into another process. Both decoders are a :class:`Decoder`, what the app asks of one:
``submit`` (a ``concurrent.futures.Future`` of the call's results; ``on_event`` receives what a
streamed call produces before its result, e.g. each generated token), ``cancel`` (a request given
up on: a client gone; its decoding stops), ``expire``, its health, counters and ``close``.

- :class:`ThreadDecoder`: the :class:`~.batcher.Batcher` in the server's process. Simple, and what
  ``create_app`` uses by default (tests, and a Python caller that builds the app from loaded models).
- :class:`ProcessDecoder`: the batcher and its own copy of the models in one or more child
  processes (``attnkit serve`` uses it; ``--workers``; each child is a :class:`~.worker.Worker`).
  On a CPU the server's HTTP work (parsing, validation, JSON) and decoding then no longer take
  turns under one interpreter lock: measured on 2 cores, the event loop's ~4 ms of CPU
  per request had held the decoding thread back (docs/BENCHMARKS.md, "Serving"). The child ignores
  SIGINT/SIGTERM: the server finishes its in-flight requests first, then closes the child, which
  answers everything queued before it exits. Should a child die, its pending requests fail with
  a clear error and its reader thread starts a fresh one; the other workers go on serving, and with
  none left requests get 503 until it is ready. A child that keeps a request past its deadline
  without answering anything is stuck: :meth:`ProcessDecoder.expire` kills it (and so restarts it).
"""

from __future__ import annotations

import atexit
import functools
import itertools
import pickle
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import fields, replace
from typing import Any

from ..errors import AttnkitError, ConfigError
from ..plugin.http import Call
from ..processes import die_with_parent
from .batcher import BATCHING, Batcher, Batching
from .jobs import BatchFn, BatchStats, Decoder, OnEvent, Stream
from .worker import DecoderUnavailable, Worker, WorkerSpec, added

__all__ = [
    "Call",
    "Decoder",
    "DecoderUnavailable",
    "ProcessDecoder",
    "ThreadDecoder",
    "WorkerSpec",
    "functions",
]


def functions(
    model: Any, call: Call, max_batch_tokens: int, on_event: OnEvent | None = None
) -> tuple[BatchFn | None, Callable[[], Stream] | None]:
    """The batched function, or the stream factory (continuous batching), that runs ``call``: the
    served model's own (``operation``, its task's); ``on_event``: where a stream sends each event."""
    return model.operation(call.op, dict(call.options), max_batch_tokens, on_event or _ignore)


def _ignore(event: Any) -> None:
    pass


class ThreadDecoder:
    """The batcher on a thread of this process, over models loaded here."""

    def __init__(self, models: list[Any], batching: Batching = BATCHING):
        self.models = {m.name: m for m in models}
        self.batcher = Batcher(batching)
        self._alone = itertools.count()

    @property
    def stats(self) -> BatchStats:
        return self.batcher.stats

    @property
    def down(self) -> str | None:
        """Why requests cannot be decoded now; None while they can."""
        return None if self.batcher.alive else "the decoding thread stopped"

    @property
    def failed(self) -> str | None:
        """Why this decoder can never decode again (a stopped thread is not restarted); None if it can."""
        return self.down

    def expire(self, future: Future, after_s: float) -> None:
        """A request given up on after ``after_s`` seconds: forget it (a thread cannot be killed)."""
        self.cancel(future)

    def cancel(self, future: Future) -> bool:
        """A request given up on (its client left): it never starts, or its stream stops at the next
        step. False if it was answered already."""
        return self.batcher.cancel(future)

    worker_count = 1  # this process's batcher thread
    restarts = 0  # a stopped thread is not restarted

    @property
    def workers_up(self) -> int:
        return int(self.batcher.alive)

    def describe(self) -> list[dict[str, Any]]:
        """The models as ``GET /v1/models`` lists them."""
        return [m.describe() for m in self.models.values()]

    def submit(
        self, call: Call, items: list[Any], cost: int, *, alone: bool = False, on_event: OnEvent | None = None
    ) -> Future:
        """Queue ``items`` for ``call``; ``alone``: never share the model call (e.g. attention maps);
        ``on_event``: called on the decoding thread with each event of a streamed call."""
        run, stream = functions(self.models[call.model], call, self.batcher.max_batch_tokens, on_event)
        key = ("alone", next(self._alone)) if alone else call
        return self.batcher.submit(key, items, cost, run, stream=stream)

    def close(self, timeout: float | None = None) -> None:
        self.batcher.close(timeout)


class ProcessDecoder:
    """The batcher and the models in ``workers`` child processes; requests and answers cross pipes.

    Each request goes to the live worker with the fewest source tokens in flight, so on a CPU with
    several cores, small decoding steps (a few sentences each, mostly fixed cost per step) run side
    by side instead of queueing behind one another; each worker uses ``spec.threads`` threads. A
    worker that dies costs only its in-flight requests: the others go on serving while it restarts.
    """

    def __init__(self, spec: WorkerSpec, *, workers: int = 1, batching: Batching = BATCHING):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if spec.contents is None:  # read once: every child, a restarted one too, loads these bytes
            from .tasks import read_checkpoints

            try:
                spec = replace(spec, contents=read_checkpoints(spec.checkpoints))
            except AttnkitError as e:
                raise ConfigError(f"the decoding process could not load the models: {e}") from None
        self.spec, self.batching = spec, batching
        self._ids = itertools.count()
        self._closed = False
        self.workers: list[Worker] = []
        try:
            for _ in range(workers):  # started one after another, they load side by side
                self.workers.append(Worker(spec, batching, decoding_process))
            for w in self.workers:
                w.ready()
        except BaseException:
            self._stop_all(time.monotonic() + 10)
            raise
        atexit.register(self.close, 10)  # never leave a child behind, whoever forgets to close

    @property
    def stats(self) -> BatchStats:
        """The workers' counters added up (the largest batch: the largest of any)."""
        total = BatchStats()
        for w in self.workers:
            total = added(total, w.stats)
        return total

    @property
    def worker_count(self) -> int:
        return len(self.workers)

    @property
    def workers_up(self) -> int:
        return sum(w.down is None for w in self.workers)

    @property
    def restarts(self) -> int:
        return sum(w.restarts for w in self.workers)

    def describe(self) -> list[dict[str, Any]]:
        """The models as the decoding processes loaded them (their device included)."""
        return self.workers[0].descriptions

    @property
    def down(self) -> str | None:
        """Why requests cannot be decoded now (no worker is up); None while one can."""
        reasons = [w.down for w in self.workers]
        return None if None in reasons else reasons[0]

    @property
    def failed(self) -> str | None:
        """Why a worker gave up restarting (the server is unhealthy: it needs a restart); None if none did."""
        return next((w.failed for w in self.workers if w.failed is not None), None)

    def expire(self, future: Future, after_s: float) -> None:
        """A request given up on after ``after_s`` seconds: forget it, and kill the worker holding it
        if that has answered nothing for as long (stuck: its reader restarts it)."""
        self.cancel(future)
        for w in self.workers:
            if w.holds(future) and w.silent_for() >= after_s:
                w.kill(f"no answer for {w.silent_for():.0f} s")

    def cancel(self, future: Future) -> None:
        """A request given up on: forget it, and tell its decoding process to drop it (a stream stops
        at its next step)."""
        future.cancel()
        for w in self.workers:
            w.cancel(future)

    def submit(
        self, call: Call, items: list[Any], cost: int, *, alone: bool = False, on_event: OnEvent | None = None
    ) -> Future:
        """Send to the least loaded worker that is up; one that went down just now passes it on.
        ``on_event``: called on a reader thread with each event of a streamed call, as it arrives."""
        if self._closed:
            raise RuntimeError("the decoder is closed")
        job, error = next(self._ids), None
        for worker in sorted((w for w in self.workers if w.down is None), key=lambda w: w.load):
            try:
                return worker.submit(job, call, items, cost, alone, on_event)
            except DecoderUnavailable as e:
                error = e
        raise error or DecoderUnavailable(
            self.down or "the decoding processes stopped; fresh ones are starting"
        )

    def close(self, timeout: float | None = None) -> None:
        """Let the children answer everything queued, then stop them (those not done by ``timeout``
        seconds from now are killed)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._stop_all(None if timeout is None else time.monotonic() + timeout)

    def _stop_all(self, deadline: float | None) -> None:
        for w in self.workers:
            w.stop()
        for w in self.workers:
            w.join(deadline)


def decoding_process(conn, spec: WorkerSpec, batching: Batching, parent: int) -> None:
    """The decoding process: load the models, then feed the pipe's calls to a batcher until told to stop.

    Messages in: ``(job, call, items, cost, alone)``, ``("cancel", job)``, or None (stop). Out:
    ``(job, "event", data)`` as a streamed call produces, then ``(job, "done", pickled answer)``."""
    die_with_parent(parent)  # a server killed however it dies (kill -9 included) leaves no decoding process
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when decoding stops
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        decoder = _load_decoder(spec, batching)
    except BaseException as e:  # noqa: BLE001 - reported to the server, which exits with it
        conn.send(("failed", str(e) or type(e).__name__))
        return
    replies = _Replies(conn, decoder)
    conn.send(("ready", decoder.describe()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the server is gone
            break
        if message is None:
            break
        if message[0] == "cancel":  # the server gave up on it: the answer only settles its books
            replies.cancel(message[1])
            continue
        job, call, items, cost, alone = message
        on_event = functools.partial(replies.send_event, job)
        try:
            future = replies.futures[job] = decoder.submit(call, items, cost, alone=alone, on_event=on_event)
        except BaseException as e:  # noqa: BLE001 - the request gets the error
            future = Future()
            future.set_exception(e)
        future.add_done_callback(functools.partial(replies.answer, job))
    decoder.close()


def _load_decoder(spec: WorkerSpec, batching: Batching) -> ThreadDecoder:
    """The spec's models, loaded in this process, behind a batcher on a thread."""
    import torch

    from .tasks import load_models

    if spec.threads:
        torch.set_num_threads(spec.threads)
    models = load_models(
        list(spec.checkpoints),
        device=spec.device,
        contents=spec.contents,
        engine=spec.engine,
        threads=spec.threads,
        compile=spec.compile,
    )
    return ThreadDecoder(models, batching)


class _Replies:
    """What the decoding process sends back: events as they come, then each job's pickled answer
    with the batcher's counters after it."""

    def __init__(self, conn, decoder: ThreadDecoder):
        self.conn, self.decoder = conn, decoder
        self.lock = threading.Lock()
        self.futures: dict[int, Future] = {}  # the jobs not answered yet, for "cancel"

    def send(self, message: tuple) -> None:
        try:
            with self.lock:
                self.conn.send(message)
        except OSError:  # the server is gone: nobody waits for this
            pass

    def send_event(self, job: int, data: Any) -> None:
        self.send((job, "event", data))

    def counters(self) -> tuple[int, ...]:
        return tuple(getattr(self.decoder.stats, f.name) for f in fields(BatchStats))

    def cancel(self, job: int) -> None:
        given_up = self.futures.pop(job, None)
        if given_up is not None and self.decoder.cancel(given_up):  # its stream stops at the next step
            self.send((job, "done", pickle.dumps((False, RuntimeError("cancelled"), self.counters()))))

    def answer(self, job: int, future: Future) -> None:
        if future.cancelled():  # answered where it was cancelled, with the counters after it
            return
        self.futures.pop(job, None)
        stats = self.counters()
        error = future.exception()
        try:
            payload = pickle.dumps((error is None, future.result() if error is None else error, stats))
            if error is not None:
                pickle.loads(payload)  # the server must be able to rebuild the error
        except Exception as e:  # noqa: BLE001 - the request gets a plain error instead
            failed = error if error is not None else e
            payload = pickle.dumps((False, RuntimeError(f"{type(failed).__name__}: {failed}"), stats))
        self.send((job, "done", payload))
