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

from ..attention.layout import padded_rows
from ..errors import ConfigError
from ..positional import ABSOLUTE
from .interface import DecoderOutput


class RowMoves:
    """The three moves of a decoder state (:class:`~.interface.DecoderState`) over its self-attention
    caches, for growing caches and a fixed layout alike: the Transformer's state and the language
    model's share them. With a layout the sentences are padded up to a bucket (``sequences()``
    counts the padding): the live ones lead, copies of the last follow, decoded and unread.
    ``_sentences_kept`` hears which sentences stay (the Transformer keeps their encoder output)."""

    self_kv: list
    group: int
    layout: Any  # a FixedLayout, or None

    def sequences(self) -> int:
        """Sequences in the caches, padding included."""
        raise NotImplementedError

    def rows(self) -> int:
        """Decoder rows: every sequence's ``group``, padding rows included."""
        return self.sequences() * self.group

    def __len__(self) -> int:
        if self.layout is not None:
            return self.layout.t
        return len(self.self_kv[0]) if self.self_kv else 0

    def expand(self, k: int) -> None:
        if self.group != 1:
            raise ValueError(f"expand needs one row per sequence, the state has {self.group}")
        self._move(torch.arange(self.sequences()).repeat_interleave(k))  # padding rows stay behind
        self.group = k

    def reorder(self, rows: Tensor) -> None:
        if self.layout is not None:  # the padding rows keep their place
            rows = torch.cat([rows, torch.arange(rows.numel(), self.rows(), device=rows.device)])
        self._move(rows)

    def select(self, sentences: Tensor) -> None:
        """Keep ``sentences`` (B',) and all their rows."""
        self._live(sentences.numel())
        if self.layout is not None:
            sentences = padded_rows(sentences, self.layout.capacity(sentences.numel()))
        G = self.group
        self._move((sentences[:, None] * G + torch.arange(G, device=sentences.device)).view(-1))
        self._sentences_kept(sentences)

    def _move(self, rows: Tensor) -> None:
        for kv in self.self_kv:
            kv.select(rows)  # moved to the cache's device there

    def _live(self, n: int) -> None:
        raise NotImplementedError

    def _sentences_kept(self, sentences: Tensor) -> None:
        pass


def check_fixed(config: Any) -> None:
    """A fixed layout counts positions from a tensor: absolute positions only (relative and rotary
    self-attention count them from the cache's length, which a fixed buffer does not have)."""
    if getattr(config, "pruned_heads", None):
        raise ConfigError("compiled decoding of a model with pruned heads is not supported: decode eagerly")
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
