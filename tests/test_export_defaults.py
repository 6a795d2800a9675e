"""Exported models work under each runtime's default calls.

CTranslate2's ``translate_batch`` decodes up to 256 target positions and reads up to 1024 source
ones by default; a sinusoidal table cut at ``model.max_len`` (64 here) made it fail with "No position
encodings are defined for positions >= 64". The exported table now covers those positions.
"""

from __future__ import annotations

import pytest
import torch

from attnkit.decoding import greedy_search
from attnkit.export import export_checkpoint, load_for_export
from export_helpers import flickr_sentences, require, trained_checkpoint, workdir


@pytest.fixture(scope="module")
def translator():
    require("ctranslate2")
    import ctranslate2

    out = workdir() / "ct2-defaults"
    export_checkpoint(trained_checkpoint(), "ctranslate2", out)
    return ctranslate2.Translator(str(out), device="cpu", intra_threads=1)


def test_translate_batch_with_no_length_options_on_a_long_input(translator):
    model, tokenizer = load_for_export(trained_checkpoint())
    sources, _ = flickr_sentences(8)
    pieces = [tokenizer.id_to_piece(i, side="src") for i in tokenizer.encode(" ".join(sources), side="src")]
    assert len(pieces) > 2 * model.config.max_len
    (r,) = translator.translate_batch([pieces])  # default beam 2, max_decoding_length 256
    assert r.hypotheses[0]


def test_translate_batch_greedy_default_lengths_equal_attnkit(translator):
    model, tokenizer = load_for_export(trained_checkpoint())
    torch.set_num_threads(1)
    sources, _ = flickr_sentences(20)
    for text in sources:
        ids = tokenizer.encode(text, side="src")
        ours = greedy_search(model, torch.tensor([ids]))[0].tokens
        (r,) = translator.translate_batch([[tokenizer.id_to_piece(i, side="src") for i in ids]], beam_size=1)
        if len(ours) + 1 < min(int(1.5 * len(ids) + 10), model.config.max_len - 1):  # ended in eos
            assert r.hypotheses[0] == [tokenizer.id_to_piece(i, side="tgt") for i in ours]
