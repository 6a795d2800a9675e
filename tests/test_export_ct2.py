"""CTranslate2 export: the converted model decodes exactly what attnkit decodes.

Parity on the first 100 test_2016_flickr sentences with a small model trained on Multi30k in the
session (tests/export_helpers.py): greedy and beam 4 token sequences identical, float32. Beam search
compares with length_penalty 0 on both sides: CTranslate2 normalizes by length^alpha, attnkit by
the GNMT penalty ((5 + length) / 6)^alpha, so only alpha = 0 asks both for the same ranking.
"""

from __future__ import annotations

import json

import pytest
import torch

from attnkit.decoding import beam_search, greedy_search
from attnkit.export import export_checkpoint, load_for_export
from attnkit.export.ctranslate2 import RUNTIME_POSITIONS
from export_helpers import flickr_sentences, length_limit, require, trained_checkpoint, workdir

N_SENTENCES = 100


@pytest.fixture(scope="module")
def exported():
    require("ctranslate2")
    import ctranslate2

    ckpt = trained_checkpoint()
    out = workdir() / "ct2"
    export_checkpoint(ckpt, "ctranslate2", out)
    model, tokenizer = load_for_export(ckpt)
    translator = ctranslate2.Translator(str(out), device="cpu", inter_threads=1, intra_threads=1)
    return model, tokenizer, translator, out


def _sources(tokenizer, max_len: int) -> list[list[int]]:
    sources, _ = flickr_sentences(N_SENTENCES)
    return [tokenizer.encode(s, side="src")[:max_len] for s in sources]


def _attnkit(model, ids: list[list[int]], beam: int) -> list[list[int]]:
    torch.set_num_threads(1)
    out = []
    for seq in ids:  # one sentence at a time: parity must not depend on batch composition
        src = torch.tensor([seq])
        if beam == 1:
            out.append(greedy_search(model, src)[0].tokens)
        else:
            out.append(beam_search(model, src, beam_size=beam, length_penalty=0.0)[0][0].tokens)
    return out


def _ct2(translator, tokenizer, ids: list[list[int]], beam: int, max_len: int) -> list[list[int]]:
    """CTranslate2 with attnkit's per-sentence length limit (limit - 1 tokens before the forced eos)."""
    piece_id = {tokenizer.id_to_piece(i, side="tgt"): i for i in range(tokenizer.tgt_vocab_size)}
    out = []
    for seq in ids:
        pieces = [tokenizer.id_to_piece(i, side="src") for i in seq]
        (r,) = translator.translate_batch(
            [pieces],
            beam_size=beam,
            length_penalty=0.0,
            max_decoding_length=length_limit(len(seq), max_len) - 1,
        )
        out.append([piece_id[p] for p in r.hypotheses[0]])
    return out


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.slow
def test_ctranslate2_float32_outputs_equal_attnkit(exported, beam):
    model, tokenizer, translator, _ = exported
    ids = _sources(tokenizer, model.config.max_len)
    ours = _attnkit(model, ids, beam)
    theirs = _ct2(translator, tokenizer, ids, beam, model.config.max_len)
    finished = sum(len(t) + 1 < length_limit(len(s), model.config.max_len) for s, t in zip(ids, ours))
    assert finished >= N_SENTENCES // 2, f"only {finished} sentences ended in eos: the model is too weak"
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert not differ, (
        f"beam {beam}: {len(differ)}/{len(ids)} differ, "
        f"first {differ[0]}: {ours[differ[0]]} vs {theirs[differ[0]]}"
    )


def test_exported_folder_holds_vocabularies_and_sentencepiece(exported):
    model, tokenizer, _, out = exported
    config = json.loads((out / "config.json").read_text())
    assert config["decoder_start_token"] == tokenizer.id_to_piece(model.config.bos_id, side="tgt")
    assert config["eos_token"] == tokenizer.id_to_piece(model.config.eos_id, side="tgt")
    assert config["add_source_bos"] is False and config["add_source_eos"] is False
    vocab = (
        json.loads((out / "shared_vocabulary.json").read_text())
        if (out / "shared_vocabulary.json").exists()
        else json.loads((out / "source_vocabulary.json").read_text())
    )
    assert vocab == [tokenizer.id_to_piece(i, side="src") for i in range(tokenizer.src_vocab_size)]
    assert (out / "sentencepiece.model").read_bytes() == tokenizer.state_dict()["src"]


def test_int8_export_translates(exported, tmp_path):
    """int8 weights: a smaller model.bin that still decodes (its BLEU change is in docs/BENCHMARKS.md)."""
    import ctranslate2

    model, tokenizer, _, out = exported
    int8 = tmp_path / "int8"
    export_checkpoint(trained_checkpoint(), "ctranslate2", int8, quantization="int8")
    table = RUNTIME_POSITIONS * model.config.d_model * 4  # the float32 sinusoids, kept in float32
    assert (int8 / "model.bin").stat().st_size - table < 0.5 * ((out / "model.bin").stat().st_size - table)
    translator = ctranslate2.Translator(str(int8), device="cpu", compute_type="int8", intra_threads=1)
    ids = _sources(tokenizer, model.config.max_len)[:20]
    got = _ct2(translator, tokenizer, ids, 1, model.config.max_len)
    assert sum(len(t) > 0 for t in got) >= 15


def test_pre_norm_checkpoint_exports_with_equal_outputs():
    """Pre-norm adds the final LayerNorms; a tiny untrained pre-norm model must match too."""
    require("ctranslate2")
    import ctranslate2

    from attnkit.checkpoint import save_checkpoint
    from attnkit.model import Transformer

    model, tokenizer = load_for_export(trained_checkpoint())
    torch.manual_seed(3)
    cfg = model.config.replace(norm="pre", activation="gelu", share_vocab=False, tie_output=False)
    pre = Transformer(cfg).eval()
    for p in pre.parameters():  # make the final norms and biases matter
        p.data.add_(torch.randn_like(p) * 0.05)
    ckpt = workdir() / "pre.pt"
    save_checkpoint(
        {
            "arch": "transformer",
            "model_config": cfg.to_dict(),
            "tokenizer": tokenizer.state_dict(),
            "model": pre.state_dict(),
        },
        ckpt,
    )
    out = workdir() / "ct2-pre"
    export_checkpoint(ckpt, "ctranslate2", out)
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    ids = _sources(tokenizer, cfg.max_len)[:10]
    assert _attnkit(pre, ids, 1) == _ct2(translator, tokenizer, ids, 1, cfg.max_len)


@pytest.mark.parametrize(
    "overrides",
    [
        {"positional": "learned"},
        {"activation": "swish", "bias": False},
        {"output_bias": True, "share_vocab": False},
        {"max_len": 40, "norm": "pre", "bias": False, "tie_output": False},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_every_converted_config_field_scores_equally(overrides):
    """Each field the converter writes (rather than refuses) changes the model; CTranslate2 must follow.

    The models are untrained (jittered random weights), so their greedy outputs repeat tokens with
    near-tied scores and token sequences are a poor check; instead CTranslate2 scores attnkit's greedy
    output (``score_batch``) and every token's log-probability must agree within 1e-4. CTranslate2
    never gives pad and bos any probability (bias -1e4), so attnkit's side leaves them out as well.
    """
    require("ctranslate2")
    import ctranslate2

    from export_helpers import variant_checkpoint

    name = "-".join(f"{k}{v}" for k, v in overrides.items())
    ckpt = variant_checkpoint(f"ct2-{name}", **overrides)
    model, tokenizer = load_for_export(ckpt)
    cfg = model.config
    out = workdir() / f"ct2-{name}"
    export_checkpoint(ckpt, "ctranslate2", out)
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    worst = 0.0
    for seq in _sources(tokenizer, cfg.max_len)[:8]:
        hyp = greedy_search(model, torch.tensor([seq]))[0].tokens
        with torch.no_grad():
            logits = model(torch.tensor([seq]), torch.tensor([[cfg.bos_id, *hyp]]))[0]  # (T, V)
        logits[:, [cfg.pad_id, cfg.bos_id]] = float("-inf")
        ours = (
            torch.log_softmax(logits, dim=-1).gather(1, torch.tensor([*hyp, cfg.eos_id])[:, None]).squeeze(1)
        )
        pieces = lambda ids, side: [tokenizer.id_to_piece(i, side=side) for i in ids]  # noqa: E731
        (r,) = translator.score_batch([pieces(seq, "src")], [pieces(hyp, "tgt")])
        assert len(r.log_probs) == len(hyp) + 1
        worst = max(worst, (ours - torch.tensor(r.log_probs)).abs().max().item())
    assert worst <= 1e-4, worst
