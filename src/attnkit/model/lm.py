"""The same blocks as a decoder-only language model (seed 000's "learning a language model").

Legend: B batch, T length, D d_model, V vocabulary, L layers.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import KVCache, padding_mask
from .config import LMConfig
from .embedding import TokenEmbedding
from .layers import SelfAttentionLayer


class TransformerLM(nn.Module):
    """Causal self-attention stack with a tied softmax layer: p(x_t | x_<t).

    ``decode(tokens, cache=...)`` adds positions incrementally like the seq2seq decoder.
    Shape: forward tokens (B, T) -> logits (B, T, V).
    """

    def __init__(self, config: LMConfig):
        super().__init__()
        self.config = config
        self.embed = TokenEmbedding(config.vocab_size, config)
        self.layers = nn.ModuleList(SelfAttentionLayer(config) for _ in range(config.n_layers))
        self.final_norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()
        self.output_proj = None if config.tie_output else nn.Linear(config.d_model, config.vocab_size)

    def init_cache(self) -> list[KVCache]:
        return [KVCache() for _ in self.layers]

    def decode(self, tokens: Tensor, *, cache: list[KVCache] | None = None) -> Tensor:
        """tokens (B, T) at positions len(cache).. -> logits (B, T, V); the cache grows by T."""
        offset = 0 if cache is None or cache[0].k is None else len(cache[0])
        # Left-aligned batches: padding sits after the text, so the causal mask already hides it from
        # every real position; a key padding mask is only needed for the full-sequence pass.
        mask = padding_mask(tokens, self.config.pad_id) if cache is None else None
        x = self.embed(tokens, offset)  # (B, T, D)
        for i, layer in enumerate(self.layers):
            x, _ = layer(x, mask=mask, causal=True, cache=None if cache is None else cache[i])
        x = self.final_norm(x)
        return F.linear(x, self.embed.weight) if self.output_proj is None else self.output_proj(x)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.decode(tokens)
