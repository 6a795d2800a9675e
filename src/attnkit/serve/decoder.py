"""Where the models run: on a thread of the server's process, or in a decoding process of their own.

A request reaches a model as a :class:`Call`, plain data (model name, operation, options), so it
can cross into another process. Both decoders give the app the same three things: ``submit`` (a
``concurrent.futures.Future`` of the call's results), ``stats`` and ``close``.

- :class:`ThreadDecoder`: the :class:`~.batcher.Batcher` in the server's process. Simple, and what
  ``create_app`` uses by default (tests, and a Python caller that builds the app from loaded models).
- :class:`ProcessDecoder`: the batcher and its own copy of the models in a child process (``attnkit
  serve`` uses it). On a CPU the server's HTTP work (parsing, validation, JSON) and decoding then no
  longer take turns under one interpreter lock: measured on 2 cores, the event loop's ~4 ms of CPU
  per request had held the decoding thread back (docs/BENCHMARKS.md, "Serving"). The child ignores
  SIGINT/SIGTERM: the server finishes its in-flight requests first, then closes the child, which
  answers everything queued before it exits. Should the child die, its pending requests fail with
  a clear error and the next request starts a fresh one.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import pickle
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, fields
from typing import Any

from ..errors import ConfigError
from .attention import attention_payload
from .batcher import Batcher, BatchFn, BatchStats, Stream


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
        self.max_batch_tokens = batching.get("max_batch_tokens", 4000)
        self.batcher = Batcher(**batching)
        self._alone = itertools.count()

    @property
    def stats(self) -> BatchStats:
        return self.batcher.stats

    def describe(self) -> list[dict[str, Any]]:
        """The models as ``GET /v1/models`` lists them."""
        return [m.describe() for m in self.models.values()]

    def submit(self, call: Call, items: list[Any], cost: int, *, alone: bool = False) -> Future:
        """Queue ``items`` for ``call``; ``alone``: never share the model call (e.g. attention maps)."""
        run, stream = functions(self.models[call.model], call, self.max_batch_tokens)
        key = ("alone", next(self._alone)) if alone else call
        return self.batcher.submit(key, items, cost, run, stream=stream)

    def close(self, timeout: float | None = None) -> None:
        self.batcher.close(timeout)


@dataclass(frozen=True)
class WorkerSpec:
    """What the decoding process loads: the ``--checkpoint`` specs, the device and CPU threads."""

    checkpoints: tuple[str, ...]
    device: str = "auto"
    threads: int | None = None


class ProcessDecoder:
    """The batcher and the models in a child process; requests and answers cross a pipe."""

    def __init__(self, spec: WorkerSpec, **batching: Any):
        self.spec, self.batching = spec, batching
        self.stats = BatchStats()
        self._lock = threading.Lock()  # guards the pipe's sending end, the process and the pending map
        self._ids = itertools.count()
        self._closed = False
        self._start()

    def _start(self) -> None:
        ctx = mp.get_context("spawn")  # a fresh interpreter: no inherited threads or locks
        conn, child_conn = ctx.Pipe()
        proc = ctx.Process(
            target=_child_main,
            args=(child_conn, self.spec, self.batching),
            name="attnkit-decoder",
            daemon=True,
        )
        proc.start()
        child_conn.close()
        try:
            hello = conn.recv()
        except EOFError:
            proc.join(5)
            raise ConfigError(
                f"the decoding process exited while loading the models (exit code {proc.exitcode})"
            ) from None
        if hello[0] != "ready":
            proc.join(5)
            raise ConfigError(f"the decoding process could not load the models: {hello[1]}")
        self.descriptions: list[dict[str, Any]] = hello[1]
        pending: dict[int, Future] = {}
        self._conn, self._proc, self._pending = conn, proc, pending
        threading.Thread(
            target=self._read, args=(conn, proc, pending), name="attnkit-decoder-reader", daemon=True
        ).start()

    def describe(self) -> list[dict[str, Any]]:
        """The models as the decoding process loaded them (its device included)."""
        return self.descriptions

    def submit(self, call: Call, items: list[Any], cost: int, *, alone: bool = False) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the decoder is closed")
            if not self._proc.is_alive():  # it died (its requests were failed): start a fresh one
                self._start()
            job = next(self._ids)
            self._pending[job] = future
            self._conn.send((job, call, list(items), cost, alone))
        return future

    def _read(self, conn, proc, pending: dict[int, Future]) -> None:
        """Hand each answer to its future; when the pipe closes, fail what is still pending."""
        while True:
            try:
                job, ok, value, stats = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError):
                break
            self.stats = BatchStats(*stats)
            with self._lock:
                future = pending.pop(job, None)
            if future is not None:
                future.set_result(value) if ok else future.set_exception(value)
        proc.join(5)
        with self._lock:
            lost, _ = list(pending.values()), pending.clear()
        for future in lost:
            future.set_exception(RuntimeError(f"the decoding process stopped (exit code {proc.exitcode})"))

    def close(self, timeout: float | None = None) -> None:
        """Let the child answer everything queued, then stop it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._conn.send(None)
            except OSError:
                pass
        self._proc.join(timeout)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(5)


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
            payload = pickle.dumps((job, error is None, future.result() if error is None else error, stats))
            if error is not None:
                pickle.loads(payload)  # an error the server could not rebuild would stop its reader
        except Exception as e:  # noqa: BLE001 - the request gets a plain error instead
            failed = error if error is not None else e
            payload = pickle.dumps((job, False, RuntimeError(f"{type(failed).__name__}: {failed}"), stats))
        with send_lock:
            conn.send_bytes(payload)

    conn.send(("ready", decoder.describe()))
    while True:
        try:
            message = conn.recv()
        except EOFError:  # the server is gone
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
