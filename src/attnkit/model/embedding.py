"""Token embeddings scaled by sqrt(d_model), plus positions, plus dropout (paper sections 3.4, 3.5)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..positional import positional_module
from .config import BlockConfig


class TokenEmbedding(nn.Module):
    """x = Dropout(E[token] * sqrt(d_model) + PE[position]).

    The weight is initialised N(0, d_model^-1/2) so that after scaling it has unit variance, the
    same scale as the sinusoids; the same matrix can serve as the tied output projection.
    """

    def __init__(self, vocab_size: int, cfg: BlockConfig):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        nn.init.normal_(self.embedding.weight, std=cfg.d_model**-0.5)
        with torch.no_grad():
            self.embedding.weight[cfg.pad_id].zero_()
        self.scale = math.sqrt(cfg.d_model)
        self.max_len = cfg.max_len
        self.positions = positional_module(cfg.positional, cfg.max_len, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)

    @property
    def weight(self) -> Tensor:
        return self.embedding.weight

    def forward(self, tokens: Tensor, offset: int = 0) -> Tensor:
        """tokens (B, T) at positions offset..offset+T-1 -> (B, T, D)."""
        T = tokens.size(1)
        if offset + T > self.max_len:
            raise ValueError(f"sequence of length {offset + T} exceeds max_len={self.max_len}")
        pos = torch.arange(offset, offset + T, device=tokens.device)  # (T,)
        return self.dropout(self.embedding(tokens) * self.scale + self.positions(pos))  # (B, T, D)
