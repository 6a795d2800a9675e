"""Where the models run: on a thread of the server's process, or in a decoding process of their own.

A request reaches a model as a :class:`Call`, plain data (model name, operation, options), so it
can cross into another process. Both decoders give the app the same three things: ``submit`` (a
``concurrent.futures.Future`` of the call's results), ``stats`` and ``close``.

- :class:`ThreadDecoder`: the :class:`~.batcher.Batcher` in the server's process. Simple, and what
  ``create_app`` uses by default (tests, and a Python caller that builds the app from loaded models).
- :class:`ProcessDecoder`: the batcher and its own copy of the models in one or more child
  processes (``attnkit serve`` uses it; ``--workers``). On a CPU the server's HTTP work (parsing, validation, JSON) and decoding then no
  longer take turns under one interpreter lock: measured on 2 cores, the event loop's ~4 ms of CPU
  per request had held the decoding thread back (docs/BENCHMARKS.md, "Serving"). The child ignores
  SIGINT/SIGTERM: the server finishes its in-flight requests first, then closes the child, which
  answers everything queued before it exits. Should a child die, its pending requests fail with
  a clear error and its reader thread starts a fresh one; the other workers go on serving, and with
  none left requests get 503 until it is ready.
"""

from __future__ import annotations

import atexit
import itertools
import multiprocessing as mp
import pickle
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, fields
from typing import Any

from ..errors import ConfigError
from .attention import attention_payload
from .batcher import Batcher, BatchFn, BatchStats, Stream, settle


@dataclass(frozen=True)
class Call:
    """What a request asks of a model. Equal calls may share one batched model call."""

    model: str
    op: str  # "translate", "attention", "generate" or "classify"
    options: tuple[tuple[str, Any], ...] = ()  # sorted (name, value) pairs: hashable

    @classmethod
    def of(cls, model: str, op: str, **options: Any) -> Call:
        return cls(model, op, tuple(sorted(options.items())))


def functions(
    model: Any, call: Call, max_batch_tokens: int
) -> tuple[BatchFn | None, Callable[[], Stream] | None]:
    """The batched function, or the stream factory (continuous batching), that runs ``call``."""
    o = dict(call.options)
    if call.op == "translate":
        if model.streams(beam=o["beam"], nbest=o["nbest"]):
            return None, lambda: model.stream(**o)
        return lambda items: model.translate(items, **o, batch_tokens=max_batch_tokens), None
    if call.op == "attention":
        return lambda items: [attention_payload(model.translator, t, beam=o["beam"]) for t in items], None
    if call.op == "generate":
        return lambda items: model.generate(items, **o), None
    if call.op == "classify":
        return lambda items: model.predict(items, **o), None
    raise ValueError(f"unknown operation {call.op!r}")


class ThreadDecoder:
    """The batcher on a thread of this process, over models loaded here."""

    def __init__(self, models: list[Any], **batching: Any):
        self.models = {m.name: m for m in models}
        self.batcher = Batcher(**batching)
        self._alone = itertools.count()

    @property
    def stats(self) -> BatchStats:
        return self.batcher.stats

    @property
    def down(self) -> str | None:
        """Why requests cannot be decoded now; None while they can."""
        return None if self.batcher.alive else "the decoding thread stopped"

    worker_count = 1  # this process's batcher thread

    @property
    def workers_up(self) -> int:
        return int(self.batcher.alive)

    def describe(self) -> list[dict[str, Any]]:
        """The models as ``GET /v1/models`` lists them."""
        return [m.describe() for m in self.models.values()]

    def submit(self, call: Call, items: list[Any], cost: int, *, alone: bool = False) -> Future:
        """Queue ``items`` for ``call``; ``alone``: never share the model call (e.g. attention maps)."""
        run, stream = functions(self.models[call.model], call, self.batcher.max_batch_tokens)
        key = ("alone", next(self._alone)) if alone else call
        return self.batcher.submit(key, items, cost, run, stream=stream)

    def close(self, timeout: float | None = None) -> None:
        self.batcher.close(timeout)


@dataclass(frozen=True)
class WorkerSpec:
    """What each decoding process loads: the ``--checkpoint`` specs, the device and its CPU threads."""

    checkpoints: tuple[str, ...]
    device: str = "auto"
    threads: int | None = None


class DecoderUnavailable(RuntimeError):
    """No decoding process is up and a fresh one is not ready (the app answers 503)."""


def _added(a: BatchStats, b: BatchStats) -> BatchStats:
    """Counters added up (the largest batch: the larger of the two)."""
    total = BatchStats(*(getattr(a, f.name) + getattr(b, f.name) for f in fields(BatchStats)))
    total.largest_batch_jobs = max(a.largest_batch_jobs, b.largest_batch_jobs)
    return total


class _Worker:
    """One decoding process: its pipe, its pending requests and the reader thread that answers them.

    One lock guards the pending map, the current process and ``_closed``; another the pipe's sending
    end, so a large request being sent never keeps the reader from taking answers (no cycle of full
    pipes). Only the reader thread waits for (reaps) its child, so no two threads race for its exit
    status. When the child dies its reader fails the child's pending requests and starts a fresh
    child (off the event loop); until that one is ready, ``down`` says why.
    """

    def __init__(self, spec: WorkerSpec, batching: dict[str, Any]):
        self.spec, self.batching = spec, batching
        self._stats, self._retired = BatchStats(), BatchStats()  # this child's counters; earlier children's
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._closed = False
        self._down: str | None = None  # why this worker serves nothing now (None: it serves)
        self._reader: threading.Thread | None = None
        self.load = 0  # source tokens of the requests sent and not answered yet
        self.conn, self.proc = self._start()

    def _start(self):
        ctx = mp.get_context("spawn")  # a fresh interpreter: no inherited threads or locks
        conn, child_conn = ctx.Pipe()
        proc = ctx.Process(target=_child_main, args=(child_conn, self.spec, self.batching), name="attnkit-decoder",
                           daemon=True)  # fmt: skip
        proc.start()
        child_conn.close()
        return conn, proc

    def ready(self) -> None:
        """Wait until the child has loaded the models (ConfigError if it cannot), then start reading."""
        self.pending: dict[int, tuple[Future, int]] = {}
        self.descriptions = self._hello(self.conn, self.proc)
        self._watch(self.conn, self.proc, self.pending)

    @staticmethod
    def _hello(conn, proc) -> list[dict[str, Any]]:
        try:
            hello = conn.recv()
        except EOFError:
            proc.join(5)
            raise ConfigError(f"the decoding process exited while loading the models (exit code {proc.exitcode})") from None
        if hello[0] != "ready":
            proc.join(5)
            raise ConfigError(f"the decoding process could not load the models: {hello[1]}")
        return hello[1]

    def _watch(self, conn, proc, pending) -> None:
        reader = threading.Thread(target=self._read, args=(conn, proc, pending), name="attnkit-decoder-reader",
                                  daemon=True)  # fmt: skip
        with self._lock:
            self._reader = reader
        reader.start()

    @property
    def down(self) -> str | None:
        return self._down

    @property
    def stats(self) -> BatchStats:
        """This worker's counters, its earlier (dead) children's included."""
        return _added(self._retired, self._stats)

    def submit(self, job: int, call: Call, items: list[Any], cost: int, alone: bool) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the decoder is closed")
            if self._down is not None:
                raise DecoderUnavailable(self._down)
            conn, pending = self.conn, self.pending
            pending[job] = (future, cost)
            self.load += cost
        try:
            with self._send_lock:
                conn.send((job, call, list(items), cost, alone))
        except BaseException as e:
            with self._lock:
                if pending.pop(job, None) is not None:
                    self.load -= cost
            if isinstance(e, OSError):  # the child died just now: its reader fails the pending requests
                raise DecoderUnavailable("the decoding process stopped; a fresh one is starting") from None
            raise
        return future

    def _read(self, conn, proc, pending) -> None:
        """Hand each answer to its future; when the pipe closes, reap the child, fail what is still
        pending and, unless closing, start a fresh child."""
        while True:
            try:
                job, payload = conn.recv()
            except (EOFError, OSError):
                break
            try:
                ok, value, stats = pickle.loads(payload)
                self._stats = BatchStats(*stats)
            except Exception as e:  # noqa: BLE001 - an answer that cannot be read fails its request only
                ok, value = False, RuntimeError(f"unreadable answer from the decoding process: {e}")
            with self._lock:
                future, cost = pending.pop(job, (None, 0))
                self.load -= cost
            if future is not None:
                settle(future, value if ok else None, None if ok else value)
        proc.join(5)
        with self._lock:
            lost = [future for future, _ in pending.values()]
            pending.clear()
            self.load = 0
            self._retired, self._stats = _added(self._retired, self._stats), BatchStats()
            restart = not self._closed
            if restart:
                self._down = f"the decoding process stopped (exit code {proc.exitcode}); a fresh one is starting"
        for future in lost:
            settle(future, error=RuntimeError(f"the decoding process stopped (exit code {proc.exitcode})"))
        if restart:
            self._restart()

    def _restart(self) -> None:
        """On the reader's thread: a fresh child, published before it loads so that ``close`` can
        stop (or kill) it; it serves once it is ready, unless the worker was closed meanwhile."""
        with self._lock:
            if self._closed:
                return
            try:
                self.conn, self.proc = conn, proc = self._start()
            except Exception as e:  # noqa: BLE001 - reported to every request until the server restarts
                self._down = f"the decoding process could not restart: {e}"
                return
        try:
            descriptions = self._hello(conn, proc)
        except Exception as e:  # noqa: BLE001 - as above
            with self._lock:
                self._down = f"the decoding process could not restart: {e}"
            return
        pending: dict[int, tuple[Future, int]] = {}
        with self._lock:
            self.pending, self.descriptions = pending, descriptions
            if not self._closed:
                self._down = None
        self._watch(conn, proc, pending)  # closed meanwhile: the child was told to stop; this reaps it

    def stop(self) -> None:
        """Tell the child to answer everything queued and exit (``join`` waits for it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conn = self.conn
        try:
            with self._send_lock:
                conn.send(None)
        except OSError:
            pass

    def join(self, deadline: float | None) -> None:
        """Wait until the reader has reaped the child (by ``deadline``, a ``time.monotonic()``), else kill it."""
        while True:
            reader = self._reader
            if reader is None:  # never ready: no reader thread, so waiting here races with nobody
                self.proc.join(_left(deadline))
                if self.proc.exitcode is None:
                    self.proc.kill()
                    self.proc.join(5)
                return
            reader.join(_left(deadline))
            if reader.is_alive():
                break
            if self._reader is reader:  # no restart began after it
                return
        self.proc.kill()  # the child ignores SIGTERM (the server decides when it stops)
        self._reader.join(10)


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class ProcessDecoder:
    """The batcher and the models in ``workers`` child processes; requests and answers cross pipes.

    Each request goes to the live worker with the fewest source tokens in flight, so on a CPU with
    several cores, small decoding steps (a few sentences each, mostly fixed cost per step) run side
    by side instead of queueing behind one another; each worker uses ``spec.threads`` threads. A
    worker that dies costs only its in-flight requests: the others go on serving while it restarts.
    """

    def __init__(self, spec: WorkerSpec, *, workers: int = 1, **batching: Any):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.spec, self.batching = spec, batching
        self._ids = itertools.count()
        self._closed = False
        self.workers: list[_Worker] = []
        try:
            for _ in range(workers):  # started one after another, they load side by side
                self.workers.append(_Worker(spec, batching))
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
            total = _added(total, w.stats)
        return total

    @property
    def worker_count(self) -> int:
        return len(self.workers)

    @property
    def workers_up(self) -> int:
        return sum(w.down is None for w in self.workers)

    def describe(self) -> list[dict[str, Any]]:
        """The models as the decoding processes loaded them (their device included)."""
        return self.workers[0].descriptions

    @property
    def down(self) -> str | None:
        """Why requests cannot be decoded now (no worker is up); None while one can."""
        reasons = [w.down for w in self.workers]
        return None if None in reasons else reasons[0]

    def submit(self, call: Call, items: list[Any], cost: int, *, alone: bool = False) -> Future:
        """Send to the least loaded worker that is up; one that went down just now passes it on."""
        if self._closed:
            raise RuntimeError("the decoder is closed")
        job, error = next(self._ids), None
        for worker in sorted((w for w in self.workers if w.down is None), key=lambda w: w.load):
            try:
                return worker.submit(job, call, items, cost, alone)
            except DecoderUnavailable as e:
                error = e
        raise error or DecoderUnavailable(self.down or "the decoding processes stopped; fresh ones are starting")

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


def _child_main(conn, spec: WorkerSpec, batching: dict[str, Any]) -> None:
    """The decoding process: load the models, then feed the pipe's calls to a batcher until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when decoding stops
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        import torch

        from .tasks import load_models

        if spec.threads:
            torch.set_num_threads(spec.threads)
        decoder = ThreadDecoder(load_models(list(spec.checkpoints), device=spec.device), **batching)
    except BaseException as e:  # noqa: BLE001 - reported to the server, which exits with it
        conn.send(("failed", str(e) or type(e).__name__))
        return
    send_lock = threading.Lock()

    def answer(job: int, future: Future) -> None:
        error = future.exception()
        stats = tuple(getattr(decoder.stats, f.name) for f in fields(BatchStats))
        try:
            payload = pickle.dumps((error is None, future.result() if error is None else error, stats))
            if error is not None:
                pickle.loads(payload)  # the server must be able to rebuild the error
        except Exception as e:  # noqa: BLE001 - the request gets a plain error instead
            failed = error if error is not None else e
            payload = pickle.dumps((False, RuntimeError(f"{type(failed).__name__}: {failed}"), stats))
        try:
            with send_lock:
                conn.send((job, payload))
        except OSError:  # the server is gone: nobody waits for this answer
            pass

    conn.send(("ready", decoder.describe()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the server is gone
            break
        if message is None:
            break
        job, call, items, cost, alone = message
        try:
            future = decoder.submit(call, items, cost, alone=alone)
        except BaseException as e:  # noqa: BLE001 - the request gets the error
            future = Future()
            future.set_exception(e)
        future.add_done_callback(lambda f, job=job: answer(job, f))
    decoder.close()
