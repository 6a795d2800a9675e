"""The decoding process (``attnkit serve``'s default): the same answers as decoding on a thread, the
batching counters from the child, errors carried back, and a child that dies costs only its
in-flight requests (the next request starts a fresh one)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest
import torch

pytest.importorskip("fastapi", reason="attnkit serve needs the serve extra: pip install -e '.[serve]'")
import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from attnkit.decoding import SearchOptions
from attnkit.errors import ConfigError  # noqa: E402
from attnkit.plugin.http import Call
from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.batcher import Batching  # noqa: E402
from attnkit.serve.decoder import ProcessDecoder, WorkerSpec  # noqa: E402
from attnkit.serve.tasks import load_models, release_weights  # noqa: E402
from serve_helpers import tiny_checkpoint  # noqa: E402

SENTENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Kinder spielen.", "Ein Hund."]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    torch.set_num_threads(1)
    return tiny_checkpoint(tmp_path_factory)


@pytest.fixture(scope="module")
def spec(ckpt):
    return WorkerSpec((f"tiny={ckpt}",), "cpu", 1)


@pytest.fixture(scope="module")
def front(ckpt):
    """What the server's own process keeps: the models without their weights."""
    models = load_models([f"tiny={ckpt}"], device="cpu")
    release_weights(models)
    return models


@pytest.mark.slow
def test_the_process_answers_what_the_thread_answers(ckpt, spec, front):
    bodies = [
        ("/v1/translate", {"text": SENTENCES, "beam": 3, "nbest": 2}),  # continuous batching
        ("/v1/translate", {"text": SENTENCES, "beam": 1}),  # one batched call
        ("/v1/attention", {"text": SENTENCES[0], "beam": 2}),
    ]
    with TestClient(create_app(load_models([f"tiny={ckpt}"], device="cpu"))) as c:
        expected = [c.post(path, json=body).json() for path, body in bodies]
    assert all(p.device.type == "meta" for p in front[0].translator.model.parameters())  # no second copy here
    with TestClient(create_app(front, decoder=ProcessDecoder(spec))) as c:
        got = [c.post(path, json=body).json() for path, body in bodies]
        models, health = c.get("/v1/models").json()["models"], c.get("/health").json()
    for e, g in zip(expected[:2], got[:2]):
        assert [t["text"] for t in g["translations"]] == [t["text"] for t in e["translations"]]
        assert [t["nbest"] for t in g["translations"]] == [t["nbest"] for t in e["translations"]]
    assert got[2] == expected[2]  # pieces, words, every attention map and the alignment
    assert models[0]["device"] == "cpu" and models[0]["parameters"] > 0  # as the decoding process loaded it
    assert health["model_calls"] >= 2 and health["decode_steps"] > 0 and health["requests_batched"] == 3


@pytest.mark.slow
def test_concurrent_requests_share_model_calls_in_the_process(spec, front):
    bodies = [{"text": s, "beam": 2} for s in SENTENCES]

    async def go(app):
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://serve") as c:
                return await asyncio.gather(
                    *(c.post("/v1/translate", json=b) for b in bodies)
                ), app.state.decoder

    waiting = {"max_wait_ms": 300, "max_gap_ms": None}  # the whole wait: every request in one call
    responses, decoder = asyncio.run(
        go(
            create_app(
                front,
                batching=Batching(**waiting),
                decoder=ProcessDecoder(spec, batching=Batching(**waiting)),
            )
        )
    )
    assert [r.status_code for r in responses] == [200] * len(bodies)
    assert 0 < decoder.stats.model_calls < len(bodies)
    assert decoder.workers[0].proc.exitcode == 0  # closed with the app, after answering everything


def _wait_for(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.slow
def test_errors_come_back_and_a_dead_process_is_replaced(spec):
    decoder = ProcessDecoder(spec)
    try:
        with pytest.raises(ValueError, match="unknown operation 'bogus'"):
            decoder.submit(Call.of("tiny", "bogus"), ["x"], 1).result(60)
        first = decoder.workers[0].proc
        os.kill(first.pid, signal.SIGKILL)
        _wait_for(
            lambda: decoder.workers[0].proc is not first and decoder.down is None
        )  # restarted by its reader
        call = Call.of("tiny", "translate", options=SearchOptions(beam=2))
        (result,) = decoder.submit(call, [SENTENCES[0]], 5).result(60)
        assert decoder.workers[0].proc.is_alive() and result.text
    finally:
        decoder.close(30)
    assert not decoder.workers[0].proc.is_alive()


@pytest.mark.slow
def test_requests_in_flight_when_the_process_dies_fail_with_a_clear_error(spec, front):
    waiting = {"max_wait_ms": 5000, "max_gap_ms": None}  # the request waits in the child's batcher
    decoder = ProcessDecoder(spec, batching=Batching(**waiting))
    with TestClient(
        create_app(front, batching=Batching(**waiting), decoder=decoder), raise_server_exceptions=False
    ) as c:

        def kill_once_sent():
            _wait_for(lambda: decoder.workers[0].pending)
            os.kill(decoder.workers[0].proc.pid, signal.SIGKILL)

        threading.Thread(target=kill_once_sent).start()
        r = c.post("/v1/translate", json={"text": SENTENCES[0], "beam": 2})
        assert r.status_code == 500 and "decoding process stopped" in r.json()["error"]
        health = c.get("/health")  # a fresh process takes seconds to import torch and load the model
        assert health.status_code == 503 and "a fresh one is starting" in health.json()["status"]
        busy = c.post("/v1/translate", json={"text": SENTENCES[0], "beam": 2})
        assert busy.status_code == 503 and "starting" in busy.json()["error"]
        _wait_for(lambda: c.get("/health").status_code == 200)
        again = c.post("/v1/translate", json={"text": SENTENCES[0], "beam": 2})
        assert again.status_code == 200 and again.json()["translations"][0]["text"]


@pytest.mark.slow
def test_two_workers_share_the_requests_and_one_dying_leaves_the_other_serving(spec, front):
    call = Call.of("tiny", "translate", options=SearchOptions(beam=2))
    one = ProcessDecoder(spec)
    try:
        expected = [r.text for s in SENTENCES for r in one.submit(call, [s], 5).result(60)]
    finally:
        one.close(30)
    waiting = {"max_wait_ms": 200, "max_gap_ms": None}  # each job waits: the least loaded takes the next
    decoder = ProcessDecoder(spec, workers=2, batching=Batching(**waiting))
    with TestClient(create_app(front, batching=Batching(**waiting), decoder=decoder)) as c:
        futures = [decoder.submit(call, [s], 5) for s in SENTENCES]  # at once: the least loaded takes each
        assert [r.text for f in futures for r in f.result(60)] == expected
        assert [w.stats.jobs for w in decoder.workers] == [2, 2] and decoder.stats.jobs == 4
        first, other = decoder.workers
        dead, restart, hold = first.proc, first._restart, threading.Event()
        first._restart = lambda: (hold.wait(60), restart())  # keep it down while we look
        os.kill(dead.pid, signal.SIGKILL)
        _wait_for(lambda: first.down is not None)
        health = c.get("/health")
        assert health.status_code == 200 and (health.json()["workers"], health.json()["workers_up"]) == (2, 1)
        served = other.stats.jobs
        got = [c.post("/v1/translate", json={"text": s, "beam": 2}) for s in SENTENCES]  # all to the other
        assert [r.status_code for r in got] == [200] * 4 and other.stats.jobs == served + 4
        assert [r.json()["translations"][0]["text"] for r in got] == expected
        hold.set()
        _wait_for(lambda: first.proc is not dead and first.down is None)
        assert first.stats.jobs == 2  # the dead child's counts are kept
        assert c.get("/health").json()["workers_up"] == 2
    assert first.proc.exitcode == 0 and other.proc.exitcode == 0  # both closed with the app


@pytest.mark.slow
def test_closing_while_a_worker_restarts_stops_the_fresh_child_too(spec):
    decoder = ProcessDecoder(spec)
    worker = decoder.workers[0]
    dead = worker.proc
    os.kill(dead.pid, signal.SIGKILL)
    _wait_for(lambda: worker.proc is not dead)  # the fresh child is loading
    fresh = worker.proc
    decoder.close(60)
    assert fresh.exitcode is not None and worker._reader is not None and not worker._reader.is_alive()


def test_a_request_given_up_on_does_not_stop_the_batcher():
    from attnkit.serve.batcher import Batcher

    batcher = Batcher(Batching(max_wait_ms=0, join_group=1, join_wait_steps=0))
    started = threading.Event()

    def slow(items):
        started.set()
        time.sleep(0.3)
        return items

    first = batcher.submit("k1", ["a"], 1, slow)
    started.wait(10)
    second = batcher.submit("k2", ["b"], 1, lambda items: [x.upper() for x in items])
    assert second.cancel()  # still queued: the client went away
    third = batcher.submit("k3", ["c"], 1, lambda items: [x * 2 for x in items])
    assert first.result(10) == ["a"] and third.result(10) == ["cc"]
    batcher.close(10)


def test_a_checkpoint_the_process_cannot_load_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError, match="could not load the models: .*not found"):
        ProcessDecoder(WorkerSpec((str(tmp_path / "missing.pt"),), "cpu", 1))


def test_workers_auto_runs_one_single_threaded_process_per_core_on_a_cpu():
    from attnkit.cli.serve import _workers_and_threads

    assert _workers_and_threads("auto", None, "cpu", 2) == (2, 1)
    assert _workers_and_threads("auto", None, "cpu", 1) == (1, 1)
    assert _workers_and_threads("auto", None, "cpu", 16) == (4, 4)  # at most 4 copies of the weights
    assert _workers_and_threads(3, None, "cpu", 2) == (3, 1)
    assert _workers_and_threads("auto", 2, "cpu", 2) == (2, 2)  # --threads is per process
