"""``POST /v1/generate`` with ``"stream": true``: Server-Sent Events from a real server whose model
decodes in a worker process. The tokens concatenate to the answer the same request gets unstreamed,
arrive while the request is still decoding, and a client that leaves stops its decoding."""

from __future__ import annotations

import json
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor

import pytest
import torch

pytest.importorskip("fastapi", reason="attnkit serve needs the serve extra: pip install -e '.[serve]'")
import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from attnkit.checkpoint import save_checkpoint  # noqa: E402
from attnkit.data.tokenizer import SubwordTokenizer  # noqa: E402
from attnkit.model import LMConfig, TransformerLM  # noqa: E402
from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.batcher import Batcher, Batching  # noqa: E402
from attnkit.serve.decoder import ProcessDecoder, WorkerSpec  # noqa: E402
from attnkit.serve.tasks import load_models, release_weights  # noqa: E402
from serve_helpers import app_server  # noqa: E402

TEXT = [f"{a} {b} ." for a in ("A dog", "Two men", "The cat") for b in ("runs", "sits on the grass")]
LONG = 2000  # tokens a stream could run to: the eos never comes (its bias is -1e4), ~1.5 s of decoding


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """An untrained tiny LM that never ends early."""
    torch.manual_seed(0)
    tok = SubwordTokenizer.train(TEXT, TEXT, vocab_size=25)
    cfg = LMConfig.preset("tiny", vocab_size=tok.src_vocab_size, max_len=LONG + 16, tie_output=False)
    lm = TransformerLM(cfg)
    with torch.no_grad():
        lm.output_proj.bias[cfg.eos_id] = -1e4  # every continuation runs to max_tokens
    state = {"tokenizer": tok.state_dict(), "experiment": {}, "arch": "lm", "model_config": cfg.to_dict()}
    return save_checkpoint({**state, "model": lm.state_dict()}, tmp_path_factory.mktemp("lm") / "lm.pt")


@pytest.fixture(scope="module")
def url(ckpt):
    """A live server on a free port, the model in a worker process."""
    path = ckpt
    front = load_models([f"lm={path}"], device="cpu")
    release_weights(front)
    app = create_app(front, decoder=ProcessDecoder(WorkerSpec((f"lm={path}",), "cpu", 1)))
    with app_server(app) as url:  # its lifespan closes the worker process
        yield url


def events(response: httpx.Response):
    """(event, data) of each Server-Sent Event as it arrives; data is JSON, or "[DONE]"."""
    name = "message"
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]
            yield name, data if data == "[DONE]" else json.loads(data)
            name = "message"


def streamed(url: str, body: dict) -> list[tuple[str, object]]:
    with httpx.stream("POST", f"{url}/v1/generate", json={**body, "stream": True}, timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        return list(events(r))


def health(url: str) -> dict:
    return httpx.get(f"{url}/health", timeout=10).json()


GREEDY = {"text": "A dog", "max_tokens": 12}
SAMPLED = {"text": "The cat", "max_tokens": 12, "sample": True, "temperature": 2.0, "top_p": 0.9, "seed": 7}


@pytest.mark.parametrize(
    "body", [GREEDY, SAMPLED, {**GREEDY, "text": ""}], ids=["greedy", "sampled", "empty"]
)
def test_the_tokens_concatenate_to_the_answer_without_stream(url, body):
    want = httpx.post(f"{url}/v1/generate", json=body, timeout=60).json()
    got = streamed(url, body)
    tokens = [data for name, data in got if name == "token"]
    assert (
        len(tokens) == body["max_tokens"] - 1 and all
    )  # eos included(isinstance(t["token"], int) for t in tokens)
    assert "".join(t["text"] for t in tokens) == want["generations"][0]["continuation"]
    assert got[-2:] == [("result", want), ("message", "[DONE]")]  # the same answer, then the end


def test_concurrent_streamed_and_plain_requests_each_get_their_own(url):
    bodies = [{**GREEDY, "text": t, "max_tokens": 30} for t in ("A dog", "Two men", "The cat")]
    with ThreadPoolExecutor(6) as pool:
        plain = [pool.submit(httpx.post, f"{url}/v1/generate", json=b, timeout=60) for b in bodies]
        streams = [pool.submit(streamed, url, b) for b in bodies]
        for p, s in zip(plain, streams, strict=True):
            answer = p.result().json()
            got = s.result()
            assert (
                "".join(d["text"] for n, d in got if n == "token") == answer["generations"][0]["continuation"]
            )
            assert got[-2] == ("result", answer)


def test_tokens_arrive_while_the_request_still_decodes(url):
    answered = health(url)["requests_batched"]
    body = {**GREEDY, "max_tokens": 400, "stream": True}
    with httpx.stream("POST", f"{url}/v1/generate", json=body, timeout=60) as r:
        arriving = events(r)
        first = [next(arriving) for _ in range(3)]
        assert [name for name, _ in first] == ["token"] * 3
        assert health(url)["requests_batched"] == answered  # three tokens here, the request not done
        rest = list(arriving)
    assert len(first) + sum(name == "token" for name, _ in rest) == 399  # and eos
    assert rest[-1] == ("message", "[DONE]") and rest[-2][0] == "result"


def test_a_client_that_leaves_stops_its_decoding(url):
    before = health(url)
    body = {**GREEDY, "max_tokens": LONG, "stream": True}
    with httpx.stream("POST", f"{url}/v1/generate", json=body, timeout=60) as r:
        arriving = events(r)
        assert [next(arriving)[0] for _ in range(2)] == ["token", "token"]
    # the connection is closed: the server cancels the request in the worker process
    deadline = time.monotonic() + 20
    while (now := health(url))["requests_cancelled"] == before["requests_cancelled"]:
        assert time.monotonic() < deadline, "the request was not cancelled"
        time.sleep(0.05)
    assert now["requests_cancelled"] == before["requests_cancelled"] + 1
    steps = now["decode_steps"] - before["decode_steps"]
    assert steps < LONG // 2, f"{steps} of {LONG} tokens decoded for a client that left"
    # the worker is free: a request after it is answered at once
    assert httpx.post(f"{url}/v1/generate", json=GREEDY, timeout=10).status_code == 200


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"num_samples": 2, "sample": True}, "nbest must be 1"),
        ({"beam": 2}, "stream needs greedy search (beam 1) or sample"),
        ({"stream": "yes"}, "stream: Input should be a valid boolean"),
        ({"sample": True, "seed": 2**64}, "seed: Input should be less than or equal to"),
    ],
)
def test_a_stream_it_cannot_give_is_a_422_in_one_line(url, body, fragment):
    r = httpx.post(f"{url}/v1/generate", json={"text": "A dog", "stream": True, **body}, timeout=10)
    assert r.status_code == 422 and r.headers["content-type"] == "application/json", r.text
    error = r.json()["error"]
    assert fragment in error and "\n" not in error


def test_past_its_deadline_a_stream_ends_with_an_error_event_and_stops_decoding(ckpt):
    app = create_app(load_models([f"lm={ckpt}"], device="cpu"), request_timeout=0.2)  # decoding on a thread
    with TestClient(app) as c:
        r = c.post("/v1/generate", json={**GREEDY, "max_tokens": LONG, "stream": True})
        got = list(events(r))
        assert r.status_code == 200 and got[0][0] == "token"
        assert got[-2] == (
            "error",
            {"error": "the request was not decoded within 0.2 s (the server's deadline)", "status": 504},
        )
        assert got[-1] == ("message", "[DONE]") and "result" not in [name for name, _ in got]
        assert c.get("/health").json()["requests_cancelled"] == 1


class _Endless:
    """A stream whose item never finishes."""

    def __init__(self):
        self.steps = 0

    def __len__(self):
        return 1

    def add(self, items):
        return []

    def step(self):
        self.steps += 1
        time.sleep(0.001)
        return []


def test_a_cancelled_stream_job_stops_between_two_steps():
    stream, b = _Endless(), Batcher(Batching(join_group=1, join_wait_steps=0))
    try:
        future = b.submit("k", [1], 1, stream=lambda: stream)
        while stream.steps < 3:
            time.sleep(0.001)
        assert b.cancel(future) and not b.cancel(future)
        with pytest.raises(CancelledError):
            future.result(1)
        time.sleep(0.05)
        stopped = stream.steps
        time.sleep(0.05)
        assert stream.steps == stopped and b.stats.cancelled == 1  # no step after the drop
    finally:
        b.close(5)
