"""One decoding process of ``attnkit serve``: its child, pipe, pending requests and reader thread.

:class:`~.decoder.ProcessDecoder` holds one :class:`Worker` per ``--workers``. The child runs a
:class:`~.decoder.ThreadDecoder` over its own copy of the models and ignores SIGINT/SIGTERM (the
server decides when decoding stops); requests cross the pipe as :class:`~.decoder.Call` objects and answers
come back pickled. What the child runs is passed in (``decoder.decoding_process``), so this module
does not import the decoders.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, fields
from typing import Any

from ..errors import ConfigError
from .batcher import BatchStats, settle


@dataclass(frozen=True)
class WorkerSpec:
    """What each decoding process loads: the ``--checkpoint`` specs, the device and its CPU threads."""

    checkpoints: tuple[str, ...]
    device: str = "auto"
    threads: int | None = None


class DecoderUnavailable(RuntimeError):
    """No decoding process is up and a fresh one is not ready (the app answers 503)."""


def added(a: BatchStats, b: BatchStats) -> BatchStats:
    """Counters added up (the largest batch: the larger of the two)."""
    total = BatchStats(*(getattr(a, f.name) + getattr(b, f.name) for f in fields(BatchStats)))
    total.largest_batch_jobs = max(a.largest_batch_jobs, b.largest_batch_jobs)
    return total


class Worker:
    """One decoding process: its pipe, its pending requests and the reader thread that answers them.

    One lock guards the pending map, the current process and ``_closed``; another the pipe's sending
    end, so a large request being sent never keeps the reader from taking answers (no cycle of full
    pipes). Only the reader thread waits for (reaps) its child, so no two threads race for its exit
    status. When the child dies its reader fails the child's pending requests and starts a fresh
    child (off the event loop); until that one is ready, ``down`` says why.
    """

    def __init__(self, spec: WorkerSpec, batching: dict[str, Any], main: Callable[..., None]):
        """``main(conn, spec, batching)``: what the child runs (``decoder.decoding_process``)."""
        self.spec, self.batching, self.main = spec, batching, main
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
        proc = ctx.Process(
            target=self.main, args=(child_conn, self.spec, self.batching), name="attnkit-decoder", daemon=True
        )
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
            raise ConfigError(
                f"the decoding process exited while loading the models (exit code {proc.exitcode})"
            ) from None
        if hello[0] != "ready":
            proc.join(5)
            raise ConfigError(f"the decoding process could not load the models: {hello[1]}")
        return hello[1]

    def _watch(self, conn, proc, pending) -> None:
        reader = threading.Thread(
            target=self._read, args=(conn, proc, pending), name="attnkit-decoder-reader", daemon=True
        )
        with self._lock:
            self._reader = reader
        reader.start()

    @property
    def down(self) -> str | None:
        return self._down

    @property
    def stats(self) -> BatchStats:
        """This worker's counters, its earlier (dead) children's included."""
        return added(self._retired, self._stats)

    def submit(self, job: int, call: Any, items: list[Any], cost: int, alone: bool) -> Future:
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
            self._retired, self._stats = added(self._retired, self._stats), BatchStats()
            restart = not self._closed
            if restart:
                self._down = (
                    f"the decoding process stopped (exit code {proc.exitcode}); a fresh one is starting"
                )
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
        """Wait until the reader has reaped the child (by ``deadline``, a ``time.monotonic()``),
        else kill it."""
        while True:
            reader = self._reader
            if reader is None:  # never ready: no reader thread, so waiting here races with nobody
                self.proc.join(left(deadline))
                if self.proc.exitcode is None:
                    self.proc.kill()
                    self.proc.join(5)
                return
            reader.join(left(deadline))
            if reader.is_alive():
                break
            if self._reader is reader:  # no restart began after it
                return
        self.proc.kill()  # the child ignores SIGTERM (the server decides when it stops)
        reader = self._reader  # the newest reader: a restart may have replaced the one waited on
        assert reader is not None  # set when the child was ready, never unset
        reader.join(10)


def left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
