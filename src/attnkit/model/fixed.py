"""A decoder step over a fixed layout (:mod:`attnkit.attention.layout`): the host's part around it.

``decode`` on a state with a :class:`~attnkit.attention.FixedLayout` comes here: the live rows' tokens
are padded to the buffers' rows, the model's own ``step`` (or the same compiled, the layout's
``step``) runs the layers over the whole buffers, the live rows' logits come back, and the position
advances. Everything that reads a host value (lengths, row counts) stays here, outside the step.

Legend: N live rows, R buffer rows, T new positions, V vocabulary.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..errors import ConfigError
from ..positional import ABSOLUTE
from .interface import DecoderOutput


def check_fixed(config: Any) -> None:
    """A fixed layout counts positions from a tensor: absolute positions only (relative and rotary
    self-attention count them from the cache's length, which a fixed buffer does not have)."""
    if config.positional not in ABSOLUTE:
        raise ConfigError(
            f"a fixed-layout cache (compiled decoding) needs sinusoidal or learned positions, "
            f"not {config.positional!r}"
        )


def decode_fixed(model: Any, tokens: Tensor, state: Any, layout: Any, need_weights: bool) -> DecoderOutput:
    """tokens (N, T) of the live rows -> their logits (N, T, V), through ``model.step`` over (R, T)."""
    N, T = tokens.shape
    if getattr(state, "start", None) is not None:
        raise ValueError("a fixed layout decodes sentences that started together (no joins)")
    R = state.rows()
    layout.check(T)
    if R > N:  # rows past the live ones decode a copy of the last token, unread
        tokens = torch.cat([tokens, tokens[-1:].expand(R - N, T)])  # (R, T)
    tokens = tokens.contiguous()  # a column of a search's history: one stride, one graph
    _allocate(model, state, R, tokens.device)
    layout.position(tokens.device)  # made here, so the step only reads it
    # one new position a step compiled (a prompt of T > 1, once per request, runs eagerly)
    step = layout.step if layout.step is not None and T == 1 else model.step
    out = step(tokens, state, need_weights)
    layout.advance(T)
    logits = out.logits[:N]
    if not need_weights:
        return DecoderOutput(logits)
    # the live rows over the positions written and the source without its padding, as eagerly
    S = getattr(state, "src_len", 0)
    self_attn = None if out.self_attn is None else [w[:N, ..., : layout.t] for w in out.self_attn]
    cross_attn = None if out.cross_attn is None else [w[:N, ..., :S] for w in out.cross_attn]
    return DecoderOutput(logits, self_attn, cross_attn)


def _allocate(model: Any, state: Any, R: int, device: torch.device) -> None:
    """The buffers (R, H, Tb, Dh), before the first step: allocated here, not inside a compiled
    step (a captured graph's outputs are overwritten by its next replay)."""
    if state.self_kv[0].k is not None:
        return
    cfg = model.config
    H, Dh = cfg.n_heads, cfg.d_model // cfg.n_heads
    dtype = model.output_proj.weight.dtype
    if torch.is_autocast_enabled(device.type):
        dtype = torch.get_autocast_dtype(device.type)
    like = torch.empty(0, H, state.layout.length, Dh, dtype=dtype, device=device)
    for kv in state.self_kv:
        kv.k, kv.v = state.layout.buffers(kv.layer, R, like)
