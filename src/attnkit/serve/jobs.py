"""What the batcher queues and answers: a :class:`Job` (items, their cost, the function or the
:class:`Stream` that decodes them, the future its caller awaits), the counts it keeps, and the
:class:`Decoder` protocol, what the app asks of the decoders around it."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the command line builds its flags from .batcher without the serve extra
    from ..plugin.http import Call

BatchFn = Callable[[list[Any]], list[Any]]


class Stream(Protocol):
    """A decoder that items join and leave between steps; tags are the caller's names for items."""

    def __len__(self) -> int:
        """Items in flight."""
        ...

    def add(self, items: list[tuple[Hashable, Any]]) -> list[tuple[Hashable, Any]]:
        """Start (tag, item) pairs; returns (tag, result) for those finished at once (empty input)."""
        ...

    def step(self) -> list[tuple[Hashable, Any]]:
        """One decoding step for every item in flight; returns (tag, result) for those finished."""
        ...


def settle(future: Future, value: Any = None, error: BaseException | None = None) -> None:
    """Resolve ``future`` unless it was cancelled meanwhile (a request given up on): a cancelled
    future must not stop the thread that answers the others."""
    try:
        future.set_exception(error) if error is not None else future.set_result(value)
    except InvalidStateError:
        pass


@dataclass(eq=False)  # compared and hashed by identity: its items are tagged (job, index)
class Job:
    key: Hashable  # jobs with equal keys may share a call; equal keys must mean equal ``run``
    items: list[Any]
    cost: int  # source tokens, for the batch budget
    run: BatchFn | None  # batch jobs: the batched function
    stream: Callable[[], Stream] | None = None  # stream jobs: makes the stream of this key
    future: Future = field(default_factory=Future)
    results: list[Any] = field(default_factory=list)  # stream jobs: filled as items finish
    waiting: int = 0  # stream jobs: items not finished yet
    held_at: int = 0  # the worker's decode_steps when the job was taken from the queue


@dataclass
class BatchStats:
    model_calls: int = 0  # calls of a batch function, and groups of jobs joining a stream
    decode_steps: int = 0  # steps of streams
    step_rows: int = 0  # the rows those steps decoded, added up (per step: step_rows / decode_steps)
    jobs: int = 0  # jobs answered
    items: int = 0  # items (sentences) answered
    largest_batch_jobs: int = 0
    cancelled: int = 0  # jobs given up on before they were answered (Batcher.cancel)


OnEvent = Callable[[Any], None]  # what a streamed call produces before its result, as it comes


class Decoder(Protocol):
    """What the app (:class:`attnkit.serve.app.Server`, ``/health``, ``/ready``, ``/metrics``) asks
    of what decodes: :class:`ThreadDecoder` and :class:`ProcessDecoder`."""

    @property
    def stats(self) -> BatchStats: ...  # the counters, added up over the workers

    @property
    def down(self) -> str | None: ...  # why nothing can be decoded now; None while something can

    @property
    def failed(self) -> str | None: ...  # why nothing ever will be again (restart the server)

    @property
    def worker_count(self) -> int: ...

    @property
    def workers_up(self) -> int: ...

    @property
    def restarts(self) -> int: ...

    def describe(self) -> list[dict[str, Any]]: ...  # the models as GET /v1/models lists them

    def submit(
        self, call: Call, items: list[Any], cost: int, *, alone: bool = False, on_event: OnEvent | None = None
    ) -> Future: ...

    def cancel(self, future: Future) -> Any: ...

    def expire(self, future: Future, after_s: float) -> None: ...

    def close(self, timeout: float | None = None) -> None: ...
