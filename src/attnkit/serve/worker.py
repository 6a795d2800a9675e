"""One decoding process of ``attnkit serve``: its child, pipe, pending requests and reader thread.

:class:`~.decoder.ProcessDecoder` holds one :class:`Worker` per ``--workers``. The child runs a
:class:`~.decoder.ThreadDecoder` over its own copy of the models and ignores SIGINT/SIGTERM (the
server decides when decoding stops); requests cross the pipe as :class:`~attnkit.plugin.http.Call` objects and
answers come back pickled, after the events a streamed call sends as it decodes (each handed to the
request's ``on_event`` as it arrives). A request given up on is cancelled in the child too. What the
child runs is passed in (``decoder.decoding_process``), so this module does not import the decoders.

Every child, a restarted one too, loads the checkpoints' bytes read once when the server started
(``WorkerSpec.contents``): a file overwritten by training, or moved, since then changes nothing served.
A child that dies is replaced; a replacement that cannot start is tried again, after a growing pause,
``RESTART_TRIES`` times in all, then the worker gives up (``failed``: the server reports itself
unhealthy and needs a restart). What clients see of it (``down``) names no path and no exception; the
details go to the server's stderr.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import ConfigError
from .jobs import BatchStats, settle


@dataclass(frozen=True)
class WorkerSpec:
    """What each decoding process loads: the ``--checkpoint`` specs, the device and its CPU threads,
    and the checkpoints' bytes (``serve.tasks.read_checkpoints``; :class:`~.decoder.ProcessDecoder`
    reads them when not given), which every child loads instead of the files."""

    checkpoints: tuple[str, ...]
    device: str = "auto"
    threads: int | None = None
    contents: tuple[bytes, ...] | None = field(default=None, repr=False)
    engine: str = "torch"  # or "ctranslate2": translation checkpoints decode with CTranslate2
    compile: bool = False  # torch translation models decode through the compiled fixed-layout step


OnEvent = Callable[[Any], None]


@dataclass(frozen=True)
class Pending:
    """A request sent to the child and not answered yet."""

    future: Future
    cost: int  # its source tokens, counted in ``Worker.load``
    on_event: OnEvent | None = None  # receives a streamed call's events as they arrive


RESTART_TRIES = 5  # fresh children tried in a row before a worker gives up
RESTART_PAUSE_S = 0.5  # the pause before the second try, doubled before each next one


def log(message: str) -> None:
    """One line on the server's stderr (for its operator: paths and exceptions may be named here)."""
    print(f"attnkit serve: {message}", file=sys.stderr, flush=True)


class DecoderUnavailable(RuntimeError):
    """No decoding process is up and a fresh one is not ready (the app answers 503)."""


class DecodingLost(RuntimeError):
    """The decoding process died with the request in it (the app answers 500 with this message,
    which names no path)."""


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
    child (off the event loop), trying again with a growing pause if that one cannot start; until one
    is ready, ``down`` says why, and once the tries are spent ``failed`` does too.
    """

    restart_tries = RESTART_TRIES
    restart_pause_s = RESTART_PAUSE_S

    def __init__(self, spec: WorkerSpec, batching: Any, main: Callable[..., None]):  # batching: Batching
        """``main(conn, spec, batching, parent pid)``: what the child runs (``decoder.decoding_process``)."""
        self.spec, self.batching, self.main = spec, batching, main
        self._stats, self._retired = BatchStats(), BatchStats()  # this child's counters; earlier children's
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._closed = False
        self._stopping = threading.Event()  # set by stop(): a pause between restarts ends at once
        self._down: str | None = None  # why this worker serves nothing now (None: it serves)
        self._failed: str | None = None  # why it gave up restarting (None: it has not)
        self.restarts = 0  # decoding processes that stopped and were started again
        self._reader: threading.Thread | None = None
        self._waiting_since: float | None = None  # pending work and no answer since (monotonic)
        self.load = 0  # source tokens of the requests sent and not answered yet
        self.conn, self.proc = self._start()

    def _start(self):
        ctx = mp.get_context("spawn")  # a fresh interpreter: no inherited threads or locks
        conn, child_conn = ctx.Pipe()
        proc = ctx.Process(
            target=self.main,
            args=(child_conn, self.spec, self.batching, os.getpid()),
            name="attnkit-decoder",
            daemon=True,
        )
        proc.start()
        child_conn.close()
        return conn, proc

    def ready(self) -> None:
        """Wait until the child has loaded the models (ConfigError if it cannot), then start reading."""
        self.pending: dict[int, Pending] = {}
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
    def failed(self) -> str | None:
        """Why this worker gave up restarting its child (the server needs a restart); None if it has not."""
        return self._failed

    @property
    def stats(self) -> BatchStats:
        """This worker's counters, its earlier (dead) children's included."""
        return added(self._retired, self._stats)

    def submit(
        self, job: int, call: Any, items: list[Any], cost: int, alone: bool, on_event: OnEvent | None = None
    ) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the decoder is closed")
            if self._down is not None:
                raise DecoderUnavailable(self._down)
            conn, pending = self.conn, self.pending
            if not pending:
                self._waiting_since = time.monotonic()
            pending[job] = Pending(future, cost, on_event)
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

    def holds(self, future: Future) -> bool:
        """Whether ``future`` is one of this worker's pending requests."""
        with self._lock:
            return any(p.future is future for p in self.pending.values())

    def cancel(self, future: Future) -> None:
        """Tell the child to drop ``future``'s request if it is one of this worker's (it answers at once;
        a stream stops at its next step)."""
        with self._lock:
            conn = self.conn
            job = next((j for j, p in self.pending.items() if p.future is future), None)
        if job is None:
            return
        try:
            with self._send_lock:
                conn.send(("cancel", job))
        except OSError:  # the child died: its reader fails what it held
            pass

    def silent_for(self) -> float:
        """Seconds this worker has had requests pending without answering any (0: none pending)."""
        since = self._waiting_since
        return 0.0 if since is None else time.monotonic() - since

    def kill(self, reason: str) -> None:
        """Kill the child (stuck): its reader fails its pending requests and starts a fresh one."""
        with self._lock:
            proc = self.proc
        log(f"{reason}; killing the decoding process (pid {proc.pid}) and starting a fresh one")
        proc.kill()

    def _read(self, conn, proc, pending) -> None:
        """Hand each answer to its future; when the pipe closes, reap the child, fail what is still
        pending and, unless closing, start a fresh child."""
        while True:
            try:
                job, kind, payload = conn.recv()
            except (EOFError, OSError):
                break
            if kind == "event":  # a streamed call's progress: the request waits on
                with self._lock:
                    entry = pending.get(job)
                    self._waiting_since = time.monotonic()  # the child is alive and working
                if entry is not None and entry.on_event is not None:
                    entry.on_event(payload)
                continue
            try:
                ok, value, stats = pickle.loads(payload)
                self._stats = BatchStats(*stats)
            except Exception as e:  # noqa: BLE001 - an answer that cannot be read fails its request only
                ok, value = False, RuntimeError(f"unreadable answer from the decoding process: {e}")
            with self._lock:
                entry = pending.pop(job, None)
                self.load -= entry.cost if entry else 0
                self._waiting_since = time.monotonic() if pending else None
            if entry is not None:
                settle(entry.future, value if ok else None, None if ok else value)
        proc.join(5)
        with self._lock:
            lost = [p.future for p in pending.values()]
            pending.clear()
            self.load = 0
            self._waiting_since = None
            self._retired, self._stats = added(self._retired, self._stats), BatchStats()
            restart = not self._closed
            if restart:
                self.restarts += 1
                self._down = "the decoding process stopped; a fresh one is starting"
        if restart:
            log(f"the decoding process (pid {proc.pid}) stopped with exit code {proc.exitcode}")
        for future in lost:
            settle(future, error=DecodingLost(f"the decoding process stopped (exit code {proc.exitcode})"))
        if restart:
            self._restart()

    def _restart(self) -> None:
        """On the reader's thread: a fresh child, published before it loads so that ``close`` can
        stop (or kill) it; it serves once it is ready, unless the worker was closed meanwhile. One
        that cannot start is tried again after a pause that doubles each time; after
        ``restart_tries`` the worker gives up (``failed``)."""
        for attempt in range(self.restart_tries):
            if attempt and self._stopping.wait(self.restart_pause_s * 2 ** (attempt - 1)):
                return  # closing
            with self._lock:
                if self._closed:
                    return
                try:
                    self.conn, self.proc = conn, proc = self._start()
                except Exception as e:  # noqa: BLE001 - logged; tried again
                    log(f"cannot start a decoding process (try {attempt + 1} of {self.restart_tries}): {e}")
                    continue
            try:
                descriptions = self._hello(conn, proc)
            except Exception as e:  # noqa: BLE001 - logged; tried again
                log(f"a fresh decoding process failed (try {attempt + 1} of {self.restart_tries}): {e}")
                continue
            pending: dict[int, Pending] = {}
            with self._lock:
                self.pending, self.descriptions = pending, descriptions
                if not self._closed:
                    self._down = None
            self._watch(conn, proc, pending)  # closed meanwhile: the child was told to stop; this reaps it
            return
        with self._lock:
            if self._closed:
                return
            self._down = self._failed = (
                f"the decoding process could not be restarted ({self.restart_tries} tries); "
                "the server needs a restart"
            )
        log(self._failed)

    def stop(self) -> None:
        """Tell the child to answer everything queued and exit (``join`` waits for it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stopping.set()
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
