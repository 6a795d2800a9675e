"""Multi-head attention (paper section 3.2.2), appending to a key/value cache when decoding (:mod:`.cache`).

Legend: B batch, H heads, Tq/Tk query/key length, D d_model, Dh = D / H head size, G query rows
that share one row of keys (the beams of one sentence in cross-attention).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from .cache import KVCache
from .functional import scaled_dot_product_attention
from .masks import causal_mask, combine_masks
from .positions import AttentionPositions


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_H) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    The fused ``F.scaled_dot_product_attention`` runs when the weights are not needed; the reference
    math of :func:`scaled_dot_product_attention` runs when they are. W^Q is ``q_proj``; W^K and W^V
    are stacked in ``kv_proj`` because keys and values always come from the same tensor in a
    Transformer (one product, and cross-attention projects the encoder output once per sentence).

    A self-attention may carry ``positions`` (:mod:`.positions`, relative or rotary): rotary
    rotates q and k before the kernel; relative keys enter the fused kernel as a float score bias;
    relative values need the weights, so they run the reference path.

    Args:
        d_model: model width D; n_heads: H, must divide D.
        dropout: dropout on the attention weights; bias: biases on the projections.
        positions: a relative or rotary scheme for self-attention (None: positions come from the input).
    Shape:
        query (B * G, Tq, D), key and value (B, Tk, D) -> out (B * G, Tq, D), weights (B * G, H, Tq, Tk).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        positions: AttentionPositions | None = None,
    ):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W^Q
        self.kv_proj = nn.Linear(d_model, 2 * d_model, bias=bias)  # [W^K; W^V]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W^O
        self.positions = positions
        # Head analysis (attnkit.heads): a gate per head on its output (None: all 1, no cost), and a
        # function that, when set, is given every call's weights (B * G, H, Tq, Tk).
        self.head_gate: Tensor | None = None  # (H,)
        self.weights_hook: Callable[[Tensor], None] | None = None
        # Xavier-uniform over the stacked (3D, D) matrix [W^Q; W^K; W^V], as torch.nn.MultiheadAttention.
        bound = math.sqrt(6.0 / (4 * d_model))
        for proj in (self.q_proj, self.kv_proj):
            nn.init.uniform_(proj.weight, -bound, bound)
        if bias:
            for proj in (self.q_proj, self.kv_proj, self.out_proj):
                nn.init.zeros_(proj.bias)

    def _split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, Dh)

    def keys_values(self, key: Tensor, value: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Project keys and values: (B, Tk, D) -> 2 x (B, H, Tk, Dh). ``value=None`` means the same tensor."""
        if value is None or value is key:
            k, v = self.kv_proj(key).chunk(2, dim=-1)  # 2 x (B, Tk, D)
        else:  # distinct key and value inputs: each through its half of kv_proj
            w_k, w_v = self.kv_proj.weight.chunk(2)
            b_k, b_v = self.kv_proj.bias.chunk(2) if self.kv_proj.bias is not None else (None, None)
            k, v = F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
        return self._split_heads(k), self._split_heads(v)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        kv: tuple[Tensor, Tensor] | None = None,
        cache: KVCache | None = None,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        kv_group: int = 1,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``, or to keys and values projected before (``kv``).

        Args:
            kv: keys and values from :meth:`keys_values` (cross-attention projects memory once).
            cache: self-attention while decoding: the new keys/values are appended to it.
            key_padding_mask: boolean, True = may attend; (B, Tk) or broadcastable to (B, H, Tq, Tk).
            causal: query i (at absolute position len(cache) + i) sees only keys up to itself.
            kv_group: G consecutive query rows share one row of keys, values and padding mask.
            need_weights: return the attention weights (runs the reference path).
        """
        q = self._split_heads(self.q_proj(query))  # (B * G, H, Tq, Dh)
        if kv is None:
            assert key is not None, "attention needs key (and value) or kv"
            kv = self.keys_values(key, value)
        k, v = kv  # (B, H, Tk, Dh)
        if self.positions is not None:  # rotary: rotate the new q and k by absolute position
            offset = len(cache) if cache is not None else 0  # new positions start after the cache
            q, k = self.positions.rotate(q, offset), self.positions.rotate(k, offset)
        if cache is not None:  # keys enter the cache already rotated
            k, v = cache.append(k, v)  # (B, H, Tk_old + Tq, Dh)
            # a fixed layout's buffers hold unwritten positions: the caller's mask hides them and the
            # positions after each query (attnkit.attention.layout)
            causal = causal and not cache.fixed
        if key_padding_mask is not None and key_padding_mask.dim() == 2:
            key_padding_mask = key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk)
        hook = self.weights_hook
        out, weights = self._attend(
            q, k, v, key_padding_mask, causal, kv_group, need_weights or hook is not None
        )
        if hook is not None:
            assert weights is not None
            hook(weights.detach())
            weights = weights if need_weights else None
        if self.head_gate is not None:  # xi_h * head_h (Michel et al., 2019): 0 masks head h
            out = out * self.head_gate.to(out.device, out.dtype)[:, None, None]  # (B * G, H, Tq, Dh)
        Bq, _, Tq, _ = out.shape
        out = out.transpose(1, 2).reshape(
            Bq, Tq, self.n_heads * self.d_head
        )  # concat heads: (B * G, Tq, H * Dh)
        return self.out_proj(out), weights

    def _attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, G: int, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """softmax(Q K^T / sqrt(Dh) + M) V per head; q (B * G, H, Tq, Dh) -> (B * G, H, Tq, Dh)."""
        Bq, H, Tq, Dh = q.shape
        Bk, Tk = k.size(0), k.size(2)
        if Bq != Bk * G or (G > 1 and (causal or self.positions is not None)):
            raise ValueError(f"{Bq} query rows cannot share {Bk} rows of keys in groups of {G}")
        pos = self.positions
        bias = pos.score_bias(q, Tk) if pos is not None else None  # (B, H, Tq, Tk): q_i . a^K_ij / sqrt(Dh)
        reference = need_weights or (pos is not None and pos.needs_weights)
        if G > 1:  # a sentence's G query rows become G * Tq queries against its one row of keys
            q = q.view(Bk, G, H, Tq, Dh).transpose(1, 2).reshape(Bk, H, G * Tq, Dh)  # (B, H, G*Tq, Dh)
        # Teacher forcing (no cache prefix, no padding mask): the fused kernel applies the look-ahead
        # mask itself and skips the blocks above the diagonal instead of reading a (T, T) mask.
        fused_causal = causal and Tq > 1 and Tq == Tk and mask is None and bias is None and not reference
        look_ahead = None
        if causal and Tq > 1 and not fused_causal:
            # With a cache the queries sit at the end: query i is at absolute position Tk - Tq + i.
            look_ahead = causal_mask(Tq, n_keys=Tk, device=q.device)
        mask = combine_masks(mask, look_ahead)
        p = self.dropout if self.training else 0.0
        weights: Tensor | None
        if reference:
            out, weights = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias, dropout_p=p)
            if pos is not None and pos.needs_weights:
                term = pos.value_term(weights)
                assert term is not None  # positions that need the weights add a value term
                out = out + term  # z_i += sum_j alpha_ij a^V_ij
            weights = weights if need_weights else None
        else:
            if bias is not None:  # one float mask: the score bias, -inf where the boolean mask forbids
                mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=fused_causal)
            weights = None
        if G > 1:  # back to one row per query: (B, H, G * Tq, .) -> (B * G, H, Tq, .)
            out = out.view(Bk, H, G, Tq, -1).transpose(1, 2).reshape(Bq, H, Tq, -1)
            if weights is not None:
                weights = weights.view(Bk, H, G, Tq, Tk).transpose(1, 2).reshape(Bq, H, Tq, Tk)
        return out, weights

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Checkpoints written before the split of ``in_proj`` into ``q_proj`` and ``kv_proj`` still load."""
        for kind in ("weight", "bias"):
            packed = state_dict.pop(f"{prefix}in_proj.{kind}", None)
            if packed is not None:
                state_dict[f"{prefix}q_proj.{kind}"] = packed[: self.d_model]
                state_dict[f"{prefix}kv_proj.{kind}"] = packed[self.d_model :]
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
