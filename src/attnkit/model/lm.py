"""The same blocks as a decoder-only language model (seed 000's "learning a language model").

p(x_1..x_n) = prod_t p(x_t | bos, x_<t): causal self-attention blocks, no encoder, no cross-attention.

So that the searches written for translation (greedy, beam, sampling) serve the LM unchanged, it has
the seq2seq interface: the "source" is the prompt. ``encode(prompt)`` only holds it; the first
decoding step (fed bos, as every search starts) runs bos + prompt through the stack and fills the
cache, and later steps add one position at a time. The prompts of one batch have the same length
(no padding); :func:`attnkit.generate.generate` groups prompts by length.

Legend: B batch, P prompt length, T length, D d_model, V vocabulary, L layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..attention import KVCache, padding_mask
from .config import LMConfig
from .embedding import TokenEmbedding
from .layers import SelfAttentionLayer
from .transformer import DecoderOutput


@dataclass
class LMPrompt:
    """The LM's "encoder output": prompt pieces (B, P) without bos, eos or padding."""

    tokens: Tensor
    beams: int = 1  # decoder rows per prompt row

    def index_select(self, index: Tensor) -> LMPrompt:
        if self.beams > 1:
            index = index[:: self.beams] // self.beams  # (B',) whole sentences
        return LMPrompt(self.tokens.index_select(0, index), self.beams)

    def repeat_beams(self, beams: int) -> LMPrompt:
        return LMPrompt(self.tokens, beams)


@dataclass
class LMCache:
    """Per layer the self-attention keys and values; the prompt until the first step consumes it."""

    kv: list[KVCache] = field(default_factory=list)
    prompt: Tensor | None = None  # (N, P) rows not yet run through the stack

    def __len__(self) -> int:
        """Positions already in the cache (bos and the prompt count)."""
        return len(self.kv[0]) if self.kv else 0

    def index_select(self, index: Tensor) -> None:
        """Keep rows ``index`` (drop finished rows, or follow beam search's reordering)."""
        for kv in self.kv:
            kv.index_select(index)
        if self.prompt is not None:
            self.prompt = self.prompt.index_select(0, index)

    reorder_beams = index_select
    repeat_beams = index_select


class TransformerLM(nn.Module):
    """Causal self-attention stack with a (by default tied) softmax layer: p(x_t | x_<t).

    Args:
        config: :class:`LMConfig`.
    Shape:
        forward: tokens (B, T) = bos + text -> logits (B, T, V) for the next token at every position.
    """

    def __init__(self, config: LMConfig):
        super().__init__()
        self.config = config
        self.embed = TokenEmbedding(config.vocab_size, config)
        self.layers = nn.ModuleList(SelfAttentionLayer(config) for _ in range(config.n_layers))
        self.final_norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()
        self.output_proj = nn.Linear(config.d_model, config.vocab_size, bias=not config.tie_output)
        if config.tie_output:  # the pre-softmax weights ARE the embedding (paper section 3.4)
            self.output_proj.weight = self.embed.embedding.weight

    def run(
        self, tokens: Tensor, *, cache: list[KVCache] | None = None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor] | None]:
        """tokens (B, T) at positions len(cache).. -> logits (B, T, V) and per-layer self-attention.

        Batches are left-aligned: padding follows the text, so the causal mask already hides it from
        every real position; only padded rows' own padding positions see it, and their logits are
        never used. A key padding mask is still applied on the full-sequence pass so that attention
        maps drawn from it show no weight on padding.
        """
        offset = 0 if cache is None else len(cache[0])
        mask = padding_mask(tokens, self.config.pad_id) if cache is None else None  # (B, 1, 1, T)
        x = self.embed(tokens, offset)  # (B, T, D)
        weights = []
        for i, layer in enumerate(self.layers):
            x, w = layer(
                x,
                mask=mask,
                causal=True,
                cache=None if cache is None else cache[i],
                need_weights=need_weights,
            )
            weights.append(w)
        return self.output_proj(self.final_norm(x)), (weights if need_weights else None)  # (B, T, V)

    def forward(self, tokens: Tensor) -> Tensor:
        """Teacher forcing: tokens (B, T) = bos + text -> logits (B, T, V)."""
        return self.run(tokens)[0]

    # --- the seq2seq interface the searches drive ------------------------------------------------
    def encode(self, prompt: Tensor, *, need_weights: bool = False) -> LMPrompt:
        """Hold the prompt pieces (B, P); nothing runs until the first decoding step."""
        if (prompt == self.config.pad_id).any():
            raise ValueError("the prompts of one batch must have the same length (no padding)")
        return LMPrompt(prompt)

    def init_cache(self, enc: LMPrompt) -> LMCache:
        return LMCache([KVCache() for _ in self.layers], enc.tokens)

    def decode(
        self, tokens: Tensor, enc: LMPrompt, *, cache: LMCache | None = None, need_weights: bool = False
    ) -> DecoderOutput:
        """Logits for the given tokens (N, T); on the first step (bos) the prompt is run after them.

        Without a cache: teacher forcing over bos + prompt + tokens[:, 1:].
        """
        if cache is None:
            cache = self.init_cache(enc)
            x = torch.cat([tokens[:, :1], enc.tokens, tokens[:, 1:]], dim=1)  # (N, 1 + P + T - 1)
        elif cache.prompt is not None:
            x = torch.cat([tokens, cache.prompt], dim=1)  # (N, T + P): bos, then the prompt
            cache.prompt = None
        else:
            x = tokens
        logits, weights = self.run(x, cache=cache.kv, need_weights=need_weights)
        return DecoderOutput(logits, weights, None)
