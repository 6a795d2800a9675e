"""The Transformer's building blocks (paper section 3.1-3.3): sublayers, encoder and decoder layers.

Legend: B batch, S source length, T target length, D d_model, H heads.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import KVCache, MultiHeadAttention, attention_positions
from .config import BlockConfig

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (eq. 2), applied to every position alike."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", bias: bool = True):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)
        self.activation = _ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(self.activation(self.w1(x)))  # (B, T, D) -> (B, T, d_ff) -> (B, T, D)


class Residual(nn.Module):
    """Residual connection around a sublayer with dropout and layer normalization (section 5.4).

    post-norm (paper): LayerNorm(x + Dropout(Sublayer(x))); pre-norm: x + Dropout(Sublayer(LayerNorm(x))).
    """

    def __init__(self, d_model: int, dropout: float, norm: str):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = norm == "pre"

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


def _self_attention(cfg: BlockConfig) -> MultiHeadAttention:
    """Self-attention with the config's relative or rotary positions, if any (cross-attention has none)."""
    positions = attention_positions(
        cfg.positional,
        d_head=cfg.d_model // cfg.n_heads,
        max_len=cfg.max_len,
        relative_clip=cfg.relative_clip,
        relative_values=cfg.relative_values,
    )
    return MultiHeadAttention(
        cfg.d_model, cfg.n_heads, dropout=cfg.attention_dropout, bias=cfg.bias, positions=positions
    )


class SelfAttentionLayer(nn.Module):
    """Self-attention + feed-forward: an encoder layer, or with ``causal=True`` a decoder-only layer."""

    def __init__(self, cfg: BlockConfig):
        super().__init__()
        self.self_attn = _self_attention(cfg)
        self.ffn = PositionwiseFeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.bias)
        self.attn_residual = Residual(cfg.d_model, cfg.dropout, cfg.norm)
        self.ffn_residual = Residual(cfg.d_model, cfg.dropout, cfg.norm)

    def forward(
        self,
        x: Tensor,
        *,
        mask: Tensor | None = None,
        causal: bool = False,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D), mask (B, 1, 1, T) True = real -> (B, T, D), weights (B, H, T, T) or None."""
        weights = None

        def attend(h: Tensor) -> Tensor:
            nonlocal weights
            out, weights = self.self_attn(
                h, h, h, key_padding_mask=mask, causal=causal, cache=cache, need_weights=need_weights
            )
            return out

        x = self.attn_residual(x, attend)
        return self.ffn_residual(x, self.ffn), weights


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder (cross) attention, feed-forward (section 3.1)."""

    def __init__(self, cfg: BlockConfig):
        super().__init__()
        self.self_attn = _self_attention(cfg)
        self.cross_attn = MultiHeadAttention(
            cfg.d_model, cfg.n_heads, dropout=cfg.attention_dropout, bias=cfg.bias
        )
        self.ffn = PositionwiseFeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.bias)
        self.self_residual = Residual(cfg.d_model, cfg.dropout, cfg.norm)
        self.cross_residual = Residual(cfg.d_model, cfg.dropout, cfg.norm)
        self.ffn_residual = Residual(cfg.d_model, cfg.dropout, cfg.norm)

    def forward(
        self,
        y: Tensor,
        cross_kv: tuple[Tensor, Tensor],
        *,
        src_mask: Tensor | None,
        self_cache: KVCache | None = None,
        self_mask: Tensor | None = None,
        kv_group: int = 1,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """y (N, T, D) and the encoder keys/values 2 x (B, H, S, Dh), N = B * kv_group rows.

        self_mask (N, 1, 1, t + T), True = may attend: the cache positions of each row's own
        sentence, when sentences that started at different steps decode together.

        Returns y (N, T, D), self-attention weights (N, H, T, T') and cross-attention weights (N, H, T, S).
        """
        self_w = cross_w = None

        def self_attend(h: Tensor) -> Tensor:
            nonlocal self_w
            out, self_w = self.self_attn(
                h, h, h, key_padding_mask=self_mask, causal=True, cache=self_cache, need_weights=need_weights
            )
            return out

        def cross_attend(h: Tensor) -> Tensor:
            nonlocal cross_w
            out, cross_w = self.cross_attn(
                h, kv=cross_kv, key_padding_mask=src_mask, kv_group=kv_group, need_weights=need_weights
            )
            return out

        y = self.self_residual(y, self_attend)
        y = self.cross_residual(y, cross_attend)
        return self.ffn_residual(y, self.ffn), self_w, cross_w
