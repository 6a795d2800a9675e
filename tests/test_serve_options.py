"""The decoding options over HTTP: ``prefix`` for /v1/translate; ``min_length``,
``no_repeat_ngram_size`` and ``repetition_penalty`` for /v1/translate and /v1/generate (streamed too).
Each answers what the Python API answers with the same options; a bad value is a 422 in one line."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("fastapi", reason="attnkit serve needs the serve extra: pip install -e '.[serve]'")
from fastapi.testclient import TestClient  # noqa: E402

from attnkit.checkpoint import save_checkpoint  # noqa: E402
from attnkit.model import LMConfig, TransformerLM  # noqa: E402
from attnkit.serve.app import create_app  # noqa: E402
from attnkit.serve.tasks import load_models  # noqa: E402
from attnkit.tasks.language_model import LanguageModel  # noqa: E402
from attnkit.tasks.translation import Translator  # noqa: E402
from fault_helpers import make_tokenizer, write_checkpoint  # noqa: E402

SENTENCES = ["Ein mann.", "Zwei hunde.", "", "Ein kind."]
CONTROLS = {"min_length": 4, "no_repeat_ngram_size": 2, "repetition_penalty": 1.5}


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    torch.set_num_threads(1)
    out, tok = tmp_path_factory.mktemp("options"), make_tokenizer(0)
    mt = write_checkpoint(out / "mt.pt", tok, seed=0)
    torch.manual_seed(0)
    cfg = LMConfig.preset("tiny", vocab_size=tok.src_vocab_size, max_len=32)
    state = {"tokenizer": tok.state_dict(), "experiment": {}, "arch": "lm", "model_config": cfg.to_dict()}
    lm = save_checkpoint({**state, "model": TransformerLM(cfg).state_dict()}, out / "lm.pt")
    return mt, lm


@pytest.fixture(scope="module")
def client(ckpts):
    mt, lm = ckpts
    with TestClient(create_app(load_models([f"mt={mt}", f"lm={lm}"], device="cpu"))) as c:
        yield c


@pytest.mark.parametrize("beam", [1, 3], ids=["batched", "continuous"])
@pytest.mark.parametrize(
    "options",
    [CONTROLS, {"prefix": "Ein mann"}, {"prefix": ["Ein", "", "", "Zwei"], **CONTROLS}],
    ids=["controls", "prefix", "prefix-per-sentence"],
)
def test_translate_answers_as_the_translator(client, ckpts, beam, options):
    r = client.post("/v1/translate", json={"text": SENTENCES, "beam": beam, **options})
    assert r.status_code == 200, r.text
    want = Translator.from_checkpoint(ckpts[0], device="cpu").translate(SENTENCES, beam=beam, **options)
    assert [t["text"] for t in r.json()["translations"]] == [w.text for w in want]
    prefix = options.get("prefix")
    if prefix is not None:
        prefixes = [prefix] * len(SENTENCES) if isinstance(prefix, str) else prefix
        for text, p, s in zip([w.text for w in want], prefixes, SENTENCES, strict=True):
            assert text.startswith(p) or not s  # the forced words come first


def test_the_controls_change_a_translation(client):
    plain, controlled = (
        client.post("/v1/translate", json={"text": SENTENCES[1], "beam": 1, **o}).json()
        for o in ({}, CONTROLS)
    )
    assert plain != controlled


@pytest.mark.parametrize("sample", [False, True], ids=["greedy", "sampled"])
def test_generate_answers_as_the_language_model_streamed_or_not(client, ckpts, sample):
    body = {"text": "Ein mann", "max_tokens": 12, "sample": sample, "seed": 3, **CONTROLS}
    r = client.post("/v1/generate", json=body)
    assert r.status_code == 200, r.text
    (want,) = LanguageModel.from_checkpoint(ckpts[1], device="cpu").generate(
        ["Ein mann"], max_new_tokens=12, sample=sample, seed=3, **CONTROLS
    )[0]
    (got,) = r.json()["generations"]
    assert got["text"] == want.text and got["score"] == pytest.approx(want.score, abs=1e-5)
    assert len(want.tokens) >= CONTROLS["min_length"]
    lines = client.post("/v1/generate", json={**body, "stream": True}).text.splitlines()
    data = [json.loads(x[6:]) for x in lines if x.startswith("data: {")]
    assert "".join(d["text"] for d in data[:-1]) == want.continuation and data[-1] == r.json()


@pytest.mark.parametrize(
    "path, body, status, fragment",
    [
        (
            "/v1/translate",
            {"repetition_penalty": 0},
            422,
            "repetition_penalty: Input should be greater than or equal to 0.01",
        ),
        ("/v1/generate", {"repetition_penalty": 101.0}, 422, "repetition_penalty: Input should be less than"),
        (
            "/v1/generate",
            {"repetition_penalty": "2"},
            422,
            "repetition_penalty: Input should be a valid number",
        ),
        ("/v1/translate", {"no_repeat_ngram_size": -1}, 422, "no_repeat_ngram_size: Input should be greater"),
        (
            "/v1/generate",
            {"no_repeat_ngram_size": 1.5},
            422,
            "no_repeat_ngram_size: Input should be a valid integer",
        ),
        ("/v1/translate", {"min_length": -2}, 422, "min_length: Input should be greater than or equal to 0"),
        (
            "/v1/generate",
            {"min_length": 9, "max_tokens": 8},
            422,
            "min_length 9 is more than the length limit allows (max_len_b 8",
        ),
        ("/v1/generate", {"prefix": "Ein"}, 422, "unknown field 'prefix'"),
        ("/v1/translate", {"prefix": 5}, 422, "prefix"),
        ("/v1/translate", {"prefix": ["a", "b"]}, 422, "prefix has 2 items for 1 sentences"),
        ("/v1/translate", {"prefix": "x" * 3000}, 413, "prefix 0 has 3000 characters"),
        (
            "/v1/translate",
            {"prefix": "Zwei hunde laufen vor dem haus"},
            422,
            "the prefix of sentence 1",
        ),
    ],
)
def test_a_bad_option_is_refused_in_one_line(client, path, body, status, fragment):
    r = client.post(path, json={"text": "Ein mann.", **body})
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert fragment in error and "\n" not in error


def test_the_controls_change_a_generation(client):
    body = {"text": "Ein mann", "max_tokens": 12}
    plain, controlled = (client.post("/v1/generate", json={**body, **o}).json() for o in ({}, CONTROLS))
    assert plain["generations"][0]["text"] != controlled["generations"][0]["text"]


def test_translate_samples_as_the_translator(client, ckpts):
    # The whole SearchOptions is the request's: sampling too, the same seed giving the same samples.
    body = {"text": SENTENCES, "sample": True, "nbest": 2, "temperature": 0.7, "seed": 5}
    first, again = (client.post("/v1/translate", json=body).json() for _ in range(2))
    assert first == again
    want = Translator.from_checkpoint(ckpts[0], device="cpu").translate(
        SENTENCES, sample=True, nbest=2, temperature=0.7, seed=5
    )
    got = [[h["text"] for h in t["nbest"]] for t in first["translations"]]
    assert got == [[text for text, _ in w.nbest] for w in want]
    r = client.post("/v1/translate", json={"text": "Ein mann.", "temperature": 0.7})
    assert r.status_code == 422 and "ask for it with sample" in r.json()["error"]
