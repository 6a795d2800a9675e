"""Greedy decoding: at every step take the most probable next token (seed 001, section 3)."""

from __future__ import annotations

import torch
from torch import Tensor

from ..model.interface import DecoderState, IncrementalDecoder, Seq2SeqModel
from .common import Hypothesis, start_from_source
from .search import Greedy, run_search


@torch.no_grad()
def greedy_search(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    min_len: int = 0,
    return_attention: bool = False,
) -> list[Hypothesis]:
    """Translate a batch src (B, S); returns one :class:`Hypothesis` per source sentence, in order."""
    state, first, limits = start_from_source(model, src, max_len_a, max_len_b)
    return greedy_decode(model, state, first, limits, min_len=min_len, return_attention=return_attention)


@torch.no_grad()
def greedy_decode(
    model: IncrementalDecoder,
    state: DecoderState,
    last: Tensor,
    limits: Tensor,
    *,
    min_len: int = 0,
    return_attention: bool = False,
) -> list[Hypothesis]:
    """Continue B sequences from their newest tokens ``last`` (B, 1), one cached step at a time.

    ``limits`` (B,) caps the new tokens (eos included); finished sequences leave the batch.
    """
    strategy = Greedy(model.config.eos_id, last, limits, attention=return_attention)
    return run_search(model, state, strategy, min_len=min_len, return_attention=return_attention)
