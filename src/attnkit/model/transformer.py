"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017, Figure 1).

Every seq2seq model in attnkit (this one and :class:`attnkit.rnn.RNNSeq2Seq`) has the same interface,
so one trainer and one beam search serve both:

    enc = model.encode(src)                      # once per source batch
    cache = model.init_cache(enc)                # explicit decoder state, owned by the caller
    out = model.decode(tgt_new, enc, cache=cache) # logits for the new positions only
    logits = model(src, tgt_in)                  # teacher forcing: decode(tgt_in, encode(src))

Legend: B batch, S source length, T target length, D d_model, H heads, V vocabulary, L layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..attention import KVCache, padding_mask
from ..attention.linear import Linear, linear
from .config import TransformerConfig
from .embedding import TokenEmbedding
from .layers import DecoderLayer, SelfAttentionLayer


@dataclass
class EncoderOutput:
    """memory (B, S, D), src_mask (B, 1, 1, S) True = real token, optional per-layer self-attention."""

    memory: Tensor
    src_mask: Tensor
    self_attn: list[Tensor] | None = None  # L x (B, H, S, S)
    beams: int = 1  # decoder rows per memory row: the beams of a sentence share its memory

    def index_select(self, index: Tensor) -> EncoderOutput:
        """Keep decoder rows ``index``; with beams, ``index`` holds whole sentences' groups of rows."""
        if self.beams > 1:
            index = index[:: self.beams] // self.beams  # (B',) sentences
        return EncoderOutput(
            self.memory.index_select(0, index), self.src_mask.index_select(0, index), beams=self.beams
        )

    def repeat_beams(self, beams: int) -> EncoderOutput:
        """K decoder rows per sentence from now on. Nothing is copied: cross-attention lets the K
        queries of a sentence share its keys and values."""
        return EncoderOutput(self.memory, self.src_mask, beams=beams)


@dataclass
class DecoderCache:
    """Per decoder layer: self-attention keys/values (grow by one per step) and cross-attention ones."""

    self_kv: list[KVCache] = field(default_factory=list)
    cross_kv: list[KVCache] = field(default_factory=list)

    def __len__(self) -> int:
        """How many target positions have been decoded so far."""
        return len(self.self_kv[0]) if self.self_kv else 0

    def index_select(self, index: Tensor) -> None:
        """Keep rows ``index`` of the batch (e.g. drop finished sentences). Cross-attention keys
        kept once per sentence for its beams follow the sentences of the selected rows."""
        rows = self.self_kv[0].k.size(0) if self.self_kv and self.self_kv[0].k is not None else None
        for kv in self.self_kv:
            kv.index_select(index)
        for kv in self.cross_kv:
            group = rows // kv.k.size(0) if rows is not None and kv.k is not None else 1
            kv.index_select(index[::group] // group if group > 1 else index)

    def reorder_beams(self, index: Tensor) -> None:
        """Follow beam search moving hypotheses within their sentence: the cross-attention keys and
        values are the same for every beam of a sentence, so only the self-attention ones move."""
        for kv in self.self_kv:
            kv.index_select(index)

    repeat_beams = reorder_beams  # one row per sentence becomes K: only self-attention rows multiply


@dataclass
class DecoderOutput:
    """logits (B, T, V) for the decoded positions; attention weights when asked for."""

    logits: Tensor
    self_attn: list[Tensor] | None = None  # L x (B, H, T, T')
    cross_attn: list[Tensor] | None = None  # L x (B, H, T, S)


class Encoder(nn.Module):
    """N identical self-attention layers; pre-norm stacks end with one more LayerNorm."""

    def __init__(self, cfg, n_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(SelfAttentionLayer(cfg) for _ in range(n_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()

    def forward(
        self, x: Tensor, mask: Tensor | None, *, causal: bool = False, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor] | None]:
        weights = []
        for layer in self.layers:
            x, w = layer(x, mask=mask, causal=causal, need_weights=need_weights)
            weights.append(w)
        return self.final_norm(x), (weights if need_weights else None)


class Transformer(nn.Module):
    """Encoder-decoder Transformer with tied embeddings and an incremental, cached decoder.

    Args:
        config: :class:`TransformerConfig`; ``TransformerConfig.preset("base")`` is the paper's model.
    Shape:
        forward: src (B, S), tgt_in (B, T) -> logits (B, T, V_tgt).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.src_embed = TokenEmbedding(config.src_vocab_size, config)
        self.tgt_embed = (
            self.src_embed if config.share_vocab else TokenEmbedding(config.tgt_vocab_size, config)
        )
        self.encoder = Encoder(config, config.n_encoder_layers)
        self.decoder_layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        self.decoder_norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()
        self.output_proj = None if config.tie_output else Linear(config.d_model, config.tgt_vocab_size)
        self.output_bias = (
            nn.Parameter(torch.zeros(config.tgt_vocab_size)) if config.tie_output and config.output_bias else None
        )

    def encode(self, src: Tensor, *, need_weights: bool = False) -> EncoderOutput:
        """src (B, S) token ids -> memory (B, S, D) and the source padding mask."""
        src_mask = padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        memory, weights = self.encoder(self.src_embed(src), src_mask, need_weights=need_weights)
        return EncoderOutput(memory, src_mask, weights)

    def init_cache(self, enc: EncoderOutput) -> DecoderCache:
        """An empty decoder state for :meth:`decode`; cross-attention keys fill on the first step."""
        n = len(self.decoder_layers)
        return DecoderCache([KVCache() for _ in range(n)], [KVCache(static=True) for _ in range(n)])

    def decode(
        self,
        tgt: Tensor,
        enc: EncoderOutput,
        *,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
    ) -> DecoderOutput:
        """Logits for target positions len(cache)..len(cache)+T-1 given those tokens tgt (B, T).

        Without a cache this is teacher forcing over the whole prefix (causal self-attention);
        with one, only the new positions are computed and the cache grows by T.
        """
        offset = 0 if cache is None else len(cache)
        y = self.tgt_embed(tgt, offset)  # (B, T, D)
        self_ws, cross_ws = [], []
        for i, layer in enumerate(self.decoder_layers):
            y, self_w, cross_w = layer(
                y,
                enc.memory,
                src_mask=enc.src_mask,
                self_cache=None if cache is None else cache.self_kv[i],
                cross_cache=None if cache is None else cache.cross_kv[i],
                need_weights=need_weights,
            )
            self_ws.append(self_w)
            cross_ws.append(cross_w)
        logits = self.project(self.decoder_norm(y))  # (B, T, V)
        if not need_weights:
            return DecoderOutput(logits)
        return DecoderOutput(logits, self_ws, cross_ws)

    def project(self, h: Tensor) -> Tensor:
        """Pre-softmax linear layer; with tied embeddings it is E^T (section 3.4). (..., D) -> (..., V)."""
        if self.output_proj is None:
            return linear(h, self.tgt_embed.weight, self.output_bias)
        return self.output_proj(h)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: logits (B, T, V) for every position of tgt_in (B, T) = bos + target."""
        return self.decode(tgt_in, self.encode(src)).logits


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, each shared tensor counted once (tied embeddings count once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
