"""``--engine ctranslate2``: the same translations as ``--engine torch``, an export made once per
checkpoint content, and what CTranslate2 cannot honour refused in one line (exit 2, HTTP 422).

The model is tests/export_helpers.py's small Multi30k model (trained once per session, shared with
the exporter's parity tests); 30 test_2016_flickr sentences, greedy and beam 4 (length penalty 0).
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from cli_helpers import assert_user_error, cli
from export_helpers import engine_setup, flickr_sentences

N_SENTENCES = 30


@pytest.fixture(scope="module")
def setup():
    """(checkpoint in a folder of its own, so its cache starts empty; input file)."""
    return engine_setup("engine", N_SENTENCES)


def _exports(ckpt):
    return sorted(p for p in ckpt.with_name(ckpt.name + ".ct2").iterdir() if not p.name.startswith("."))


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.slow
def test_ctranslate2_engine_translates_as_torch_and_exports_once(setup, capsys, beam):
    ckpt, src = setup
    flags = ("--checkpoint", ckpt, "--input", src, "--beam", beam, "--length-penalty", 0, "--device", "cpu")
    code, torch_out, err = cli(capsys, "translate", *flags)
    assert code == 0, err
    code, ct2_out, err = cli(capsys, "translate", *flags, "--engine", "ctranslate2")
    assert code == 0, err
    assert len(ct2_out.splitlines()) == N_SENTENCES
    assert ct2_out == torch_out  # every sentence, greedy and beam 4
    (export,) = _exports(ckpt)  # one export, whichever test ran first made it
    stamp = (export / "model.bin").stat().st_mtime_ns
    code, again, err = cli(capsys, "translate", *flags, "--engine", "ctranslate2")
    assert (code, again) == (0, ct2_out)
    assert "exported" not in err and (export / "model.bin").stat().st_mtime_ns == stamp


def test_changed_checkpoint_exports_again(setup, capsys):
    from attnkit.checkpoint import load_checkpoint, save_checkpoint

    ckpt, src = setup
    changed = ckpt.with_name("changed.pt")
    shutil.copy(ckpt, changed)
    argv = ("translate", "--checkpoint", changed, "--input", src, "--beam", 1, "--engine", "ctranslate2")
    code, before, err = cli(capsys, *argv)
    assert code == 0 and "exported" in err, err
    (first,) = _exports(changed)
    os.utime(first, (1e9, 1e9))  # an export of long ago (one made in the last minute is left alone)
    state = load_checkpoint(changed)
    with torch.no_grad():
        for tensor in state["model"].values():
            if tensor.is_floating_point():
                tensor.mul_(0.5)  # another model: other translations
    save_checkpoint(state, changed)
    code, after, err = cli(capsys, *argv)
    assert code == 0 and "exported" in err, err
    (second,) = _exports(changed)  # the earlier contents' export is gone: the cache holds what is current
    assert second.name != first.name and after != before


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (("--beam", "1", "--sample"), "does not sample"),
        (("--beam", "4", "--length-penalty", "0", "--min-length", "3"), "beam 1 only"),
        (("--beam", "4", "--length-penalty", "0", "--no-repeat-ngram-size", "2"), "beam 1 only"),
    ],
)
def test_what_ctranslate2_cannot_honour_is_one_line_exit_2(setup, capsys, extra, fragment):
    ckpt, src = setup
    code, _, err = cli(
        capsys, "translate", "--checkpoint", ckpt, "--input", src, "--engine", "ctranslate2", *extra
    )
    assert_user_error(code, err, fragment)


def test_ensemble_is_refused(setup, capsys):
    ckpt, src = setup
    code, _, err = cli(
        capsys, "translate", "--checkpoint", ckpt, ckpt, "--input", src, "--engine", "ctranslate2"
    )
    assert_user_error(code, err, "not an ensemble")


@pytest.mark.slow
def test_server_with_ctranslate2_engine(setup):
    """A real ``attnkit serve --engine ctranslate2`` (one decoding process): /v1/translate answers what
    the torch engine translates, /v1/attention still works, a min_length at beam 4 is a 422."""
    from attnkit.tasks.translation import Translator
    from serve_helpers import live_server, post

    ckpt, _ = setup
    sentences = flickr_sentences(N_SENTENCES)[0][:10]
    expected = [r.text for r in Translator.from_checkpoint(ckpt, device="cpu").translate(sentences, beam=1)]
    with live_server(ckpt, extra=("--engine", "ctranslate2", "--workers", "1")) as (url, _):
        code, body = post(url + "/v1/translate", {"text": sentences, "beam": 1})
        assert code == 200, body
        assert [t["text"] for t in body["translations"]] == expected
        code, body = post(url + "/v1/translate", {"text": sentences, "beam": 4, "length_penalty": 0})
        assert code == 200, body
        code, body = post(url + "/v1/attention", {"text": sentences[0]})
        assert code == 200 and body["attention"], body
        code, body = post(url + "/v1/translate", {"text": sentences[0], "beam": 4})  # the defaults: alpha 0.6
        assert code == 200, body
        code, body = post(url + "/v1/translate", {"text": sentences[0], "beam": 4, "min_length": 3})
        assert code == 422 and "beam 1 only" in body["error"] and "\n" not in body["error"], body


def test_the_default_command_works_with_ctranslate2s_length_penalty(setup, capsys):
    """Beam 4 with attnkit's default length penalty 0.6 decodes through CTranslate2's own penalty."""
    ckpt, src = setup
    code, out, err = cli(capsys, "translate", "--checkpoint", ckpt, "--input", src, "--engine", "ctranslate2")
    assert code == 0, err
    assert len(out.splitlines()) == N_SENTENCES and all(line.strip() for line in out.splitlines())


def test_each_sentence_keeps_its_own_length_limit(setup):
    """CTranslate2 decodes a call at its widest limit; a sentence that reaches its own smaller limit
    is decoded again at that limit. With limits so tight that most sentences reach them, greedy gives
    torch's tokens (a greedy search cut at its limit is the same search), and beam 4 keeps every
    answer within its limit."""
    from attnkit.decoding import length_limits
    from attnkit.tasks.translation import Translator
    from attnkit.tasks.translation.ct2_engine import CT2Translator

    ckpt, _ = setup
    sentences = flickr_sentences(N_SENTENCES)[0]
    engine = CT2Translator.from_checkpoint(ckpt, device="cpu", threads=1, log=lambda _: None)
    torch_side = Translator.from_checkpoint(ckpt, device="cpu")
    tight = {"max_len_a": 0.5, "max_len_b": 2}
    loose = [t.tokens for t in torch_side.translate(sentences, beam=1)]
    expected = [t.tokens for t in torch_side.translate(sentences, beam=1, **tight)]
    assert sum(a != b for a, b in zip(loose, expected)) >= N_SENTENCES // 2  # the limits bind
    assert [t.tokens for t in engine.translate(sentences, beam=1, **tight)] == expected
    prefixed = [t.tokens for t in torch_side.translate(sentences, beam=1, prefix="A", **tight)]
    assert [t.tokens for t in engine.translate(sentences, beam=1, prefix="A", **tight)] == prefixed
    ids, _ = torch_side.encode_sources(sentences)
    limits = length_limits(torch.tensor([len(s) for s in ids]), 0.5, 2, torch_side.max_src_len - 1)
    assert len(set(limits.tolist())) > 3  # several limits in one call
    beams = engine.translate(sentences, beam=4, nbest=2, length_penalty=0, **tight)
    assert all(len(t.tokens) <= limit - 1 for t, limit in zip(beams, limits.tolist()))
    assert all(len(t.nbest) == 2 for t in beams)
