"""The same blocks as an encoder-only classifier (seed 002's document classification).

The encoder reads the tokens; a pooling turns its T output vectors into one, and a linear layer
scores the classes. Three poolings:

- ``mean``: the average of the real tokens' vectors.
- ``first``: a CLS token is prepended to the input and its output vector is used (BERT's [CLS]).
- ``attention``: additive attention pooling (Bahdanau et al., 2015; seed 002's hotel reviews):
  a_t = softmax_t(v^T tanh(W h_t + b)) over the real tokens, pooled = sum_t a_t h_t. The weights
  say which words decided.

Legend: B batch, T length (input tokens), D d_model, H heads, C classes, L layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import padding_mask
from .config import ClassifierConfig
from .embedding import TokenEmbedding
from .transformer import Encoder


@dataclass
class ClassifierOutput:
    """logits (B, C); token_weights (B, T): each input token's share of the pooled vector (0 on
    padding, rows sum to 1; for ``first`` pooling, only with need_weights); self_attn:
    L x (B, H, T', T') encoder self-attention when asked for (T' = T + 1 with the CLS token of
    ``first`` pooling, which sits at position 0)."""

    logits: Tensor
    token_weights: Tensor | None = None
    self_attn: list[Tensor] | None = None


class AttentionPooling(nn.Module):
    """Additive attention with a learned query: a = softmax(v^T tanh(W h + b)) over real tokens.

    Shape: h (B, T, D), real (B, T) bool -> pooled (B, D), weights (B, T) (exactly 0 on padding).
    """

    def __init__(self, d_model: int):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)  # W, b
        self.score = nn.Linear(d_model, 1, bias=False)  # v

    def forward(self, h: Tensor, real: Tensor) -> tuple[Tensor, Tensor]:
        scores = self.score(torch.tanh(self.proj(h))).squeeze(-1)  # (B, T)
        scores = scores.masked_fill(~real, float("-inf"))
        weights = F.softmax(scores, dim=-1).masked_fill(~real, 0.0)  # an all-padding row stays 0, not NaN
        return torch.einsum("bt,btd->bd", weights, h), weights  # (B, D), (B, T)


class TransformerClassifier(nn.Module):
    """Encoder stack, a pooling of its outputs (``config.pooling``), then a linear layer.

    Args:
        config: :class:`ClassifierConfig`.
    Shape:
        forward: tokens (B, T) -> logits (B, C); classify: -> :class:`ClassifierOutput`.
    """

    # train.freeze: the parts a fine-tuning can keep fixed, by child module (the head trains)
    freezable = {"embeddings": ("embed",), "encoder": ("encoder",)}

    def __init__(self, config: ClassifierConfig):
        super().__init__()
        self.config = config
        self.embed = TokenEmbedding(config.vocab_size, config)
        self.encoder = Encoder(config, config.n_layers)
        self.attention_pool = AttentionPooling(config.d_model) if config.pooling == "attention" else None
        self.head = nn.Linear(config.d_model, config.n_classes)

    def classify(self, tokens: Tensor, *, need_weights: bool = False) -> ClassifierOutput:
        """Logits, each token's pooling weight and, when asked for, the encoder self-attention.

        With ``first`` pooling the token weights are what the CLS token attended to in the last
        layer (mean over heads), so they come only with ``need_weights``.
        """
        cfg = self.config
        real = tokens != cfg.pad_id  # (B, T)
        x = tokens
        if cfg.pooling == "first":
            cls = torch.full_like(tokens[:, :1], cfg.cls_id)  # (B, 1)
            x = torch.cat([cls, tokens], dim=1)  # (B, 1 + T)
        h, attn = self.encoder(
            self.embed(x), padding_mask(x, cfg.pad_id), need_weights=need_weights
        )  # (B, T', D)

        if cfg.pooling == "first":
            pooled = h[:, 0]  # (B, D): the CLS token's output
            weights = None
            if need_weights:  # what CLS read in the last layer, mean over heads, input tokens only
                weights = attn[-1][:, :, 0, 1:].mean(dim=1)  # (B, T)
                weights = weights / weights.sum(-1, keepdim=True).clamp(min=1e-12)
        elif cfg.pooling == "attention":
            assert self.attention_pool is not None  # built for this pooling in __init__
            pooled, weights = self.attention_pool(h, real)  # (B, D), (B, T)
        else:
            weights = real.to(h.dtype) / real.sum(-1, keepdim=True).clamp(min=1).to(h.dtype)  # (B, T)
            pooled = torch.einsum("bt,btd->bd", weights, h)  # (B, D)
        logits = self.head(pooled)  # (B, C)
        return ClassifierOutput(logits, weights, attn if need_weights else None)

    def forward(self, tokens: Tensor) -> Tensor:
        """tokens (B, T) -> logits (B, C)."""
        return self.classify(tokens).logits
