"""CTranslate2 export of the positions that act inside self-attention: relative (Shaw et al., keys
and values) and rotary. Each model decodes in CTranslate2 exactly what it decodes in attnkit.

The models are untrained (jittered random weights, max_len 40, tests/export_helpers.py), so their
outputs run to the length limit: greedy and beam-4 token sequences must be identical on 20 and 8
test_2016_flickr sentences, and every log-probability CTranslate2 gives (``score_batch`` and beam
scores) within 1e-4 of attnkit's (``min_decoding_length=0``: CTranslate2's default of 1 would forbid
an empty output, which attnkit allows; a hypothesis at the length limit scores without the eos
that attnkit forces there). CTranslate2 never gives pad and bos any probability (bias -1e4);
attnkit's search leaves them out only after the softmax, so these models get an output bias of -1e4
on pad and bos as well: both sides then rank beams by the same distribution.
"""

from __future__ import annotations

import pytest
import torch

from attnkit.decoding import beam_search, greedy_search
from attnkit.export import export_checkpoint, load_for_export
from export_helpers import flickr_sentences, length_limit, require, variant_checkpoint, workdir

VARIANTS = {
    "relative-values": dict(
        positional="relative", relative_clip=4, relative_values=True, max_len=40, output_bias=True
    ),
    "relative-keys-pre": dict(
        positional="relative", relative_clip=3, norm="pre", max_len=40, tie_output=False
    ),
    "rotary": dict(positional="rotary", activation="gelu", output_bias=True, share_vocab=False, max_len=40),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def exported(request):
    require("ctranslate2")
    import ctranslate2

    ckpt = _never_pad_or_bos(variant_checkpoint(f"positions-{request.param}", **VARIANTS[request.param]))
    out = workdir() / f"ct2-positions-{request.param}"
    export_checkpoint(ckpt, "ctranslate2", out)
    model, tokenizer = load_for_export(ckpt)
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    torch.set_num_threads(1)
    sources, _ = flickr_sentences(20)
    ids = [tokenizer.encode(s, side="src")[: model.config.max_len] for s in sources]
    return model, tokenizer, translator, ids


def _never_pad_or_bos(path):
    from attnkit.checkpoint import load_checkpoint, save_checkpoint

    state = load_checkpoint(path)
    cfg = state["model_config"]
    state["model"]["output_proj.bias"][[cfg["pad_id"], cfg["bos_id"]]] = -1e4
    save_checkpoint(state, path)
    return path


def _pieces(tokenizer, ids: list[int], side: str) -> list[str]:
    return [tokenizer.id_to_piece(i, side=side) for i in ids]


def _log_probs(model, src: list[int], hyp: list[int]) -> torch.Tensor:
    """attnkit's log-probability of every token of hyp and the eos after it, pad and bos left out."""
    cfg = model.config
    with torch.no_grad():
        logits = model(torch.tensor([src]), torch.tensor([[cfg.bos_id, *hyp]]))[0]  # (T, V)
    logits[:, [cfg.pad_id, cfg.bos_id]] = float("-inf")
    target = torch.tensor([*hyp, cfg.eos_id])[:, None]  # (T, 1)
    return torch.log_softmax(logits, dim=-1).gather(1, target).squeeze(1)  # (T,)


def test_greedy_outputs_and_scores_equal_attnkit(exported):
    model, tokenizer, translator, ids = exported
    differ, worst = [], 0.0
    for i, seq in enumerate(ids):
        ours = greedy_search(model, torch.tensor([seq]))[0].tokens
        limit = length_limit(len(seq), model.config.max_len)
        (r,) = translator.translate_batch(
            [_pieces(tokenizer, seq, "src")],
            beam_size=1,
            max_decoding_length=limit - 1,
            min_decoding_length=0,
        )
        if r.hypotheses[0] != _pieces(tokenizer, ours, "tgt"):
            differ.append(i)
        (s,) = translator.score_batch([_pieces(tokenizer, seq, "src")], [_pieces(tokenizer, ours, "tgt")])
        worst = max(worst, (_log_probs(model, seq, ours) - torch.tensor(s.log_probs)).abs().max().item())
    assert not differ, f"{len(differ)}/{len(ids)} greedy outputs differ, first sentence {differ[0]}"
    assert worst <= 1e-4, worst


def test_beam_outputs_and_scores_equal_attnkit(exported):
    """Beam 4: the same best hypothesis, and CTranslate2's score is attnkit's log-probability of it.

    At the length limit attnkit ranks the finished beams with the eos it forces there, CTranslate2
    without it, so a hypothesis cut by the limit may differ (still scored exactly); none other may.
    """
    model, tokenizer, translator, ids = exported
    worst, same = 0.0, 0
    piece_id = {tokenizer.id_to_piece(i, side="tgt"): i for i in range(tokenizer.tgt_vocab_size)}
    for seq in ids[:8]:
        (ours,) = beam_search(model, torch.tensor([seq]), beam_size=4, length_penalty=0.0)
        limit = length_limit(len(seq), model.config.max_len)
        (r,) = translator.translate_batch(
            [_pieces(tokenizer, seq, "src")],
            beam_size=4,
            min_decoding_length=0,
            length_penalty=0.0,
            max_decoding_length=limit - 1,
            return_scores=True,
        )
        theirs = [piece_id[p] for p in r.hypotheses[0]]
        at_limit = len(theirs) + 1 >= limit  # CTranslate2 stops there without eos
        same += theirs == ours[0].tokens
        assert theirs == ours[0].tokens or at_limit, f"{theirs} vs {ours[0].tokens}"
        lp = _log_probs(model, seq, theirs)  # (T + 1,) eos last
        worst = max(worst, abs((lp[:-1] if at_limit else lp).sum().item() - r.scores[0]))
    assert same >= 2, f"only {same} of 8 beam outputs are attnkit's"
    assert worst <= 1e-4, worst
