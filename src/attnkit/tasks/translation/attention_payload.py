"""Every attention of one translation as plain JSON: pieces, words, tensors and a word alignment.

Shared by ``POST /v1/attention`` and ``attnkit attention --html`` (the page draws the same JSON).

Three token sequences: ``src`` (the source pieces), ``tgt`` (the produced pieces + ``</s>``: what
each decoder position predicts) and ``tgt_in`` (``<s>`` + the produced pieces: what each decoder
position reads). Kinds: ``encoder_self`` rows src x cols src, ``decoder_self`` tgt_in x tgt_in,
``cross`` tgt x src; each ``weights`` is layers x heads x rows x cols, rounded to 3 decimals.

Words: :func:`attnkit.data.pieces.words`. Word-level maps average the rows of a
word's pieces (each row stays a distribution) and sum its columns (the attention mass it gets).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ...data.pieces import SPECIALS, words
from .attention_maps import attention_maps
from .translator import Translator


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


def attention_payload(translator: Translator, text: str, *, beam: int = 4) -> dict[str, Any]:
    """Translate ``text`` and return its attention maps as JSON-ready data (see the module doc)."""
    maps = attention_maps(translator, text, beam=beam)
    tgt_pieces = maps.tgt_pieces  # produced pieces + "</s>"
    seqs = {
        "src": _sequence(maps.src_pieces),
        "tgt": _sequence(tgt_pieces),
        "tgt_in": _sequence(["<s>", *tgt_pieces[:-1]]),
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
    (result,) = translator.translate([text], beam=beam)
    return {
        "text": text,
        "translation": result.text,
        "score": result.score,
        "beam": beam,
        "sequences": seqs,
        "attention": kinds,
        "alignment": alignment(maps.cross, seqs["tgt"], seqs["src"]),
    }
