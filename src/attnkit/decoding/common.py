"""What the searches share: hypotheses, length limits, and one decoding step as log-probabilities.

Every search drives an :class:`~attnkit.model.interface.IncrementalDecoder` through its decoder
state (``decode``, and the state's ``expand``/``reorder``/``select``): the Transformer, the RNN
encoder-decoder and the decoder-only language model alike. A search over a translation model
starts from ``start_from_source``; a language model starts from its prompt.

Legend: B sentences, N rows (hypotheses), S source length, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..attention import FixedLayout
from ..attention.cache import DeferredKVCache
from ..model.interface import DecoderState, IncrementalDecoder, Seq2SeqModel
from .controls import Controls, force, forced_now


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


def length_limits(src_len: Tensor, max_len_a: float, max_len_b: int, cap: int) -> Tensor:
    """Most tokens (eos included) each sentence may produce: a * source length + b, at most ``cap``."""
    return (max_len_a * src_len + max_len_b).long().clamp(min=1, max=cap)  # (B,)


def length_limit(input_len: int, max_len_a: float, max_len_b: int, cap: int) -> int:
    """:func:`length_limits` of one input: a prompt's pieces (a language model), or 0 (an image)."""
    return max(1, min(cap, int(max_len_a * input_len + max_len_b)))


Layout = Callable[[int], FixedLayout]  # positions -> a fixed layout (FixedLayout, or a compiled one)


def start_from_source(
    model: Seq2SeqModel, src: Tensor, max_len_a: float, max_len_b: int, *, layout: Layout | None = None
) -> tuple[DecoderState, Tensor, Tensor]:
    """Encode src (B, S): the decoder state, the first input tokens (B, 1) = bos, and length limits (B,).

    The state's key/value caches move their rows lazily (:class:`~.cache.DeferredKVCache`), or,
    with ``layout``, are buffers of the batch's longest limit written in place
    (:mod:`attnkit.attention.layout`; :mod:`.compiled` compiles their step).
    """
    cfg = model.config
    src_len = (src != cfg.pad_id).sum(dim=1)  # (B,)
    # bos takes the first of the max_len positions the decoder can embed.
    limits = length_limits(src_len, max_len_a, max_len_b, int(cfg.max_len) - 1)
    cache = DeferredKVCache if layout is None else layout(int(limits.max()) if limits.numel() else 1)
    state = model.init_state(model.encode(src), cache=cache)
    first = torch.full((src.size(0), 1), cfg.bos_id, dtype=torch.long, device=src.device)
    return state, first, limits


def step_log_probs(
    model: IncrementalDecoder,
    last: Tensor,
    state: DecoderState,
    *,
    step: int | Tensor,
    limits: Tensor,
    min_len: int = 0,
    need_weights: bool = False,
    controls: Controls | None = None,
    history: Tensor | None = None,
    forced: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """One cached decoder step on the newest tokens ``last`` (N, 1): log p of every next token (N, V).

    ``step``: the tokens each row has chosen so far, one int or one per row (N,). pad and bos are
    never generated; eos not before ``min_len`` tokens; rows at their length limit (``limits`` (N,),
    eos included) may only produce eos, scored with its own log-probability.
    ``controls`` reshape the step from each row's ``history`` (N, L) (:mod:`.controls`); ``forced``
    (N, P) holds each row's prefix, FREE-padded: a row within it may only take its next token.
    Also returns, when asked, the cross-attention of the new position (N, S): last layer, mean of heads.
    """
    cfg = model.config
    out = model.decode(last, state, need_weights=need_weights)
    logits = out.logits[:, -1].float()  # (N, V)
    if controls is not None:
        assert history is not None, "controls need the rows' history"
        logits = controls.reshape_logits(logits, history, pad_id=cfg.pad_id)
    logp = torch.log_softmax(logits, dim=-1)  # (N, V)
    eos = logp[:, cfg.eos_id].clone()  # (N,)
    if forced is not None:
        forced_tok = forced_now(forced, step)  # (N,)
        forced_lp = logp.gather(1, forced_tok.clamp(min=0)[:, None]).squeeze(1)  # (N,) before any ban
    logp[:, cfg.pad_id] = float("-inf")
    logp[:, cfg.bos_id] = float("-inf")
    if isinstance(step, Tensor):
        if min_len:
            logp[step < min_len, cfg.eos_id] = float("-inf")
    elif step < min_len:
        logp[:, cfg.eos_id] = float("-inf")
    if controls is not None and history is not None:
        controls.ban(logp, history, pad_id=cfg.pad_id, eos_id=cfg.eos_id, eos=eos)
    if forced is not None:
        force(logp, forced_tok, forced_lp)
    at_limit = step + 1 >= limits  # (N,)
    if at_limit.any():
        logp[at_limit] = float("-inf")
        logp[at_limit, cfg.eos_id] = eos[at_limit]
    attn = None
    if need_weights and out.cross_attn:
        attn = out.cross_attn[-1][:, :, -1].mean(dim=1)  # (N, S)
    return logp, attn
