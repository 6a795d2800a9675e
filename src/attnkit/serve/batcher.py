"""Dynamic batching: requests that arrive close together share one model call.

Requests are queued as jobs; one worker thread owns the model. It takes the oldest job, waits at
most ``max_wait_ms`` for more, and runs every queued job with the same *key* (same model, same
decoding options) whose source tokens still fit ``max_batch_tokens`` as ONE call of the job's
function. The function maps a list of items (sentences) to a list of results in the same order;
each job gets its own slice back through a ``concurrent.futures.Future`` that an async request
handler awaits. A job whose key is unique (attention maps) simply runs alone.

One thread for all models: on a CPU two concurrent model calls only compete for the same cores.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

BatchFn = Callable[[list[Any]], list[Any]]


@dataclass
class Job:
    key: Hashable  # jobs with equal keys may share a call; equal keys must mean equal ``run``
    items: list[Any]
    cost: int  # source tokens, for the batch budget
    run: BatchFn
    future: Future = field(default_factory=Future)


@dataclass
class BatchStats:
    model_calls: int = 0  # calls of a job function (one per batch)
    jobs: int = 0  # jobs answered
    items: int = 0  # items (sentences) answered
    largest_batch_jobs: int = 0


class Batcher:
    """Groups concurrent jobs into batched calls on one worker thread.

    Args:
        max_batch_tokens: source tokens in one call; a single larger job runs alone.
        max_wait_ms: how long the first job of a batch waits for company.
    """

    def __init__(self, *, max_batch_tokens: int = 4000, max_wait_ms: float = 5.0):
        if max_batch_tokens <= 0 or max_wait_ms < 0:
            raise ValueError("max_batch_tokens must be positive and max_wait_ms not negative")
        self.max_batch_tokens = max_batch_tokens
        self.max_wait = max_wait_ms / 1000.0
        self.stats = BatchStats()
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._held: list[Job] = []  # taken from the queue but not yet run (other key, over budget)
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="attnkit-batcher", daemon=True)
        self._thread.start()

    def submit(self, key: Hashable, items: list[Any], cost: int, run: BatchFn) -> Future:
        """Queue ``items``; the future resolves to ``run``'s results for them, in order."""
        if self._closed:
            raise RuntimeError("the batcher is closed")
        job = Job(key, list(items), cost, run)
        self._queue.put(job)
        return job.future

    def close(self, timeout: float | None = None) -> None:
        """Finish every queued job, then stop the worker."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
        self._thread.join(timeout)

    # -- worker ----------------------------------------------------------------------------------

    def _work(self) -> None:
        stopping = False
        while True:
            if not self._held:
                if stopping:
                    return
                job = self._queue.get()
                if job is None:
                    stopping = True
                    continue
                self._held.append(job)
            # Gather company for the oldest job until the wait or the budget runs out.
            first = self._held[0]
            deadline = time.monotonic() + self.max_wait
            while not stopping and self._budget_left(first) > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    job = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
                if job is None:
                    stopping = True
                else:
                    self._held.append(job)
            self._run(self._take_batch(first))

    def _budget_left(self, first: Job) -> int:
        return self.max_batch_tokens - sum(j.cost for j in self._held if j.key == first.key)

    def _take_batch(self, first: Job) -> list[Job]:
        """The oldest job and the following ones of its key that fit the budget; the rest stay held."""
        batch, used, rest = [first], first.cost, []
        for job in self._held[1:]:
            if job.key == first.key and used + job.cost <= self.max_batch_tokens:
                batch.append(job)
                used += job.cost
            else:
                rest.append(job)
        self._held = rest
        return batch

    def _run(self, batch: list[Job]) -> None:
        items = [item for job in batch for item in job.items]
        try:
            results = batch[0].run(items) if items else []
            if len(results) != len(items):
                raise RuntimeError(f"batch function returned {len(results)} results for {len(items)} items")
        except BaseException as e:  # the requests get the error; the worker lives on
            for job in batch:
                job.future.set_exception(e)
            return
        finally:
            self.stats.model_calls += bool(items)
            self.stats.largest_batch_jobs = max(self.stats.largest_batch_jobs, len(batch))
        start = 0
        for job in batch:
            job.future.set_result(results[start : start + len(job.items)])
            start += len(job.items)
            self.stats.jobs += 1
            self.stats.items += len(job.items)
