"""Every attention weight of one translation, for plotting: ``attention_maps(translator, text)``.

The sentence is translated, then the model re-runs on its own output with the weights returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ...decoding.defaults import BEAM
from ...errors import DataError

if TYPE_CHECKING:
    from .translator import Translation, Translator


@dataclass
class AttentionMaps:
    """Every attention of one translation, per layer and head, for plotting.

    cross (L, H, T, S); encoder_self (L, H, S, S) and decoder_self (L, H, T, T), where the model has them.
    T counts the target pieces plus the final eos. ``src`` (1, S) and ``tgt_in`` (1, T) are the ids
    the model read (``tgt_in``: bos + the translation), ``translation`` what it produced.
    """

    src_pieces: list[str]
    tgt_pieces: list[str]
    cross: Tensor
    encoder_self: Tensor | None
    decoder_self: Tensor | None
    src: Tensor | None = None
    tgt_in: Tensor | None = None
    translation: Translation | None = None


def attention_maps(translator: Translator, text: str, *, beam: int = BEAM) -> AttentionMaps:
    """Translate ``text``, then re-run the model on its own output with the weights returned."""
    (result,) = translator.translate([text], beam=beam)
    if not result.src_pieces:
        raise DataError("the text to translate is empty")
    tok, model = translator.tokenizer, translator.model
    src_ids = tok.encode(text, side="src")[: translator.max_src_len]
    src = torch.tensor([src_ids], device=translator.device)
    tgt_in = torch.tensor([[tok.bos_id, *result.tokens]], device=translator.device)  # (1, T)
    with torch.no_grad():
        enc = model.encode(src, need_weights=True)
        out = model.decode(tgt_in, model.init_state(enc), need_weights=True)

    def stack(ws):
        return None if not ws or ws[0] is None else torch.stack([w[0] for w in ws]).float().cpu()

    return AttentionMaps(
        result.src_pieces,
        result.tgt_pieces,
        stack(out.cross_attn),
        stack(getattr(enc, "self_attn", None)),
        stack(out.self_attn),
        src,
        tgt_in,
        result,
    )
