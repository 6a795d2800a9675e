"""The same blocks as a decoder-only language model (seed 000's "learning a language model").

It keeps the decoder-only contract of :mod:`attnkit.model.interface`, so greedy, beam and sampling
search drive it exactly as they drive a translation model's decoder.

Legend: B sequences, G rows per sequence, N = B * G rows, T length, D d_model, V vocabulary, L layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..attention import FixedLayout, KVCache
from .config import LMConfig
from .embedding import TokenEmbedding
from .fixed import RowMoves, check_fixed, decode_fixed
from .interface import DecoderOutput
from .layers import SelfAttentionLayer
from .transformer import fill_tied_output


@dataclass
class LMState(RowMoves):
    """Self-attention caches, one row per hypothesis (:class:`~attnkit.model.interface.DecoderState`).

    With a :class:`~attnkit.attention.FixedLayout` the caches are buffers written in place and the
    sequences padded up to a bucket (as :class:`~.transformer.TransformerState`): ``batch_size`` live
    ones lead, copies of the last follow, decoded and unread.
    """

    self_kv: list[KVCache]
    batch_size: int  # B sequences
    group: int = 1
    layout: FixedLayout | None = None

    def sequences(self) -> int:
        return self.layout.capacity(self.batch_size) if self.layout is not None else self.batch_size

    def _live(self, n: int) -> None:
        self.batch_size = n


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

    def init_state(self, batch_size: int, *, cache: type[KVCache] | FixedLayout = KVCache) -> LMState:
        """Empty caches for ``batch_size`` sequences; ``cache``: their class or a fixed layout (as
        Transformer.init_state)."""
        if isinstance(cache, FixedLayout):
            check_fixed(self.config)
            return LMState([cache.cache() for _ in self.layers], batch_size, layout=cache)
        return LMState([cache() for _ in self.layers], batch_size)

    def decode(
        self, tokens: Tensor, state: LMState, *, need_weights: bool = False, project: bool = True
    ) -> DecoderOutput:
        """tokens (N, T) at positions len(state).. -> logits (N, T, V); the state grows by T
        (``project=False``: the hidden states (N, T, D), as the Transformer's ``decode``)."""
        if state.layout is not None:
            return decode_fixed(self, tokens, state, state.layout, need_weights)
        return self.layers_forward(self.embed(tokens, len(state)), state, None, need_weights, project)

    def step(self, tokens: Tensor, state: LMState, need_weights: bool = False) -> DecoderOutput:
        """One step over a fixed layout's buffers, as :meth:`~.transformer.TargetDecoder.step`."""
        layout = state.layout
        assert layout is not None, "step runs over a fixed layout"
        positions = layout.position(tokens.device) + torch.arange(tokens.size(1), device=tokens.device)
        visible = layout.visible(tokens.size(1), tokens.device)  # (1, 1, T, Tb)
        return self.layers_forward(self.embed.at(tokens, positions), state, visible, need_weights)

    def layers_forward(
        self, x: Tensor, state: LMState, mask: Tensor | None, need_weights: bool, project: bool = True
    ) -> DecoderOutput:
        """The causal stack, final norm and output projection over embedded tokens x (N, T, D);
        ``mask``: a fixed layout's visible positions (None: the look-ahead mask)."""
        weights = []
        for layer, kv in zip(self.layers, state.self_kv):
            x, w = layer(x, mask=mask, causal=True, cache=kv, need_weights=need_weights)
            weights.append(w)
        x = self.final_norm(x)  # (N, T, D)
        logits = self.output_proj(x) if project else x  # (N, T, V), or (N, T, D) unprojected
        return DecoderOutput(logits, weights) if need_weights else DecoderOutput(logits)

    def forward(self, tokens: Tensor, *, project: bool = True) -> Tensor:
        """Teacher forcing: logits (B, T, V), or the hidden states (B, T, D) with ``project=False``."""
        return self.decode(tokens, self.init_state(tokens.size(0)), project=project).logits
