"""``--engine auto``: CTranslate2 where it finds the same tokens as torch, torch where it cannot
(each choice said on stderr), token for token the engine it chose; on the server, what CTranslate2
refuses (sampling) decodes with torch instead of answering 422.

The model is tests/export_helpers.py's small Multi30k model (trained once per session); 30
test_2016_flickr sentences at the default search (beam 4, length penalty 0.6).
"""

from __future__ import annotations

import pytest
import torch

from cli_helpers import cli
from export_helpers import engine_setup

N_SENTENCES = 30


@pytest.fixture(scope="module")
def setup():
    """(checkpoint in a folder of its own, so its cache starts empty; input file)."""
    return engine_setup("auto", N_SENTENCES)


@pytest.mark.slow
def test_auto_is_ctranslate2_token_for_token_and_torch_where_ctranslate2_refuses(setup, capsys):
    ckpt, src = setup
    flags = ("--checkpoint", ckpt, "--input", src, "--device", "cpu")
    code, torch_out, err = cli(capsys, "translate", *flags)
    assert code == 0, err
    code, ct2_out, _ = cli(capsys, "translate", *flags, "--engine", "ctranslate2")
    assert ct2_out != torch_out  # the default length penalty: CTranslate2 ranks some beams otherwise
    code, auto_out, err = cli(capsys, "translate", *flags, "--engine", "auto")
    assert code == 0 and "engine auto: torch (a beam search's length penalty" in err, err
    assert auto_out == torch_out and len(auto_out.splitlines()) == N_SENTENCES
    for search in (("--beam", 1), ("--length-penalty", 0)):  # where they agree: CTranslate2
        code, ct2_out, _ = cli(capsys, "translate", *flags, *search, "--engine", "ctranslate2")
        code, auto_out, err = cli(capsys, "translate", *flags, *search, "--engine", "auto")
        assert code == 0 and "engine auto: ctranslate2" in err, err
        assert auto_out == ct2_out == cli(capsys, "translate", *flags, *search)[1]
    sampled = ("--sample", "--seed", 3)
    code, torch_samples, _ = cli(capsys, "translate", *flags, *sampled)
    code, auto_samples, err = cli(capsys, "translate", *flags, *sampled, "--engine", "auto")
    assert code == 0 and "engine auto: torch (does not sample" in err, err
    assert auto_samples == torch_samples


def test_auto_keeps_torch_for_what_ctranslate2_cannot_hold():
    from attnkit.decoding import SearchOptions
    from attnkit.model import RNNConfig, RNNSeq2Seq, Transformer, TransformerConfig
    from attnkit.tasks.translation.engine_choice import auto_engine

    cpu = torch.device("cpu")
    cfg = TransformerConfig.preset("tiny", src_vocab_size=40, tgt_vocab_size=40)
    model = Transformer(cfg)
    cases = {
        "an ensemble": dict(ensemble=True),
        "--compile": dict(compile=True),
        "--quantize int8": dict(quantize="int8"),
    }
    for words, flags in cases.items():
        engine, why = auto_engine(model, cpu, **flags)
        assert engine == "torch" and words in why, (flags, why)
    assert auto_engine(model, torch.device("mps"))[0] == "torch"
    rnn = RNNSeq2Seq(RNNConfig.preset("tiny", src_vocab_size=40, tgt_vocab_size=40))
    assert auto_engine(rnn, cpu) == ("torch", "CTranslate2 holds Transformers, not RNNSeq2Seq")
    engine, why = auto_engine(model, cpu, SearchOptions(beam=4, min_length=2))
    assert engine == "torch" and "min length" in why
    if _has_ct2():
        assert auto_engine(model, cpu, SearchOptions(beam=4, length_penalty=0.0))[0] == "ctranslate2"
        assert auto_engine(model, cpu, SearchOptions(beam=4))[0] == "torch"  # GNMT's length penalty


def _has_ct2() -> bool:
    import importlib.util

    return importlib.util.find_spec("ctranslate2") is not None


@pytest.mark.slow
def test_the_server_s_auto_answers_what_ctranslate2_refuses_with_torch(setup):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from attnkit.serve.app import create_app
    from attnkit.serve.tasks import load_models

    ckpt, src = setup
    text = src.read_text(encoding="utf-8").splitlines()[:8]
    answers = {}
    for engine in ("torch", "ctranslate2", "auto"):
        with TestClient(create_app(load_models([f"m={ckpt}"], device="cpu", engine=engine))) as c:
            beam = c.post("/v1/translate", json={"text": text, "beam": 4, "length_penalty": 0})
            sampled = c.post("/v1/translate", json={"text": text, "sample": True, "seed": 5})
            listed = c.get("/v1/models").json()["models"][0]
        texts = [t["text"] for t in beam.json()["translations"]]  # scores: each engine's own (close)
        answers[engine] = (texts, sampled.status_code, sampled.json(), listed.get("engine"))
    assert answers["auto"][0] == answers["ctranslate2"][0] == answers["torch"][0]
    assert answers["ctranslate2"][1] == 422  # CTranslate2 alone refuses sampling
    assert answers["auto"][1] == 200 and answers["auto"][2] == answers["torch"][2]  # torch's samples
    assert answers["auto"][3] == "auto: ctranslate2"
