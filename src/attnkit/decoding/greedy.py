"""Greedy decoding: at every step take the most probable next token (seed 001, section 3)."""

from __future__ import annotations

import torch
from torch import Tensor

from ..attention.linear import packed_weights
from .common import Hypothesis, decode_cap, length_limits, step_topk


@torch.no_grad()
@packed_weights()  # weights cannot change while searching: pack them once
def greedy_search(
    model,
    src: Tensor,
    *,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    return_attention: bool = False,
) -> list[Hypothesis]:
    """Decode a batch src (B, S) one cached step at a time; finished sentences leave the batch.

    Returns one :class:`Hypothesis` per source sentence, in order.
    """
    cfg = model.config
    B = src.size(0)
    limits = length_limits(src, cfg.pad_id, max_len_a, max_len_b, decode_cap(model))  # (B,)
    enc = model.encode(src)
    cache = model.init_cache(enc)
    active = torch.arange(B, device=src.device)  # original index of each row still decoding
    last = torch.full((B, 1), cfg.bos_id, dtype=torch.long, device=src.device)  # (N, 1)
    out_tokens: list[list[int]] = [[] for _ in range(B)]
    log_probs = [0.0] * B
    attns: list[list[Tensor]] = [[] for _ in range(B)]
    results: list[Hypothesis | None] = [None] * B
    step = 0
    while active.numel() > 0:
        at_limit = step + 1 >= limits[active]
        best_lp, best, attn = step_topk(model, last, enc, cache, 1, at_limit, need_weights=return_attention)
        best_lp, best = best_lp[:, 0], best[:, 0]  # (N,)
        done = best == cfg.eos_id
        for row, (i, tok, lp) in enumerate(zip(active.tolist(), best.tolist(), best_lp.tolist())):
            log_probs[i] += lp
            if attn is not None:
                attns[i].append(attn[row])
            if tok == cfg.eos_id:
                attention = torch.stack(attns[i]) if attn is not None else None
                results[i] = Hypothesis(out_tokens[i], log_probs[i], log_probs[i], attention)
            else:
                out_tokens[i].append(tok)
        step += 1
        if done.any():
            keep = (~done).nonzero().squeeze(1)  # rows still decoding
            active, best = active[keep], best[keep]
            enc = enc.index_select(keep)
            cache.index_select(keep)
        last = best[:, None]
    return results  # type: ignore[return-value]
