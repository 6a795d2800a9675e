"""What greedy and beam search share: hypotheses, length limits, the per-step log-probabilities.

Both searches drive any model with the seq2seq interface (``encode``, ``init_cache``, ``decode``,
``config.pad_id/bos_id/eos_id/max_len``; the encoder output has ``index_select`` and
``repeat_beams``, the cache ``index_select``, ``repeat_beams`` and ``reorder_beams``): the
Transformer and the RNN encoder-decoder alike.

Legend: B batch, K beam, S source length, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Hypothesis:
    """One output: token ids (no bos, no eos), its length-normalized score and total log-probability.

    attention: (len(tokens) + 1, S) cross-attention of the last decoder layer averaged over heads,
    one row per generated token including eos, when asked for.
    """

    tokens: list[int]
    score: float
    log_prob: float
    attention: Tensor | None = None


def length_limits(src: Tensor, pad_id: int, max_len_a: float, max_len_b: int, cap: int) -> Tensor:
    """Most tokens (eos included) each sentence may produce: a * source length + b, at most ``cap``."""
    src_len = (src != pad_id).sum(dim=1)  # (B,)
    return (max_len_a * src_len + max_len_b).long().clamp(min=1, max=cap)  # (B,)


def decode_cap(model) -> int:
    """Positions the decoder can embed: bos takes one, so max_len - 1 outputs."""
    return int(model.config.max_len) - 1


def step_topk(
    model, tokens: Tensor, enc, cache, k: int, at_limit: Tensor, *, need_weights: bool
) -> tuple[Tensor, Tensor, Tensor | None]:
    """One cached decoder step on the newest tokens (N, 1): the k most probable next tokens.

    Returns log p of those tokens (N, k), the tokens (N, k) and, when asked, the cross-attention
    (N, S). pad and bos are never generated; rows at their length limit may only produce eos
    (scored with its own log-probability).
    """
    out = model.decode(tokens, enc, cache=cache, need_weights=need_weights)
    logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # (N, V)
    cfg = model.config
    logp[:, cfg.pad_id] = float("-inf")
    logp[:, cfg.bos_id] = float("-inf")
    if at_limit.any():
        eos = logp[:, cfg.eos_id].clone()
        logp[at_limit] = float("-inf")
        logp[:, cfg.eos_id] = eos
    top, tok = logp.topk(k, dim=-1)  # (N, k)
    attn = None
    if need_weights and out.cross_attn:
        attn = out.cross_attn[-1][:, :, -1].mean(dim=1)  # last layer, last position, mean of heads: (N, S)
    return top, tok, attn
