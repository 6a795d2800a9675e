"""The fixed layout of :mod:`.static`: buffer buckets, the cache written in place, the step, and the
searches' state over the buffers.

A step reads only tensors of one shape per bucket (R rows, Tb cache positions, Sb source positions)
and branches on no data, so ``torch.compile(step, fullgraph=True)`` takes it whole and a CUDA graph
can replay it (:mod:`.graphs`). :mod:`.static` builds these buffers from a source or a prompt and
runs today's searches over them.

Legend: N live rows, R buffer rows, L layers, H heads, Dh head size, Tb cache positions, Sb source
length (bucketed), V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor, nn

from ..attention import KVCache
from ..model.layers import DecoderLayer, SelfAttentionLayer
from ..model.lm import TransformerLM
from ..model.transformer import Transformer
from ..positional import ABSOLUTE

MAX_ROW_BUCKET = 256  # rows beyond it round up to a multiple of it
LENGTH_MULTIPLE = 32


def row_bucket(n: int) -> int:
    """Buffer rows for ``n`` live rows: 1, 2, 4, ..., 256, then multiples of 256."""
    if n <= MAX_ROW_BUCKET:
        return 1 << max(n - 1, 0).bit_length()
    return -(-n // MAX_ROW_BUCKET) * MAX_ROW_BUCKET


def length_bucket(n: int, multiple: int = LENGTH_MULTIPLE) -> int:
    """Buffer positions for ``n`` positions: ``n`` rounded up to a multiple of ``multiple``."""
    return max(-(-n // multiple), 1) * multiple


class SlotCache(KVCache):
    """A self-attention cache of fixed size: ``append`` writes the step's keys and values in place at
    position ``pos``, (1,) for every row or (R,) one per row, and returns the whole buffers, positions
    not yet written included (the caller masks them). Its length is no position: absolute positions
    only."""

    def __init__(self, k: Tensor, v: Tensor, pos: Tensor):
        super().__init__()
        self.k_buf, self.v_buf, self.pos = k, v, pos  # (R, H, Tb, Dh) x 2, (1,) or (R,)

    def __len__(self) -> int:
        raise TypeError("a SlotCache has no length: the step's position is explicit")

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        if self.pos.size(0) == 1:  # one position for all rows (a shape, fixed per graph)
            self.k_buf.index_copy_(2, self.pos, k)  # (R, H, Tb, Dh) <- (R, H, 1, Dh) at pos
            self.v_buf.index_copy_(2, self.pos, v)
        else:  # each row at its own position (sentences that joined at different steps)
            at = self.pos.view(-1, 1, 1, 1).expand_as(k)  # (R, H, 1, Dh)
            self.k_buf.scatter_(2, at, k)
            self.v_buf.scatter_(2, at, v)
        return self.k_buf, self.v_buf


@dataclass
class StaticCaches:
    """Every tensor a step reads, of fixed shape for one bucket (R, Tb, Sb)."""

    self_k: list[Tensor]  # L x (R, H, Tb, Dh), written in place
    self_v: list[Tensor]
    cross_k: list[Tensor]  # L x (R, H, Sb, Dh), each row its sentence's; empty for a language model
    cross_v: list[Tensor]
    src_mask: Tensor | None  # (R, 1, 1, Sb) True = real source token; None for a language model
    limits: Tensor  # (R,) most new tokens (eos included) each row may produce
    offset: Tensor  # (1,) positions before the first new token: 0 after bos, a prompt's length for an LM


class StaticStep(nn.Module):
    """(tokens (R,) at position ``pos``, caches) -> log-probabilities (R, V) of the next token.

    ``pos`` is (1,), one position for every row, or (R,), each row's own (continuous batching,
    :mod:`.static_pool`); each is one graph per bucket.

    Writes the keys and values of ``pos`` into ``caches``. No Python branch depends on data, so
    ``torch.compile(step, fullgraph=True)`` takes it whole, once per bucket.

    Args:
        model: a Transformer or a TransformerLM in eval mode with absolute positions (its modules do
            the math: the Transformer's decoder layers with cross-attention, or the LM's causal stack).
        min_len: eos is banned before this many new tokens.
    """

    is_eos: Tensor  # (V,) bool
    banned: Tensor  # (V,) bool: pad and bos, never generated

    def __init__(self, model: Transformer | TransformerLM, *, min_len: int = 0):
        super().__init__()
        cfg = model.config
        if cfg.positional not in ABSOLUTE:
            raise ValueError(f"static decoding needs absolute positions, not {cfg.positional!r}")
        if model.training:
            raise ValueError("static decoding needs a model in eval mode")
        self.model, self.min_len = model, min_len
        if isinstance(model, Transformer):
            self.embedding, self.layers, self.norm = model.tgt_embed, model.decoder_layers, model.decoder_norm
        else:
            self.embedding, self.layers, self.norm = model.embed, model.layers, model.final_norm
        vocab = torch.arange(model.output_proj.out_features, device=model.output_proj.weight.device)
        self.register_buffer("is_eos", vocab == cfg.eos_id, persistent=False)
        self.register_buffer("banned", (vocab == cfg.pad_id) | (vocab == cfg.bos_id), persistent=False)

    def embed(self, tokens: Tensor, pos: Tensor) -> Tensor:
        """tokens (R,) at position pos (1,) or (R,) -> (R, 1, D), as ``TokenEmbedding`` at offset pos."""
        emb = self.embedding
        assert emb.positions is not None  # absolute positions (checked in __init__)
        x = emb.embedding(tokens[:, None]) * emb.scale  # (R, 1, D)
        return emb.dropout(x + emb.positions(pos[:, None]))  # + (1 or R, 1, D)

    def forward(self, tokens: Tensor, pos: Tensor, caches: StaticCaches) -> Tensor:
        m = self.model
        y = self.embed(tokens, pos)  # (R, 1, D)
        Tb = caches.self_k[0].size(2)
        written = torch.arange(Tb, device=pos.device) <= pos[:, None]  # (1 or R, Tb)
        written = written[:, None, None, :]  # (1 or R, 1, 1, Tb)
        if isinstance(m, Transformer):
            layers = cast(Iterable[DecoderLayer], self.layers)
            for layer, k, v, ck, cv in zip(
                layers, caches.self_k, caches.self_v, caches.cross_k, caches.cross_v
            ):
                y, _, _ = layer(
                    y, (ck, cv), src_mask=caches.src_mask, self_cache=SlotCache(k, v, pos), self_mask=written
                )
        else:  # one query over the written positions: the look-ahead mask is ``written``
            for lm_layer, k, v in zip(
                cast(Iterable[SelfAttentionLayer], self.layers), caches.self_k, caches.self_v
            ):
                y, _ = lm_layer(y, mask=written, cache=SlotCache(k, v, pos))
        logits = m.output_proj(self.norm(y))[:, 0].float()  # (R, V)
        logp = torch.log_softmax(logits, dim=-1)
        eos = logp[:, m.config.eos_id, None]  # (R, 1) before any ban
        inf = logp.new_full((), float("-inf"))  # a kernel, not a host copy: a CUDA graph can capture it
        t = pos - caches.offset  # (1 or R,) new tokens chosen so far
        logp = logp.masked_fill(self.banned | (self.is_eos & (t < self.min_len)[:, None]), float("-inf"))
        at_limit = (t + 1 >= caches.limits)[:, None]  # (R, 1): only eos, at its own log-probability
        return torch.where(at_limit, torch.where(self.is_eos, eos, inf), logp)


class StaticState:
    """The searches' decoder state (:class:`~attnkit.model.interface.DecoderState`) over
    :class:`StaticCaches`: live row i sits in buffer row ``rows[i]``.

    A sentence owns ``spacing`` consecutive buffer rows from the start (its beam), so ``expand``
    needs no new buffers, and rows never move between sentences: cross-attention never moves.
    """

    def __init__(self, caches: StaticCaches, n_sentences: int, spacing: int, pos: int = 0):
        self.caches, self.spacing, self.group, self.pos = caches, spacing, 1, pos
        self.rows = torch.arange(n_sentences, device=caches.limits.device) * spacing  # (N,)

    def __len__(self) -> int:
        return self.pos

    def expand(self, k: int) -> None:
        if self.group != 1 or k != self.spacing:
            raise ValueError(f"expand to {k} rows needs one row per sentence, {k} buffer rows apart")
        rows = (self.rows[:, None] + torch.arange(k, device=self.rows.device)).view(-1)  # (N * k,)
        self._copy_rows(rows, self.rows.repeat_interleave(k))
        self.rows, self.group = rows, k

    def reorder(self, rows: Tensor) -> None:
        self._copy_rows(self.rows, self.rows.index_select(0, rows))

    def select(self, sentences: Tensor) -> None:
        """Forget the other sentences' rows: they keep decoding in the buffers, unread."""
        G = self.group
        live = (sentences[:, None] * G + torch.arange(G, device=sentences.device)).view(-1)  # (B' * G,)
        self.rows = self.rows.index_select(0, live)

    def _copy_rows(self, dst: Tensor, src: Tensor) -> None:
        """Buffer rows ``dst`` (n,) take the self-attention keys and values of rows ``src`` (n,)."""
        for buf in (*self.caches.self_k, *self.caches.self_v):
            buf.index_copy_(0, dst, buf.index_select(0, src))

    def step(self, run: Callable[[Tensor, Tensor, StaticCaches], Tensor], last: Tensor) -> Tensor:
        """Decode the live rows' newest tokens ``last`` (N,) with ``run`` (a :class:`StaticStep`,
        compiled or not): log-probabilities (N, V); the position advances."""
        Tb = self.caches.self_k[0].size(2)
        if self.pos >= Tb:
            raise ValueError(f"position {self.pos} is beyond the buffers' {Tb}")
        R = self.caches.limits.size(0)
        tokens = last.new_zeros(R).index_copy_(0, self.rows, last)  # (R,) other rows: pad
        pos = torch.tensor([self.pos], device=last.device)
        logp = run(tokens, pos, self.caches)  # (R, V)
        self.pos += 1
        return logp.index_select(0, self.rows)  # (N, V)
