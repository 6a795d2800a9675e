"""Attention as plain functions: the forms the seeds derive step by step.

Legend: B batch, H heads, T sequence length, Tq/Tk query/key length, D feature size, Dh head size.
"""

from __future__ import annotations

import math

import torch.nn.functional as F
from torch import Tensor


def basic_self_attention(x: Tensor) -> tuple[Tensor, Tensor]:
    """Parameter-free self-attention of seed 000: omega = X X^T, alpha = softmax(omega), z = alpha X.

    Args:
        x: (T, D) or (B, T, D) embeddings.
    Returns:
        z: context vectors, same shape as ``x``; weights: alpha, (T, T) or (B, T, T).
    """
    omega = x @ x.transpose(-2, -1)  # (..., T, T): omega_ij = x_i . x_j
    alpha = F.softmax(omega, dim=-1)  # rows sum to 1 (eq. 2)
    z = alpha @ x  # (..., T, D): z_i = sum_j alpha_ij x_j (eq. 3)
    return z, alpha


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    """Unnormalized weights omega_ij = q_i . k_j (seed 000).

    q (..., Tq, Dh), k (..., Tk, Dh) -> (..., Tq, Tk).
    """
    return q @ k.transpose(-2, -1)


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    mask: Tensor | None = None,
    bias: Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """Reference math of the paper's eq. 1: softmax(Q K^T / sqrt(d_k) + M) V.

    Args:
        q: (..., Tq, Dh); k: (..., Tk, Dh); v: (..., Tk, Dv).
        mask: boolean, True = may attend, broadcastable to (..., Tq, Tk).
        bias: float, added to the scaled scores (a relative-position term), broadcastable likewise.
        dropout_p: dropout on the attention weights (training only; pass 0.0 in eval).
    Returns:
        out: (..., Tq, Dv); weights: (..., Tq, Tk), the attention weights after masking
        (a query row with nothing to attend to gets all-zero weights and a zero output, never NaN).
    """
    scores = attention_scores(q, k) / math.sqrt(q.size(-1))  # (..., Tq, Tk)
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    if mask is not None:
        # A fully masked row is softmax over all -inf = NaN; such a query attends to nothing.
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)
    return weights @ v, weights  # (..., Tq, Dv), (..., Tq, Tk)
