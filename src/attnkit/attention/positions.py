"""Positions inside self-attention: relative (Shaw et al., 2018) and rotary (Su et al., 2021).

With these, the token embeddings carry no absolute position; self-attention alone sees where tokens
are, and only through their distance j - i. Cross-attention gets no positional term.

- Relative (Shaw et al., 2018, eqs. 3-5): a learned vector per clipped distance
  clip(j - i, -k, k) is added to the keys, e_ij = q_i . (k_j + a^K_ij) / sqrt(Dh), and optionally
  to the values, z_i = sum_j alpha_ij (v_j + a^V_ij). The key term is an additive score bias
  q_i . a^K_ij / sqrt(Dh), so the fused ``F.scaled_dot_product_attention`` still runs with it as a
  float ``attn_mask``. The value term needs the weights alpha themselves, so ``relative_values``
  runs the reference path (slower to train; see docs/BENCHMARKS.md). Embeddings are shared by the
  heads of a layer, as in the paper; each layer has its own.
- Rotary (Su et al., 2021, eq. 34): q and k at position m are rotated, feature pair by feature
  pair, by the angle m * theta_i with theta_i = 10000^(-2i/Dh); then
  R_m q . R_n k = q . R_(n-m) k depends only on n - m. No parameters, and the fused kernel runs
  unchanged. The pairs here are features (i, i + Dh/2) instead of the paper's (2i, 2i + 1): the same
  rotation under a fixed permutation of a head's features, which the learned projections absorb,
  and it needs no interleaving.

Incremental decoding: the T new queries sit at positions len(cache) + i. Rotary rotates keys as
they enter the cache (by their absolute position), so the cache holds rotated keys; relative
positions need only the query and key counts.

Legend: B batch, H heads, Tq/Tk query/key length, Dh head size, R = 2k + 1 clipped distances.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import Tensor, nn

KINDS = ("relative", "rotary")


class AttentionPositions(Protocol):
    """What :class:`~attnkit.attention.MultiHeadAttention` asks of a positional scheme."""

    needs_weights: bool  # the output needs the attention weights (only the reference path has them)

    def rotate(self, x: Tensor, offset: int) -> Tensor:
        """x (B, H, T, Dh) at positions offset..offset+T-1 -> the same shape (identity if unused)."""
        ...

    def score_bias(self, q: Tensor, n_keys: int) -> Tensor | None:
        """Additive score term (B, H, Tq, Tk) for queries at the last Tq of Tk positions, or None."""
        ...

    def value_term(self, weights: Tensor) -> Tensor | None:
        """Added to the output (B, H, Tq, Dh) from the weights (B, H, Tq, Tk), or None."""
        ...


def relative_distances(Tq: int, Tk: int, clip: int, device: torch.device | None = None) -> Tensor:
    """(Tq, Tk) long: clip(j - i, -clip, clip) + clip, with query i at position Tk - Tq + i."""
    i = torch.arange(Tk - Tq, Tk, device=device)[:, None]  # (Tq, 1) absolute query positions
    j = torch.arange(Tk, device=device)[None, :]  # (1, Tk)
    return (j - i).clamp(-clip, clip) + clip  # (Tq, Tk) in [0, 2 * clip]


class RelativePositions(nn.Module):
    """Shaw et al. (2018): a^K_ij = w^K_clip(j-i), a^V_ij = w^V_clip(j-i).

    Args:
        d_head: Dh; clip: k, the largest distance told apart; values: learn a^V as well.
    """

    def __init__(self, d_head: int, clip: int, *, values: bool = False):
        super().__init__()
        self.clip = clip
        self.needs_weights = values
        self.a_k = nn.Parameter(torch.randn(2 * clip + 1, d_head) * d_head**-0.5)  # (R, Dh) w^K
        self.a_v = nn.Parameter(torch.zeros(2 * clip + 1, d_head)) if values else None  # (R, Dh) w^V

    def rotate(self, x: Tensor, offset: int) -> Tensor:
        return x

    def score_bias(self, q: Tensor, n_keys: int) -> Tensor:
        """q_i . a^K_ij / sqrt(Dh): q (B, H, Tq, Dh) -> (B, H, Tq, Tk)."""
        B, H, Tq, Dh = q.shape
        per_distance = q @ (self.a_k.t() / math.sqrt(Dh))  # (B, H, Tq, R): q_i . w^K_r for every r
        idx = relative_distances(Tq, n_keys, self.clip, q.device)  # (Tq, Tk)
        return per_distance.gather(-1, idx.expand(B, H, Tq, n_keys))  # (B, H, Tq, Tk)

    def value_term(self, weights: Tensor) -> Tensor | None:
        """sum_j alpha_ij a^V_ij: weights (B, H, Tq, Tk) -> (B, H, Tq, Dh)."""
        if self.a_v is None:
            return None
        B, H, Tq, Tk = weights.shape
        idx = relative_distances(Tq, Tk, self.clip, weights.device).expand(B, H, Tq, Tk)
        per_distance = weights.new_zeros(B, H, Tq, self.a_v.size(0))  # (B, H, Tq, R)
        per_distance = per_distance.scatter_add(-1, idx, weights)  # weight mass at each clipped distance
        return per_distance @ self.a_v  # (B, H, Tq, R) @ (R, Dh) -> (B, H, Tq, Dh)

    def extra_repr(self) -> str:
        return f"clip={self.clip}, values={self.a_v is not None}"


def rotary_angles(max_len: int, d_head: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """cos and sin of m * theta_i, theta_i = base^(-2i/Dh): 2 x (max_len, Dh/2), float64 then float32."""
    theta = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)  # (Dh/2,)
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] * theta  # (T, Dh/2)
    return angle.cos().float(), angle.sin().float()


class RotaryPositions(nn.Module):
    """Su et al. (2021): rotate (x_i, x_(i+Dh/2)) by m * theta_i at position m. No parameters.

    Args:
        d_head: Dh (even); max_len: positions the tables cover.
    """

    needs_weights = False
    cos: Tensor  # buffers (max_len, Dh/2)
    sin: Tensor

    def __init__(self, d_head: int, max_len: int):
        super().__init__()
        if d_head % 2:
            raise ValueError(f"rotary positions need an even head size, got {d_head}")
        cos, sin = rotary_angles(max_len, d_head)
        self.register_buffer("cos", cos, persistent=False)  # (max_len, Dh/2)
        self.register_buffer("sin", sin, persistent=False)

    def rotate(self, x: Tensor, offset: int) -> Tensor:
        T = x.size(-2)
        if offset + T > self.cos.size(0):
            raise ValueError(f"position {offset + T - 1} is beyond the rotary table ({self.cos.size(0)})")
        cos = self.cos[offset : offset + T].to(x.dtype)  # (T, Dh/2)
        sin = self.sin[offset : offset + T].to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)  # 2 x (B, H, T, Dh/2): the two coordinates of each pair
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (B, H, T, Dh)

    def score_bias(self, q: Tensor, n_keys: int) -> None:
        return None

    def value_term(self, weights: Tensor) -> None:
        return None


def attention_positions(
    kind: str, *, d_head: int, max_len: int, relative_clip: int = 16, relative_values: bool = False
) -> RelativePositions | RotaryPositions | None:
    """The config's ``positional`` -> the self-attention's scheme; None for absolute kinds."""
    if kind == "relative":
        return RelativePositions(d_head, relative_clip, values=relative_values)
    if kind == "rotary":
        return RotaryPositions(d_head, max_len)
    return None
