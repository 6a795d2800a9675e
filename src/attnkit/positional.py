"""Positional information (paper section 3.5): fixed sinusoids or a learned embedding.

These absolute kinds are added to the token embeddings; the relative and rotary kinds act inside
self-attention instead (:mod:`attnkit.attention.positions`).

Legend: T positions, D d_model.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def sinusoidal_encoding(max_len: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    Computed in float64 and returned as float32 (max_len, d_model), so the values are exact to
    float32 precision at every position. An odd d_model drops the last cosine column.
    """
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),)
    angle = pos / torch.pow(10000.0, two_i / d_model)  # (T, ceil(D/2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)[:, : d_model // 2]
    return pe.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Adds no parameters: a fixed table, sliced at the positions asked for."""

    pe: Tensor  # buffer (max_len, D)

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, positions: Tensor) -> Tensor:
        """positions (T,) or (B, T) long -> (T, D) or (B, T, D)."""
        return self.pe[positions]


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position (the paper's Table 3 row (E) variant)."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)

    def forward(self, positions: Tensor) -> Tensor:
        return self.embedding(positions)


ABSOLUTE = ("sinusoidal", "learned")  # added to the embeddings; "relative" and "rotary" are not


def positional_module(kind: str, max_len: int, d_model: int) -> nn.Module:
    """The config's ``positional`` field ("sinusoidal" or "learned") -> the module."""
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(max_len, d_model)
    if kind == "learned":
        return LearnedPositionalEmbedding(max_len, d_model)
    raise ValueError(f"unknown positional encoding {kind!r}")
