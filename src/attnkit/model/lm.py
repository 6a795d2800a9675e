"""The same blocks as a decoder-only language model (seed 000's "learning a language model").

It keeps the decoder-only contract of :mod:`attnkit.model.interface`, so greedy, beam and sampling
search drive it exactly as they drive a translation model's decoder.

Legend: B sequences, G rows per sequence, N = B * G rows, T length, D d_model, V vocabulary, L layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..attention import KVCache
from .config import LMConfig
from .embedding import TokenEmbedding
from .interface import DecoderOutput
from .layers import SelfAttentionLayer
from .transformer import fill_tied_output


@dataclass
class LMState:
    """Self-attention caches, one row per hypothesis (:class:`~attnkit.model.interface.DecoderState`)."""

    self_kv: list[KVCache]
    batch_size: int  # B sequences
    group: int = 1

    def __len__(self) -> int:
        return len(self.self_kv[0]) if self.self_kv else 0

    def expand(self, k: int) -> None:
        if self.group != 1:
            raise ValueError(f"expand needs one row per sequence, the state has {self.group}")
        self.reorder(torch.arange(self.batch_size).repeat_interleave(k))
        self.group = k

    def reorder(self, rows: Tensor) -> None:
        for kv in self.self_kv:
            kv.select(rows)  # moved to the cache's device there

    def select(self, sentences: Tensor) -> None:
        G = self.group
        self.reorder((sentences[:, None] * G + torch.arange(G, device=sentences.device)).view(-1))
        self.batch_size = sentences.numel()


class TransformerLM(nn.Module):
    """Causal self-attention stack with a tied softmax layer: p(x_t | x_<t).

    Sequences are right-padded: the look-ahead mask already hides the padding after a sequence
    from every real position, so no padding mask is needed (and the fused causal kernel runs).
    Shape: forward tokens (B, T) -> logits (B, T, V).
    """

    # train.freeze: the parts a fine-tuning can keep fixed, by child module (the output layer trains)
    freezable = {"embeddings": ("embed",), "decoder": ("layers", "final_norm")}

    def __init__(self, config: LMConfig):
        super().__init__()
        self.config = config
        self.embed = TokenEmbedding(config.vocab_size, config)
        self.layers = nn.ModuleList(SelfAttentionLayer(config) for _ in range(config.n_layers))
        self.final_norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()
        self.output_proj = nn.Linear(config.d_model, config.vocab_size, bias=not config.tie_output)
        if config.tie_output:
            self.output_proj.weight = self.embed.embedding.weight
            self._register_load_state_dict_pre_hook(fill_tied_output("embed.embedding.weight"))

    def init_state(self, batch_size: int, *, cache: type[KVCache] = KVCache) -> LMState:
        """Empty caches for ``batch_size`` sequences; ``cache``: their class (as Transformer.init_state)."""
        return LMState([cache() for _ in self.layers], batch_size)

    def decode(self, tokens: Tensor, state: LMState, *, need_weights: bool = False) -> DecoderOutput:
        """tokens (N, T) at positions len(state).. -> logits (N, T, V); the state grows by T."""
        x = self.embed(tokens, len(state))  # (N, T, D)
        weights = []
        for layer, kv in zip(self.layers, state.self_kv):
            x, w = layer(x, causal=True, cache=kv, need_weights=need_weights)
            weights.append(w)
        logits = self.output_proj(self.final_norm(x))  # (N, T, V)
        return DecoderOutput(logits, weights) if need_weights else DecoderOutput(logits)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.decode(tokens, self.init_state(tokens.size(0))).logits
