"""The same blocks as an encoder-only classifier (seed 002's document classification).

Legend: B batch, T length, D d_model, C classes.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..attention import padding_mask
from .config import ClassifierConfig
from .embedding import TokenEmbedding
from .transformer import Encoder


class TransformerClassifier(nn.Module):
    """Encoder stack, pooled over real tokens (mean) or the first token, then a linear layer.

    Shape: tokens (B, T) -> logits (B, C).
    """

    def __init__(self, config: ClassifierConfig):
        super().__init__()
        self.config = config
        self.embed = TokenEmbedding(config.vocab_size, config)
        self.encoder = Encoder(config, config.n_layers)
        self.head = nn.Linear(config.d_model, config.n_classes)

    def forward(self, tokens: Tensor, *, need_weights: bool = False):
        mask = padding_mask(tokens, self.config.pad_id)  # (B, 1, 1, T)
        h, weights = self.encoder(self.embed(tokens), mask, need_weights=need_weights)  # (B, T, D)
        if self.config.pooling == "first":
            pooled = h[:, 0]  # (B, D)
        else:
            real = mask[:, 0, 0, :, None].to(h.dtype)  # (B, T, 1)
            pooled = (h * real).sum(1) / real.sum(1).clamp(min=1.0)  # (B, D)
        logits = self.head(pooled)  # (B, C)
        return (logits, weights) if need_weights else logits
