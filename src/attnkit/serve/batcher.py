"""Dynamic batching: requests that arrive close together share the model's work.

Requests are queued as jobs; one worker thread owns the model. Two kinds of jobs:

- A *batch* job: the worker takes the oldest job, waits at most ``max_wait_ms`` for more (and no
  longer once ``max_gap_ms`` pass without a newcomer: a burst of requests has arrived), and runs
  every queued job with the same *key* (same model, same decoding options) whose source tokens
  still fit ``max_batch_tokens`` as ONE call of the job's function. The function maps a list of
  items (sentences) to a list of results in the same order. A job whose key is unique (attention
  maps) simply runs alone.
- A *stream* job (continuous batching, for beam search): jobs of one key share a :class:`Stream`
  that decodes step by step. Between two steps, waiting jobs join the stream (while their source
  tokens fit ``max_batch_tokens``) and each item leaves it as soon as it is finished, so the batch
  stays full and no sentence waits for the longest one of its group. Joining has a cost per group
  (the newcomers are encoded as one batch, and the running caches are copied once), so newcomers to
  a running stream may wait up to ``join_wait_steps`` steps for ``join_group`` items to gather.

Each job gets its results back, in order, through a ``concurrent.futures.Future`` that an async
request handler awaits. A job given up on (:meth:`Batcher.cancel`: a client gone, a deadline passed) is
dropped before it runs, and a running stream whose every job is cancelled stops between two steps. One
thread for all models: on a CPU two concurrent model calls only compete for the same cores.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, cast

from .jobs import BatchFn, BatchStats, Job, Stream, settle


@dataclass
class _Live:
    """A running stream and the jobs in it."""

    stream: Stream
    jobs: list[Job] = field(default_factory=list)

    @property
    def cost(self) -> int:
        return sum(j.cost for j in self.jobs)


@dataclass(frozen=True)
class Batching:
    """How the server batches requests: one set of settings with one set of defaults, built once
    (``attnkit serve``'s flags) and passed whole to every hop (the app, its decoders, their batchers).

    max_batch_tokens: source tokens in one call or in one stream; a single larger job runs alone.
    max_wait_ms: how long the first job waits for company when the worker is idle.
    max_gap_ms: the wait ends sooner once this long passes with no newcomer (None: never).
        Closed-loop clients answered together send their next requests as one burst, so a quiet gap
        says the company has come; the rest of ``max_wait_ms`` would leave the worker idle (measured
        at 16 clients, docs/BENCHMARKS.md, "Serving").
    join_group, join_wait_steps: newcomers to a running stream join once ``join_group`` of its items
        wait, or once the oldest has waited ``join_wait_steps`` steps (1 and 0: at once).
    """

    max_batch_tokens: int = 4000
    max_wait_ms: float = 5.0
    max_gap_ms: float | None = 1.0
    join_group: int = 4
    join_wait_steps: int = 4

    def __post_init__(self) -> None:
        finite = (self.max_wait_ms,) if self.max_gap_ms is None else (self.max_wait_ms, self.max_gap_ms)
        if self.max_batch_tokens <= 0 or not all(0 <= ms < float("inf") for ms in finite):  # NaN fails too
            raise ValueError("max_batch_tokens must be positive; max_wait_ms and max_gap_ms finite, >= 0")
        if self.join_group < 1 or self.join_wait_steps < 0:
            raise ValueError("join_group must be positive and join_wait_steps not negative")


BATCHING = Batching()  # the defaults


class Batcher:
    """Groups concurrent jobs into batched calls or running streams on one worker thread, as
    ``batching`` says (:class:`Batching`)."""

    def __init__(self, batching: Batching = BATCHING):
        self.batching = batching
        self.max_batch_tokens = batching.max_batch_tokens
        self.max_wait = batching.max_wait_ms / 1000.0
        gap = batching.max_gap_ms
        self.max_gap = self.max_wait if gap is None else min(gap / 1000.0, self.max_wait)
        self.join_group, self.join_wait_steps = batching.join_group, batching.join_wait_steps
        self.stats = BatchStats()
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._held: list[Job] = []  # taken from the queue but not yet run or admitted
        self._live: dict[Hashable, _Live] = {}  # running streams by key
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="attnkit-batcher", daemon=True)
        self._thread.start()

    def submit(
        self,
        key: Hashable,
        items: list[Any],
        cost: int,
        run: BatchFn | None = None,
        *,
        stream: Callable[[], Stream] | None = None,
    ) -> Future:
        """Queue ``items`` for ``run`` (one batched call) or for the ``stream`` of ``key`` (continuous
        batching; the factory is called when no stream of the key is running); the future resolves
        to their results, in order."""
        if self._closed:
            raise RuntimeError("the batcher is closed")
        if (run is None) == (stream is None):
            raise ValueError("give run or stream, not both")
        job = Job(key, list(items), cost, run, stream)
        self._queue.put(job)
        return job.future

    def cancel(self, future: Future) -> bool:
        """Give up on the job of ``future`` (from any thread): it never runs, or its stream stops at the
        next step once no other job waits on it. False if it was answered already."""
        if future.done() or not future.cancel():  # cancel() of a cancelled future is True again
            return False
        self.stats.cancelled += 1
        return True

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self, timeout: float | None = None) -> None:
        """Finish every queued job, then stop the worker."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
        self._thread.join(timeout)

    # -- worker ----------------------------------------------------------------------------------

    def _work(self) -> None:
        from ..denormals import flush_for_this_thread

        flush_for_this_thread()  # it only runs the model: the event loop's arithmetic stays IEEE
        stopping = False
        while True:
            if not self._held and not self._live:  # idle: wait for a job, then for its company
                if stopping:
                    return
                job = self._queue.get()
                if job is None:
                    stopping = True
                    continue
                self._hold(job)
                stopping = self._gather(self._held[0])
            else:  # busy: whatever arrived joins at the next step
                stopping = self._drain() or stopping
            self._admit()
            batch_job = next((j for j in self._held if j.stream is None), None)
            if batch_job is not None:
                self._run(self._take_batch(batch_job))
            for key in list(self._live):
                self._step(key)

    def _gather(self, first: Job) -> bool:
        """Collect company for the oldest job until the wait, a quiet gap or the budget runs out;
        True on stop."""
        now = time.monotonic()
        deadline, quiet = now + self.max_wait, now + self.max_gap
        while self._budget_left(first) > 0:
            try:
                job = self._queue.get_nowait()  # queued already: it joins however short the wait
            except queue.Empty:
                remaining = min(deadline, quiet) - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    job = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
            if job is None:
                return True
            self._hold(job)
            quiet = time.monotonic() + self.max_gap
        return False

    def _drain(self) -> bool:
        """Move every queued job to the held list without waiting; True on stop."""
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return False
            if job is None:
                return True
            self._hold(job)

    def _hold(self, job: Job) -> None:
        job.held_at = self.stats.decode_steps
        self._held.append(job)

    def _budget_left(self, first: Job) -> int:
        return self.max_batch_tokens - sum(j.cost for j in self._held if j.key == first.key)

    def _take_batch(self, first: Job) -> list[Job]:
        """The oldest job and the following ones of its key that fit the budget; the rest stay held."""
        batch, used, rest = [first], first.cost, []
        for job in self._held:
            if job is first:
                continue
            if job.key == first.key and job.stream is None and used + job.cost <= self.max_batch_tokens:
                batch.append(job)
                used += job.cost
            else:
                rest.append(job)
        self._held = rest
        return batch

    def _run(self, batch: list[Job]) -> None:
        items = [item for job in batch for item in job.items]
        run = batch[0].run
        assert run is not None  # a batch job has run, a stream job has stream (submit checks)
        try:
            results = run(items) if items else []
            if len(results) != len(items):
                raise RuntimeError(f"batch function returned {len(results)} results for {len(items)} items")
        except BaseException as e:  # the requests get the error; the worker lives on
            for job in batch:
                settle(job.future, error=e)
            return
        finally:
            self.stats.model_calls += bool(items)
            self.stats.largest_batch_jobs = max(self.stats.largest_batch_jobs, len(batch))
        start = 0
        for job in batch:
            self._answer(job, results[start : start + len(job.items)])
            start += len(job.items)

    def _answer(self, job: Job, results: list[Any]) -> None:
        self.stats.jobs += 1  # counted first: the future's callbacks may read the counters
        self.stats.items += len(job.items)
        settle(job.future, results)

    # -- streams ---------------------------------------------------------------------------------

    def _admit(self) -> None:
        """Held stream jobs join their key's stream (started if needed) while the budget allows."""
        joining: dict[Hashable, list[Job]] = {}
        rest = []
        due = self._due_keys()
        for job in self._held:
            if job.future.cancelled():  # given up on while it waited: never runs
                continue
            if job.stream is None or job.key not in due:
                rest.append(job)
                continue
            if not job.items:
                self._answer(job, [])
                continue
            live = self._live.get(job.key)
            used = (live.cost if live else 0) + sum(j.cost for j in joining.get(job.key, []))
            if used and used + job.cost > self.max_batch_tokens:
                rest.append(job)  # waits for room; a job alone may exceed the budget
                continue
            if live is None:
                try:
                    live = self._live[job.key] = _Live(job.stream())
                except BaseException as e:
                    settle(job.future, error=e)
                    continue
            joining.setdefault(job.key, []).append(job)
        self._held = rest
        for key, jobs in joining.items():
            live = self._live[key]
            pairs: list[tuple[Hashable, Any]] = []
            for job in jobs:
                job.results, job.waiting = [None] * len(job.items), len(job.items)
                pairs += [((job, i), item) for i, item in enumerate(job.items)]
                live.jobs.append(job)
            self.stats.model_calls += 1
            self.stats.largest_batch_jobs = max(self.stats.largest_batch_jobs, len(live.jobs))
            self._deliver(key, functools.partial(live.stream.add, pairs))

    def _due_keys(self) -> set[Hashable]:
        """Keys whose held stream jobs may join now: no stream running, or enough items waiting,
        or the oldest of them has waited long enough."""
        waiting: dict[Hashable, list[Job]] = {}
        for job in self._held:
            if job.stream is not None:
                waiting.setdefault(job.key, []).append(job)
        due = set()
        for key, jobs in waiting.items():
            live = self._live.get(key)
            if (
                live is None
                or not len(live.stream)
                or sum(len(j.items) for j in jobs) >= self.join_group
                or self.stats.decode_steps - min(j.held_at for j in jobs) >= self.join_wait_steps
            ):
                due.add(key)
        return due

    def _step(self, key: Hashable) -> None:
        live = self._live[key]
        if live.jobs and all(j.future.cancelled() for j in live.jobs):
            del self._live[key]  # nobody waits for its results: its rows and caches go now
            return
        if rows := len(live.stream):
            self.stats.decode_steps += 1
            self.stats.step_rows += rows
            self._deliver(key, live.stream.step)
        if key in self._live and not live.jobs:
            del self._live[key]  # an idle stream is dropped; the next job starts a fresh one

    def _deliver(self, key: Hashable, produce: Callable[[], list[tuple[Hashable, Any]]]) -> None:
        """Run a stream's add or step; hand finished items to their jobs. An error fails every job in
        the stream and drops it (the worker lives on)."""
        live = self._live[key]
        try:
            finished = produce()
        except BaseException as e:
            for job in live.jobs:
                if not job.future.done():
                    settle(job.future, error=e)
            del self._live[key]
            return
        for tag, result in finished:
            job, i = cast(tuple[Job, int], tag)  # the tags _admit gave: (job, index of the item)
            job.results[i] = result
            job.waiting -= 1
            if job.waiting == 0:
                live.jobs.remove(job)
                self._answer(job, job.results)
        if not live.jobs:
            del self._live[key]
