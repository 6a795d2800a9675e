"""``attnkit serve``'s batching: concurrent requests share model calls and get exactly what they
would get alone; the batcher keeps its token budget, survives errors, and lets continuous-batching
streams take newcomers between decoding steps.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import torch

pytest.importorskip("fastapi", reason="attnkit serve needs the serve extra: pip install -e '.[serve]'")
import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.batcher import Batcher, Batching  # noqa: E402
from attnkit.serve.tasks import load_models  # noqa: E402
from serve_helpers import tiny_checkpoint  # noqa: E402
from test_serve import SENTENCES  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.set_num_threads(1)
    return load_models([f"tiny={tiny_checkpoint(tmp_path_factory)}"], device="cpu")


# -- dynamic batching ------------------------------------------------------------------------------


def _concurrently(app, bodies: list[dict]) -> list[httpx.Response]:
    async def go():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://serve") as c:
                return await asyncio.gather(
                    *(c.post("/v1/translate", json=b) for b in bodies)
                ), app.state.decoder.stats

    return asyncio.run(go())


def test_concurrent_requests_share_model_calls_and_answer_as_alone(models):
    bodies = [{"text": s, "beam": 2} for s in SENTENCES] + [{"text": SENTENCES[:3], "beam": 2}]
    alone = []
    with TestClient(create_app(models, batching=Batching(max_wait_ms=0))) as c:
        for b in bodies:
            alone.append(c.post("/v1/translate", json=b).json())
    together, stats = _concurrently(
        create_app(models, batching=Batching(max_wait_ms=300, max_gap_ms=None)), bodies
    )
    assert all(r.status_code == 200 for r in together)
    assert stats.model_calls < len(bodies), stats
    assert stats.decode_steps > 0  # beam 2 decodes in one running search (continuous batching)
    for a, t in zip(alone, (r.json() for r in together)):
        assert [x["text"] for x in t["translations"]] == [x["text"] for x in a["translations"]]
        assert [x["score"] for x in t["translations"]] == pytest.approx(
            [x["score"] for x in a["translations"]], abs=1e-4
        )


def test_requests_with_other_options_are_not_mixed(models):
    bodies = [
        {"text": SENTENCES[0], "beam": 1},
        {"text": SENTENCES[0], "beam": 2},
        {"text": SENTENCES[1], "beam": 1},
    ]
    responses, stats = _concurrently(
        create_app(models, batching=Batching(max_wait_ms=300, max_gap_ms=None)), bodies
    )
    assert all(r.status_code == 200 for r in responses)
    assert stats.model_calls == 2  # beam 1 together, beam 2 alone


def test_batcher_respects_the_budget_and_survives_errors():
    calls = []

    def double(items):
        calls.append(list(items))
        return [2 * x for x in items]

    def broken(items):
        raise RuntimeError("boom")

    b = Batcher(
        Batching(max_batch_tokens=10, max_wait_ms=200, max_gap_ms=None, join_group=1, join_wait_steps=0)
    )
    try:
        futures = [b.submit("k", [i], 4, double) for i in range(5)]  # 4 tokens each: two fit in 10
        bad = b.submit("other", [1], 1, broken)
        assert [f.result(10) for f in futures] == [[0], [2], [4], [6], [8]]
        with pytest.raises(RuntimeError, match="boom"):
            bad.result(10)
        assert b.submit("k", [7], 1, double).result(10) == [14]  # the worker lives on
    finally:
        b.close(10)
    assert all(sum(4 for _ in c) <= 10 for c in calls) and len(calls) >= 3


@pytest.mark.slow
def test_a_quiet_gap_ends_the_wait_for_company():
    """Jobs arriving within ``max_gap_ms`` of the last one share one call even when the burst lasts
    longer than the gap, and the wait ends a gap after the burst instead of at ``max_wait_ms``; without
    a gap the full wait is kept, and a gap longer than the wait is cut to it."""
    calls = []

    def record(items):
        calls.append((time.monotonic(), list(items)))
        return items

    def burst(b: Batcher, n: int, every: float) -> float:
        start = time.monotonic()
        futures = []
        for i in range(n):
            futures.append(b.submit("k", [i], 1, record))
            time.sleep(every)
        assert [f.result(60) for f in futures] == [[i] for i in range(n)]
        return calls[-1][0] - start

    gapped = Batcher(Batching(max_wait_ms=30_000, max_gap_ms=600, join_group=1, join_wait_steps=0))
    try:
        assert burst(gapped, 5, 0.2) < 15  # 1 s of burst, then a 0.6 s gap: not the 30 s wait
        assert [items for _, items in calls] == [[0, 1, 2, 3, 4]]  # one call, longer than one gap
    finally:
        gapped.close(10)
    calls.clear()
    waiting = Batcher(Batching(max_wait_ms=1_500, max_gap_ms=None, join_group=1, join_wait_steps=0))
    try:
        assert burst(waiting, 2, 0.02) >= 1.4  # the whole wait, though nothing came after the burst
        assert [items for _, items in calls] == [[0, 1]]
    finally:
        waiting.close(10)
    calls.clear()
    capped = Batcher(Batching(max_wait_ms=300, max_gap_ms=600_000, join_group=1, join_wait_steps=0))
    try:
        assert burst(capped, 1, 0) < 60  # the gap (10 minutes) is cut to the wait (0.3 s)
    finally:
        capped.close(10)
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="max_gap_ms"):
            Batcher(Batching(max_gap_ms=bad, join_group=1, join_wait_steps=0))


def test_jobs_queued_while_the_worker_was_busy_share_one_call_without_a_wait():
    """With no wait at all (``max_wait_ms=0``), the jobs that queued up during a call still go
    together into the next one, not one call each."""
    release, calls = threading.Event(), []

    def run(items):
        calls.append(list(items))
        if items == [0]:
            release.wait(30)  # the worker is busy while the others queue
        return items

    b = Batcher(Batching(max_wait_ms=0, join_group=1, join_wait_steps=0))
    try:
        first = b.submit("k", [0], 1, run)
        deadline = time.monotonic() + 30
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
        rest = [b.submit("k", [i], 1, run) for i in (1, 2, 3)]
        release.set()
        assert first.result(30) == [0] and [f.result(30) for f in rest] == [[1], [2], [3]]
    finally:
        b.close(10)
    assert calls == [[0], [1, 2, 3]]


class _Countdown:
    """A fake stream: item n finishes after n steps (0 at once); steps wait for ``gate``."""

    def __init__(self, gate: threading.Event, fail: bool = False):
        self.gate, self.fail, self.left = gate, fail, {}

    def __len__(self):
        return len(self.left)

    def add(self, items):
        self.left.update((tag, n) for tag, n in items if n > 0)
        return [(tag, "at once") for tag, n in items if n == 0]

    def step(self):
        self.gate.wait(10)
        if self.fail:
            raise RuntimeError("step failed")
        self.left = {tag: n - 1 for tag, n in self.left.items()}
        done = [tag for tag, n in self.left.items() if n == 0]
        for tag in done:
            del self.left[tag]
        return [(tag, "done") for tag in done]


def test_stream_jobs_join_between_steps_and_leave_when_done():
    gate, made, order = threading.Event(), [], []

    def make():
        made.append(_Countdown(gate))
        return made[-1]

    b = Batcher(Batching(max_batch_tokens=100, max_wait_ms=0, join_group=1, join_wait_steps=0))
    try:
        long = b.submit("k", [3], 1, stream=make)
        time.sleep(0.2)  # the worker is now inside the first step, waiting at the gate
        short = b.submit("k", [1, 0], 1, stream=make)
        for name, f in (("long", long), ("short", short)):
            f.add_done_callback(lambda _, name=name: order.append(name))
        gate.set()
        assert long.result(10) == ["done"] and short.result(10) == ["done", "at once"]
    finally:
        b.close(10)
    assert len(made) == 1  # the short job joined the running stream
    assert order == ["short", "long"]  # and left it without waiting for the longer one
    assert b.stats.decode_steps == 3 and b.stats.model_calls == 2


class _Recording(_Countdown):
    """A _Countdown that records the step count at each ``add``."""

    def __init__(self, gate):
        super().__init__(gate)
        self.steps, self.adds = 0, []

    def add(self, items):
        self.adds.append((self.steps, [n for _, n in items]))
        return super().add(items)

    def step(self):
        self.steps += 1
        return super().step()


@pytest.mark.parametrize("group, wait, joined_at", [(1, 0, 1), (2, 3, 4), (2, 50, None)])
def test_newcomers_wait_for_company_before_joining_a_running_stream(group, wait, joined_at):
    gate, made = threading.Event(), []

    def make():
        made.append(_Recording(gate))
        return made[-1]

    b = Batcher(Batching(max_batch_tokens=100, max_wait_ms=0, join_group=group, join_wait_steps=wait))
    try:
        long = b.submit("k", [20], 1, stream=make)
        time.sleep(0.2)  # the worker is inside the first step, waiting at the gate
        alone = b.submit("k", [1], 1, stream=make)  # held at step 1
        gate.set()
        assert alone.result(10) == ["done"] and long.result(10) == ["done"]
        pair = b.submit("k", [1, 1], 1, stream=make)  # a new stream (the old one ended): at once
        assert pair.result(10) == ["done", "done"]
    finally:
        b.close(10)
    # joins after `wait` steps, or when the long item leaves at step 20 (alone then starts anew)
    first = made[0]
    assert first.adds[0] == (0, [20])
    if joined_at is not None:
        assert first.adds[1] == (joined_at, [1]) and len(made) == 2
    else:
        assert len(first.adds) == 1 and made[1].adds == [(0, [1])] and len(made) == 3


def test_a_failing_stream_fails_its_jobs_and_the_worker_lives_on():
    gate = threading.Event()
    gate.set()
    b = Batcher(Batching(max_batch_tokens=100, max_wait_ms=0, join_group=1, join_wait_steps=0))
    try:
        bad = b.submit("k", [2], 1, stream=lambda: _Countdown(gate, fail=True))
        with pytest.raises(RuntimeError, match="step failed"):
            bad.result(10)
        assert b.submit("k", [1], 1, stream=lambda: _Countdown(gate)).result(10) == ["done"]
        assert b.submit("k", [], 0, stream=lambda: _Countdown(gate)).result(10) == []
    finally:
        b.close(10)
