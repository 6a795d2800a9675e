"""Multi-head attention (paper section 3.2.2) with an explicit key/value cache for decoding.

Legend: B batch, H heads, Tq/Tk query/key length, D d_model, Dh = D / H head size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .functional import scaled_dot_product_attention
from .linear import Linear, linear
from .masks import causal_mask, combine_masks


@dataclass
class KVCache:
    """Keys and values of one attention layer, kept by the caller between decoding steps.

    Self-attention appends the new step's keys/values; cross-attention (``static=True``) projects
    the encoder output once, on the first step, and reuses it.
    """

    k: Tensor | None = None  # (B, H, Tk, Dh)
    v: Tensor | None = None  # (B, H, Tk, Dh)
    static: bool = False

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.size(2)

    def index_select(self, index: Tensor) -> None:
        """Keep the rows named by ``index`` (B',) of the batch: beam search reorders hypotheses."""
        if self.k is not None:
            self.k = self.k.index_select(0, index)
            self.v = self.v.index_select(0, index)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_H) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    The fused ``F.scaled_dot_product_attention`` runs when the weights are not needed; the reference
    math of :func:`scaled_dot_product_attention` runs when they are. Parameters are laid out like
    ``torch.nn.MultiheadAttention`` (one packed ``in_proj`` of W^Q, W^K, W^V, then ``out_proj``).

    Args:
        d_model: model width D; n_heads: H, must divide D.
        dropout: dropout on the attention weights; bias: biases on the projections.
    Shape:
        query (B, Tq, D), key and value (B, Tk, D) -> out (B, Tq, D), weights (B, H, Tq, Tk) or None.
    """

    def __init__(self, d_model: int, n_heads: int, *, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.in_proj = Linear(d_model, 3 * d_model, bias=bias)  # [W^Q; W^K; W^V]
        self.out_proj = Linear(d_model, d_model, bias=bias)  # W^O
        nn.init.xavier_uniform_(self.in_proj.weight)
        if bias:
            nn.init.zeros_(self.in_proj.bias)
            nn.init.zeros_(self.out_proj.bias)

    def _split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, Dh)

    def _project(self, x: Tensor, part: slice) -> Tensor:
        w = self.in_proj.weight[part]
        b = None if self.in_proj.bias is None else self.in_proj.bias[part]
        return linear(x, w, b)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            key_padding_mask: boolean, True = may attend; (B, Tk) or broadcastable to (B, H, Tq, Tk).
            causal: query i (at absolute position len(cache) + i) sees only keys up to itself.
            need_weights: return the attention weights (runs the reference path).
            cache: updated in place; for self-attention the new keys/values are appended.
        """
        D = self.d_model
        self_attention = query is key and key is value
        if self_attention:
            q, k, v = self._project(query, slice(None)).split(D, dim=-1)  # 3 x (B, Tq, D)
            q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)
        else:
            q = self._split_heads(self._project(query, slice(0, D)))  # (B, H, Tq, Dh)
            if cache is not None and cache.static and cache.k is not None:
                k, v = cache.k, cache.v  # encoder keys/values, projected on the first step
            elif key is value:
                k, v = self._project(key, slice(D, 3 * D)).split(D, dim=-1)
                k, v = self._split_heads(k), self._split_heads(v)  # (B, H, Tk, Dh)
            else:
                k = self._split_heads(self._project(key, slice(D, 2 * D)))
                v = self._split_heads(self._project(value, slice(2 * D, 3 * D)))
        if cache is not None:
            if cache.static:
                cache.k, cache.v = k, v
            else:
                if cache.k is not None:
                    k = torch.cat([cache.k, k], dim=2)  # (B, H, Tk_old + Tq, Dh)
                    v = torch.cat([cache.v, v], dim=2)
                cache.k, cache.v = k, v

        Bq, Bk = q.size(0), k.size(0)
        group = Bq // Bk  # > 1: `group` consecutive query rows share one row of keys (a sentence's beams)
        if group > 1:
            if causal or Bq % Bk:
                raise ValueError(f"{Bq} query rows cannot share {Bk} rows of keys")
            q = q.view(Bk, group, self.n_heads, -1, self.d_head).transpose(1, 2)  # (Bk, H, group, Tq, Dh)
            q = q.reshape(Bk, self.n_heads, -1, self.d_head)  # (Bk, H, group * Tq, Dh)
        Tq, Tk = q.size(2), k.size(2)
        if key_padding_mask is not None and key_padding_mask.dim() == 2:
            key_padding_mask = key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk)
        # Teacher forcing (no cache prefix, no padding mask): the fused kernel applies the look-ahead
        # mask itself and skips the blocks above the diagonal instead of reading a (T, T) mask.
        fused_causal = causal and Tq > 1 and Tq == Tk and key_padding_mask is None and not need_weights
        look_ahead = None
        if causal and Tq > 1 and not fused_causal:
            # With a cache the queries sit at the end: query i is at absolute position Tk - Tq + i.
            look_ahead = causal_mask(Tq, n_keys=Tk, device=q.device)
        mask = combine_masks(key_padding_mask, look_ahead)
        p = self.dropout if self.training else 0.0

        if need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=p)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=fused_causal)
            weights = None
        if group > 1:  # back to one row per query: (Bk, H, group * Tq, .) -> (Bq, H, Tq, .)
            Tq //= group
            out = out.view(Bk, self.n_heads, group, Tq, -1).transpose(1, 2).reshape(Bq, self.n_heads, Tq, -1)
            if weights is not None:
                weights = (
                    weights.view(Bk, self.n_heads, group, Tq, Tk).transpose(1, 2).reshape(Bq, -1, Tq, Tk)
                )
        out = out.transpose(1, 2).reshape(Bq, Tq, D)  # concat heads: (B, Tq, D)
        return self.out_proj(out), weights
