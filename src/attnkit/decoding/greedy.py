"""Greedy decoding: at every step take the most probable next token (seed 001, section 3)."""

from __future__ import annotations

import torch
from torch import Tensor

from ..model.interface import DecoderState, IncrementalDecoder, Seq2SeqModel
from .common import Hypothesis, Layout, start_from_source
from .controls import Controls, prepare
from .defaults import MAX_LEN_A, MAX_LEN_B
from .loop import Greedy, run_search


@torch.no_grad()
def greedy_search(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    max_len_a: float = MAX_LEN_A,
    max_len_b: int = MAX_LEN_B,
    min_len: int = 0,
    return_attention: bool = False,
    controls: Controls | None = None,
    prefix: list[list[int]] | None = None,
    layout: Layout | None = None,
) -> list[Hypothesis]:
    """Translate a batch src (B, S); returns one :class:`Hypothesis` per source sentence, in order.

    ``prefix``: each sentence's first target tokens (forced); ``controls``: see :mod:`.controls`.
    ``layout``: decode over a fixed layout (:func:`~.common.start_from_source`).
    """
    state, first, limits = start_from_source(model, src, max_len_a, max_len_b, layout=layout)
    return greedy_decode(
        model,
        state,
        first,
        limits,
        min_len=min_len,
        return_attention=return_attention,
        controls=controls,
        prefix=prefix,
    )


@torch.no_grad()
def greedy_decode(
    model: IncrementalDecoder,
    state: DecoderState,
    last: Tensor,
    limits: Tensor,
    *,
    min_len: int = 0,
    return_attention: bool = False,
    controls: Controls | None = None,
    prefix: list[list[int]] | None = None,
) -> list[Hypothesis]:
    """Continue B sequences from their newest tokens ``last`` (B, P), one cached step at a time.

    ``limits`` (B,) caps the new tokens (eos included); finished sequences leave the batch. The
    controls see ``last`` whole as the start of each history (a prompt, say); ``prefix`` (B lists):
    the first new tokens of each, forced.
    """
    controls, forced = prepare(model.config, limits, prefix, controls)
    strategy = Greedy(
        model.config.eos_id,
        last,
        limits,
        attention=return_attention,
        history=controls is not None,
        forced=forced,
    )
    return run_search(
        model, state, strategy, min_len=min_len, return_attention=return_attention, controls=controls
    )
