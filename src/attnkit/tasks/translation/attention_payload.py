"""Every attention of one translation as plain JSON: pieces, words, tensors and a word alignment.

Shared by ``POST /v1/attention`` and ``attnkit attention --html`` (the page draws the same JSON).

Three token sequences: ``src`` (the source pieces), ``tgt`` (the produced pieces + ``</s>``: what
each decoder position predicts) and ``tgt_in`` (``<s>`` + the produced pieces: what each decoder
position reads). Kinds: ``encoder_self`` rows src x cols src, ``decoder_self`` tgt_in x tgt_in,
``cross`` tgt x src; each ``weights`` is layers x heads x rows x cols, rounded to 3 decimals.

Words: :func:`attnkit.data.pieces.words`. Word-level maps average the rows of a
word's pieces (each row stays a distribution) and sum its columns (the attention mass it gets).

Beside the weights, each kind has ``rollout`` (and ``flow``, when asked for: seconds on long
sentences, so at most ``FLOW_MAX`` pieces) as one rows x cols map: its self-attention followed down
the layers to the input pieces, cross-attention through the encoder's
(:mod:`attnkit.attention.rollout`). ``heads`` scores every head on this one translation, per kind
layers x heads: ``importance`` (Michel et al.'s |dL/dxi_h| of the model's loss of its own output;
absent for an int8 model, which has no gradient), ``confidence`` and ``entropy`` (:mod:`attnkit.heads`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ...attention.rollout import mixing, through
from ...data.pieces import SPECIALS, words
from ...decoding.defaults import BEAM
from ...errors import ConfigError
from ...heads import head_scores
from ...loss import LossOutput
from ...quantize import Int8Linear
from .maps import AttentionMaps, attention_maps
from .translator import Translator

FLOW_MAX = 64  # pieces on either side: attention flow takes seconds beyond (rollout does not)


def word_level(weights: Tensor, rows: list[int], cols: list[int]) -> Tensor:
    """(..., R, C) piece attention -> (..., R', C') word attention: mean over rows, sum over cols."""
    r = torch.zeros(max(rows) + 1, len(rows), dtype=weights.dtype)
    r[rows, range(len(rows))] = 1.0
    r /= r.sum(dim=1, keepdim=True)  # (R', R) averaging
    c = torch.zeros(len(cols), max(cols) + 1, dtype=weights.dtype)
    c[range(len(cols)), cols] = 1.0  # (C, C') summing
    return r @ weights @ c


def alignment(cross: Tensor, tgt: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    """Each target word's most attended source word.

    From the cross-attention of the last-but-one decoder layer (the last when there is one),
    averaged over heads: the layer whose attention aligns best (Garg et al., 2019).
    """
    layer = max(cross.size(0) - 2, 0)
    w = word_level(cross[layer].mean(0), tgt["word_of_piece"], src["word_of_piece"])  # (T', S')
    links = []
    for j, word in enumerate(tgt["words"]):
        if word in SPECIALS or w.size(1) == 0:
            continue
        i = int(w[j].argmax())
        links.append({"tgt_word": j, "src_word": i, "weight": round(float(w[j, i]), 3)})
    return {"layer": layer, "links": links}


def _sequence(pieces: list[str]) -> dict[str, Any]:
    ws, index = words(pieces)
    return {"pieces": pieces, "words": ws, "word_of_piece": index}


def _rounded(x: Tensor) -> list:
    return x.double().round(decimals=3).tolist()


def attention_payload(
    translator: Translator, text: str, *, beam: int = BEAM, flow: bool = False
) -> dict[str, Any]:
    """Translate ``text`` and return its attention maps as JSON-ready data (see the module doc)."""
    maps = attention_maps(translator, text, beam=beam)
    longest = max(len(maps.src_pieces), len(maps.tgt_pieces))
    if flow and longest > FLOW_MAX:
        raise ConfigError(f"flow follows at most {FLOW_MAX} pieces a side; this has {longest}: use rollout")
    tgt_pieces = maps.tgt_pieces  # produced pieces + "</s>"
    seqs = {
        "src": _sequence(maps.src_pieces),
        "tgt": _sequence(tgt_pieces),
        "tgt_in": _sequence(["<s>", *tgt_pieces[:-1]]),
    }
    methods = {
        method: followed(maps, method) for method in ("rollout", "flow") if flow or method == "rollout"
    }
    kinds = {}
    for kind, weights, rows, cols in (
        ("encoder_self", maps.encoder_self, "src", "src"),
        ("decoder_self", maps.decoder_self, "tgt_in", "tgt_in"),
        ("cross", maps.cross, "tgt", "src"),
    ):
        if weights is not None:
            L, H = weights.shape[:2]
            kinds[kind] = {"rows": rows, "cols": cols, "layers": L, "heads": H, "weights": _rounded(weights)}
            kinds[kind] |= {
                method: _rounded(views[kind]) for method, views in methods.items() if kind in views
            }
    result = maps.translation
    assert result is not None  # attention_maps keeps it
    return {
        "text": text,
        "translation": result.text,
        "score": result.score,
        "beam": beam,
        "sequences": seqs,
        "attention": kinds,
        "alignment": alignment(maps.cross, seqs["tgt"], seqs["src"]),
    } | ({"heads": heads} if (heads := _heads(translator, maps)) is not None else {})


def followed(maps: AttentionMaps, method: str) -> dict[str, Tensor]:
    """Per kind, one map by ``method`` (rollout or flow): self-attention followed down its layers,
    cross-attention (the last layer's, mean of heads) through the encoder's."""
    found = {}
    if maps.encoder_self is not None:
        found["encoder_self"] = encoder = mixing(maps.encoder_self, method)  # (S, S)
        found["cross"] = through(maps.cross, encoder)  # (T, S)
    if maps.decoder_self is not None:
        found["decoder_self"] = mixing(maps.decoder_self, method)  # (T, T), causal
    return found


def _heads(translator: Translator, maps: AttentionMaps) -> dict[str, dict[str, list]] | None:
    """Every head scored on this translation: the model's summed loss of its own output (None for a
    model without multi-head attention: the RNN's one additive head)."""
    from ...heads import attention_heads

    model, src, tgt_in = translator.model, maps.src, maps.tgt_in
    try:
        attention_heads(model)
    except ConfigError:
        return None
    assert src is not None and tgt_in is not None  # attention_maps keeps them
    eos = torch.full((1, 1), translator.tokenizer.eos_id, device=tgt_in.device)
    tgt_out = torch.cat([tgt_in[:, 1:], eos], dim=1)  # (1, T): what each position predicts

    def loss_of(_) -> LossOutput:
        logits = model(src, tgt_in)  # (1, T, V)
        loss = F.cross_entropy(logits[0].float(), tgt_out[0], reduction="sum")
        return LossOutput(loss, loss.detach(), torch.tensor(tgt_out.size(1)))

    differentiable = not any(isinstance(m, Int8Linear) for m in model.modules())
    with torch.enable_grad():
        scores = head_scores(model, [None], loss_of, importance=differentiable)
    named = {"encoder": "encoder_self", "decoder": "decoder_self", "cross": "cross"}  # as the maps are
    return {
        named[kind]: {name: values.double().round(decimals=6).tolist() for name, values in found.items()}
        for kind, found in scores.items()
    }
