"""Attention scorers for the RNN encoder-decoder: additive (Bahdanau) and multiplicative (Luong).

Both score one decoder state s against every encoder annotation h_j, normalize with softmax
(seed 000, eq. 2) and return the context vector c = sum_j alpha_j h_j (eq. 1).

Legend: B batch, S source length, Ds decoder state size, Dh annotation size, A attention size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _attend(scores: Tensor, annotations: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """scores (B, S), annotations (B, S, Dh), mask (B, S) True = real -> context (B, Dh), alpha (B, S)."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    alpha = F.softmax(scores, dim=-1)  # (B, S)
    if mask is not None:
        alpha = alpha.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    context = torch.bmm(alpha.unsqueeze(1), annotations).squeeze(1)  # (B, Dh)
    return context, alpha


class AdditiveAttention(nn.Module):
    """Bahdanau et al. (2015): e_j = v^T tanh(W s + U h_j).

    ``keys(annotations)`` precomputes U h_j once per source sentence; the caller keeps the result
    (no hidden state on the module) and passes it to every decoding step.

    Shape: state (B, Ds), annotations (B, S, Dh), keys (B, S, A), mask (B, S) -> (B, Dh), (B, S).
    """

    def __init__(self, state_size: int, annotation_size: int, attention_size: int):
        super().__init__()
        self.W = nn.Linear(state_size, attention_size, bias=False)
        self.U = nn.Linear(annotation_size, attention_size, bias=True)
        self.v = nn.Linear(attention_size, 1, bias=False)

    def keys(self, annotations: Tensor) -> Tensor:
        return self.U(annotations)  # (B, S, A)

    def forward(
        self, state: Tensor, annotations: Tensor, *, keys: Tensor | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        keys = self.keys(annotations) if keys is None else keys
        e = self.v(torch.tanh(self.W(state).unsqueeze(1) + keys)).squeeze(-1)  # (B, S)
        return _attend(e, annotations, mask)


class MultiplicativeAttention(nn.Module):
    """Luong et al. (2015) "general" score: e_j = s^T W h_j.

    Shape: state (B, Ds), annotations (B, S, Dh), mask (B, S) -> (B, Dh), (B, S).
    """

    def __init__(self, state_size: int, annotation_size: int):
        super().__init__()
        self.W = nn.Linear(annotation_size, state_size, bias=False)

    def keys(self, annotations: Tensor) -> Tensor:
        return self.W(annotations)  # (B, S, Ds)

    def forward(
        self, state: Tensor, annotations: Tensor, *, keys: Tensor | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        keys = self.keys(annotations) if keys is None else keys
        e = torch.bmm(keys, state.unsqueeze(-1)).squeeze(-1)  # (B, S)
        return _attend(e, annotations, mask)
