"""Token embeddings scaled by sqrt(d_model), plus positions, plus dropout (paper sections 3.4, 3.5)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..positional import ABSOLUTE, positional_module
from .config import BlockConfig


class TokenEmbedding(nn.Module):
    """x = Dropout(E[token] * sqrt(d_model) + PE[position]); no PE term when positions are relative
    or rotary (self-attention sees them).

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
        absolute = cfg.positional in ABSOLUTE
        self.positions = positional_module(cfg.positional, cfg.max_len, cfg.d_model) if absolute else None
        self.dropout = nn.Dropout(cfg.dropout)

    @property
    def weight(self) -> Tensor:
        return self.embedding.weight

    def forward(self, tokens: Tensor, offset: int | Tensor = 0) -> Tensor:
        """tokens (B, T) at positions offset..offset+T-1 -> (B, T, D).

        ``offset`` is an int or one per row (B,).
        """
        T = tokens.size(1)
        if isinstance(offset, Tensor):  # rows at different positions (sentences joined mid-decoding)
            positions = offset[:, None] + torch.arange(T, device=tokens.device)  # (B, T)
            last = int(positions.max()) + 1 if positions.numel() else 0
        else:
            positions = torch.arange(offset, offset + T, device=tokens.device)  # (T,)
            last = offset + T
        if last > self.max_len:
            raise ValueError(f"sequence of length {last} exceeds max_len={self.max_len}")
        return self.at(tokens, positions)

    def at(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """tokens (B, T) at ``positions`` (T,) or (B, T), unchecked (the fixed layout checks its
        length on the host; reading a position here would stop a compiled graph) -> (B, T, D)."""
        x = self.embedding(tokens) * self.scale  # (B, T, D)
        if self.positions is not None:
            x = x + self.positions(positions)  # + (T, D) or (B, T, D)
        return self.dropout(x)
