"""Attention scorers for the RNN encoder-decoder: additive (Bahdanau) and multiplicative (Luong).

Both score a decoder state s against every encoder annotation h_j, normalize with softmax
(seed 000, eq. 2) and return the context vector c = sum_j alpha_j h_j (eq. 1). With ``group=G``,
G consecutive decoder states (a sentence's beam hypotheses) score the same sentence's annotations,
which are kept once per sentence.

Legend: B sentences, G states per sentence, N = B * G, S source length, Ds decoder state size,
Dh annotation size, A attention size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _attend(scores: Tensor, annotations: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """scores (B, G, S), annotations (B, S, Dh), mask (B, S) True = real -> context (N, Dh), alpha (N, S)."""
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
    alpha = F.softmax(scores, dim=-1)  # (B, G, S)
    if mask is not None:  # a sentence without a real token attends to nothing (all -inf is NaN)
        alpha = alpha.masked_fill(~mask.any(dim=-1)[:, None, None], 0.0)
    context = alpha @ annotations  # (B, G, S) @ (B, S, Dh) -> (B, G, Dh)
    B, G, S = alpha.shape
    return context.reshape(B * G, -1), alpha.reshape(B * G, S)


class AdditiveAttention(nn.Module):
    """Bahdanau et al. (2015): e_j = v^T tanh(W s + U h_j).

    ``keys(annotations)`` precomputes U h_j once per source sentence; the caller keeps the result
    (no hidden state on the module) and passes it to every decoding step.

    Shape: state (N, Ds), annotations (B, S, Dh), keys (B, S, A), mask (B, S) -> (N, Dh), (N, S).
    """

    def __init__(self, state_size: int, annotation_size: int, attention_size: int):
        super().__init__()
        self.W = nn.Linear(state_size, attention_size, bias=False)
        self.U = nn.Linear(annotation_size, attention_size, bias=True)
        self.v = nn.Linear(attention_size, 1, bias=False)

    def keys(self, annotations: Tensor) -> Tensor:
        return self.U(annotations)  # (B, S, A)

    def forward(
        self,
        state: Tensor,
        annotations: Tensor,
        *,
        keys: Tensor | None = None,
        mask: Tensor | None = None,
        group: int = 1,
    ) -> tuple[Tensor, Tensor]:
        keys = self.keys(annotations) if keys is None else keys
        B = annotations.size(0)
        query = self.W(state).view(B, group, 1, -1)  # (B, G, 1, A)
        e = self.v(torch.tanh(query + keys[:, None])).squeeze(-1)  # (B, G, S)
        return _attend(e, annotations, mask)


class MultiplicativeAttention(nn.Module):
    """Luong et al. (2015) "general" score: e_j = s^T W h_j.

    Shape: state (N, Ds), annotations (B, S, Dh), mask (B, S) -> (N, Dh), (N, S).
    """

    def __init__(self, state_size: int, annotation_size: int):
        super().__init__()
        self.W = nn.Linear(annotation_size, state_size, bias=False)

    def keys(self, annotations: Tensor) -> Tensor:
        return self.W(annotations)  # (B, S, Ds)

    def forward(
        self,
        state: Tensor,
        annotations: Tensor,
        *,
        keys: Tensor | None = None,
        mask: Tensor | None = None,
        group: int = 1,
    ) -> tuple[Tensor, Tensor]:
        keys = self.keys(annotations) if keys is None else keys
        B = annotations.size(0)
        e = state.view(B, group, -1) @ keys.transpose(1, 2)  # (B, G, Ds) @ (B, Ds, S) -> (B, G, S)
        return _attend(e, annotations, mask)
