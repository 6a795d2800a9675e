"""OpenAI's API for a served language model, spoken to by the real ``openai`` client against a live
server: the models list, completions and chat completions whole and streamed (the same tokens as
``/v1/generate`` gives, streamed == whole), stop sequences, samples, keys, and a 400 with OpenAI's
error body for what attnkit cannot honour."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("fastapi", reason="attnkit serve needs the serve extra: pip install -e '.[serve]'")
openai = pytest.importorskip("openai", reason="the OpenAI client is in the test extra")
import httpx  # noqa: E402

from attnkit.checkpoint import save_checkpoint  # noqa: E402
from attnkit.data.tokenizer import SubwordTokenizer  # noqa: E402
from attnkit.model import LMConfig, TransformerLM  # noqa: E402
from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.tasks import load_models  # noqa: E402
from attnkit.tasks.language_model.openai_text import cut, finish_reason, held_back  # noqa: E402
from serve_helpers import app_server  # noqa: E402

TEXT = [f"{a} {b} ." for a in ("A dog", "Two men", "The cat") for b in ("runs", "sits on the grass")]
KEY = "sk-attnkit-test-0123456789"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """An untrained tiny LM whose continuations run to max_tokens (eos never comes)."""
    torch.manual_seed(0)
    tok = SubwordTokenizer.train(TEXT, TEXT, vocab_size=25)
    cfg = LMConfig.preset("tiny", vocab_size=tok.src_vocab_size, max_len=128, tie_output=False)
    lm = TransformerLM(cfg)
    with torch.no_grad():
        lm.output_proj.bias[cfg.eos_id] = -1e4
    state = {"tokenizer": tok.state_dict(), "experiment": {}, "arch": "lm", "model_config": cfg.to_dict()}
    return save_checkpoint({**state, "model": lm.state_dict()}, tmp_path_factory.mktemp("lm") / "lm.pt")


@pytest.fixture(scope="module")
def url(ckpt):
    """A live server (the model on a thread of it) that asks for a key."""
    with app_server(create_app(load_models([f"lm={ckpt}"], device="cpu"), api_keys=(KEY.encode(),))) as url:
        yield url


@pytest.fixture
def client(url):
    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=60)


def generate(url: str, **body) -> dict:
    r = httpx.post(f"{url}/v1/generate", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["generations"][0]


def test_the_client_lists_the_models(client):
    assert [m.id for m in client.models.list()] == ["lm"]


def test_a_greedy_completion_is_generate_s_continuation_whole_and_streamed(client, url):
    done = client.completions.create(model="lm", prompt="A dog", max_tokens=12, temperature=0)
    ours = generate(url, text="A dog", max_len_b=13)  # 12 tokens and the end
    (choice,) = done.choices
    assert ours["text"] == "A dog" + choice.text  # the text after the prompt, its space included
    assert choice.finish_reason == "length" and done.usage.completion_tokens == 12
    assert done.usage.prompt_tokens > 0 and done.usage.total_tokens == done.usage.prompt_tokens + 12
    chunks = list(
        client.completions.create(
            model="lm", prompt="A dog", max_tokens=12, temperature=0, stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    assert "".join(c.choices[0].text for c in chunks if c.choices) == choice.text
    assert len([c for c in chunks if c.choices]) > 2  # token by token, not one piece
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage.completion_tokens == 12 and not chunks[-1].choices
    echoed = client.completions.create(model="lm", prompt="A dog", max_tokens=12, temperature=0, echo=True)
    assert echoed.choices[0].text == "A dog" + choice.text


def test_samples_follow_the_seed_and_streamed_samples_equal_whole_ones(client):
    ask = dict(model="lm", prompt="Two men", max_tokens=10, temperature=1.3, top_p=0.9, seed=7)
    three = client.completions.create(n=3, **ask)
    assert [c.index for c in three.choices] == [0, 1, 2]
    assert [c.text for c in client.completions.create(n=3, **ask).choices] == [c.text for c in three.choices]
    one = client.completions.create(**ask).choices[0].text
    streamed = "".join(c.choices[0].text for c in client.completions.create(stream=True, **ask))
    assert streamed == one
    many = client.completions.create(model="lm", prompt=["A dog", "The cat"], max_tokens=5, temperature=0)
    assert [c.index for c in many.choices] == [0, 1]


def test_a_stop_sequence_ends_the_text_before_it_whole_and_streamed(client):
    ask = dict(model="lm", prompt="The cat", max_tokens=30, temperature=0)
    full = client.completions.create(**ask).choices[0].text
    stop = full[8:10]
    expected = full[: full.find(stop)]
    done = client.completions.create(stop=[stop, "never-there"], **ask).choices[0]
    assert (done.text, done.finish_reason) == (expected, "stop")
    chunks = list(client.completions.create(stop=stop, stream=True, **ask))
    assert "".join(c.choices[0].text for c in chunks) == expected
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_chat_continues_its_messages_whole_and_streamed(client, url):
    messages = [
        {"role": "system", "content": "A dog runs ."},
        {"role": "user", "content": [{"type": "text", "text": "Two men"}]},
    ]
    done = client.chat.completions.create(model="lm", messages=messages, max_tokens=9, temperature=0)
    ours = generate(url, text="A dog runs .\nTwo men", max_len_b=10)
    message = done.choices[0].message
    assert message.role == "assistant" and message.content == ours["continuation"]
    assert done.object == "chat.completion" and done.choices[0].finish_reason == "length"
    chunks = list(
        client.chat.completions.create(
            model="lm", messages=messages, max_completion_tokens=9, temperature=0, stream=True
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == message.content
    assert chunks[-1].choices[0].finish_reason == "length"


@pytest.mark.parametrize(
    "ask, field",
    [
        (dict(logprobs=3), "logprobs"),
        (dict(presence_penalty=0.5), "presence_penalty"),
        (dict(n=2, temperature=0), "n"),
        (dict(n=2, stream=True), "n"),
        (dict(stop=["a", "b", "c", "d", "e"]), "stop"),
        (dict(max_tokens=0), "max_tokens"),
        (dict(temperature=3), "temperature"),
        (dict(extra_body={"colour": "red"}), "colour"),
    ],
)
def test_what_attnkit_cannot_honour_is_a_400_naming_the_field(client, ask, field):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="lm", prompt="A dog", **ask)
    error = e.value.body
    assert field in error["message"] and error["type"] == "invalid_request_error", error
    assert len(error["message"].splitlines()) == 1


def test_the_client_hears_a_missing_model_and_a_wrong_key(client, url):
    with pytest.raises(openai.NotFoundError) as e:
        client.completions.create(model="gpt-4", prompt="A dog", max_tokens=2)
    assert "unknown model 'gpt-4'" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="lm", messages=[{"role": "tool", "content": "x"}])
    stranger = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-wrong-0123456789abc", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        stranger.completions.create(model="lm", prompt="A dog", max_tokens=2)
    assert e.value.body["code"] == "invalid_api_key" and "sk-wrong" not in str(e.value)


def test_stop_sequences_are_held_back_only_while_they_may_be_starting():
    assert cut("a dog runs", ("g r", "x")) == ("a do", True)
    assert cut("a dog", ("x",)) == ("a dog", False)
    assert held_back("a do", ("dog",)) == 2 and held_back("a d", ("dog",)) == 1
    assert held_back("a dog", ("dog",)) == 0 and held_back("abc", ()) == 0
    # a limit of 4 holds 3 tokens and the end of text: 3 tokens ran out of room, 2 ended
    assert finish_reason([1, 2], 4, False) == "stop" and finish_reason([1, 2, 3], 4, False) == "length"
    assert finish_reason([1, 2, 3], 4, True) == "stop"
