"""Greedy decoding: at every step take the most probable next token (seed 001, section 3)."""

from __future__ import annotations

import torch
from torch import Tensor

from ..model.interface import DecoderState, IncrementalDecoder, Seq2SeqModel
from .common import Hypothesis, start_from_source, step_log_probs


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
    eos_id = model.config.eos_id
    B = last.size(0)
    active = torch.arange(B, device=last.device)  # original index of each row still decoding
    out_tokens: list[list[int]] = [[] for _ in range(B)]
    log_probs = [0.0] * B
    attns: list[list[Tensor]] = [[] for _ in range(B)]
    results: list[Hypothesis | None] = [None] * B
    step = 0
    while active.numel() > 0:
        logp, attn = step_log_probs(
            model,
            last,
            state,
            step=step,
            limits=limits[active],
            min_len=min_len,
            need_weights=return_attention,
        )
        best_lp, best = logp.max(dim=-1)  # (N,)
        for row, (i, tok, lp) in enumerate(zip(active.tolist(), best.tolist(), best_lp.tolist())):
            log_probs[i] += lp
            if attn is not None:
                attns[i].append(attn[row])
            if tok == eos_id:
                attention = torch.stack(attns[i]) if attn is not None else None
                results[i] = Hypothesis(out_tokens[i], log_probs[i], log_probs[i], attention)
            else:
                out_tokens[i].append(tok)
        step += 1
        done = best == eos_id
        if done.any():
            keep = (~done).nonzero().squeeze(1)  # rows still decoding
            active, best = active[keep], best[keep]
            state.select(keep)
        last = best[:, None]
    return results  # type: ignore[return-value]
