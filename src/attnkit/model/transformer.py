"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017, Figure 1).

It keeps the seq2seq contract of :mod:`attnkit.model.interface` (as the RNN baseline does), so one
trainer and one set of searches serve both:

    enc = model.encode(src)                 # once per source batch
    state = model.init_state(enc)           # explicit decoder state, owned by the caller
    out = model.decode(tgt_new, state)      # logits for the new positions only; the state grows
    logits = model(src, tgt_in)             # teacher forcing: decode(tgt_in, init_state(encode(src)))

Legend: B sentences, G hypotheses per sentence, N = B * G decoder rows, S source length, T target
length, D d_model, H heads, Dh head size, V vocabulary, L layers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import FixedLayout, KVCache, padding_mask
from ..attention.layout import length_bucket, padded_rows
from .config import TransformerConfig
from .embedding import TokenEmbedding
from .fixed import RowMoves, check_fixed, decode_fixed
from .interface import DecoderOutput
from .layers import DecoderLayer, SelfAttentionLayer


@dataclass
class EncoderOutput:
    """memory (B, S, D), src_mask (B, 1, 1, S) True = real token, optional per-layer self-attention."""

    memory: Tensor
    src_mask: Tensor
    self_attn: list[Tensor] | None = None  # L x (B, H, S, S)


@dataclass
class TransformerState(RowMoves):
    """The decoder's state (:class:`attnkit.model.interface.DecoderState`).

    Cross-attention keys and values are projected once per sentence and shared by its ``group``
    hypotheses; self-attention caches hold one row per hypothesis and grow by one position a step.
    ``start`` (B,), when set, is where each sentence's first target position sits in the caches
    (sentences that joined a running search at different steps: :mod:`attnkit.decoding.continuous`);
    ``decode`` then counts each row's positions from its start and masks the cache before it.

    With a :class:`~attnkit.attention.FixedLayout` the caches are buffers written in place, and the
    sentences' rows are padded up to a bucket (:func:`~attnkit.attention.layout.row_bucket`):
    ``live`` sentences lead, copies of the last follow, decoded and unread.
    """

    src_mask: Tensor  # (B, 1, 1, S)
    cross_kv: list[tuple[Tensor, Tensor]]  # L x 2 x (B, H, S, Dh)
    self_kv: list[KVCache]  # L x (N, H, t, Dh)
    group: int = 1
    start: Tensor | None = None  # (B,) cache position of each sentence's first target token
    layout: FixedLayout | None = None
    live: int = -1  # sentences decoding, the first ``live`` of the B rows (-1: all of them)
    src_len: int = -1  # source positions before a fixed layout's padding (-1: all of them)

    def __post_init__(self) -> None:
        if self.live < 0:
            self.live = self.src_mask.size(0)
        self.src_len = self.src_mask.size(-1)
        if self.layout is not None and self.live:
            self._pad_sentences(torch.arange(self.live, device=self.src_mask.device))

    def sequences(self) -> int:
        return self.src_mask.size(0)

    def _live(self, n: int) -> None:
        self.live = n

    def _pad_sentences(self, live: Tensor) -> None:
        """A fixed layout's source positions and sentences padded up to their buckets."""
        assert self.layout is not None
        pad = length_bucket(self.src_mask.size(-1)) - self.src_mask.size(-1)
        self.src_mask = F.pad(self.src_mask, (0, pad), value=False)  # (B, 1, 1, Sb)
        self.cross_kv = [(F.pad(k, (0, 0, 0, pad)), F.pad(v, (0, 0, 0, pad))) for k, v in self.cross_kv]
        self._sentences_kept(padded_rows(live, self.layout.capacity(live.numel())))

    def _sentences_kept(self, sentences: Tensor) -> None:
        self.src_mask = self.src_mask.index_select(0, sentences)
        self.cross_kv = [
            (k.index_select(0, sentences), v.index_select(0, sentences)) for k, v in self.cross_kv
        ]
        if self.start is not None:
            self.start = self.start.index_select(0, sentences)


class Encoder(nn.Module):
    """N identical self-attention layers; pre-norm stacks end with one more LayerNorm."""

    def __init__(self, cfg, n_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(SelfAttentionLayer(cfg) for _ in range(n_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()

    def forward(
        self, x: Tensor, mask: Tensor | None, *, causal: bool = False, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor] | None]:
        weights = []
        for layer in self.layers:
            x, w = layer(x, mask=mask, causal=causal, need_weights=need_weights)
            weights.append(w)
        return self.final_norm(x), (weights if need_weights else None)


class TargetDecoder(nn.Module):
    """The Transformer's decoder half (section 3.1) over any encoder's memory, stepped with a cache.

    A subclass builds ``tgt_embed``, ``decoder_layers``, ``decoder_norm`` and ``output_proj`` and an
    ``encode`` that gives an :class:`EncoderOutput`; this class owns ``init_state`` and ``decode``,
    so the Transformer (a sentence's memory) and the captioner (an image's regions) decode alike
    and every search serves both.
    """

    config: Any  # a config with the special ids, max_len and positional (TransformerConfig, ...)
    tgt_embed: TokenEmbedding
    decoder_layers: nn.ModuleList
    decoder_norm: nn.Module
    output_proj: nn.Linear

    def init_state(
        self, enc: EncoderOutput, *, cache: type[KVCache] | FixedLayout = KVCache
    ) -> TransformerState:
        """One row per sentence; each layer's cross-attention keys and values projected once.
        ``cache``: the self-attention cache class (the searches pass one that moves rows lazily),
        or a :class:`~attnkit.attention.FixedLayout` (buffers written in place, for a compiled step)."""
        layers = cast(Iterable[DecoderLayer], self.decoder_layers)  # nn.ModuleList types them as Module
        cross = [layer.cross_attn.keys_values(enc.memory) for layer in layers]
        if isinstance(cache, FixedLayout):
            check_fixed(self.config)
            return TransformerState(enc.src_mask, cross, [cache.cache() for _ in layers], layout=cache)
        return TransformerState(enc.src_mask, cross, [cache() for _ in self.decoder_layers])

    def decode(
        self, tgt: Tensor, state: TransformerState, *, need_weights: bool = False, project: bool = True
    ) -> DecoderOutput:
        """Logits (N, T, V) for target positions len(state)..len(state)+T-1 given those tokens tgt (N, T).

        On an empty state this is teacher forcing over the whole prefix (causal self-attention);
        the state then holds the keys and values of every position, ready for the next step.
        ``project=False``: the last hidden states (N, T, D) in place of the logits, for a loss that
        applies the output layer itself (:mod:`attnkit.linear_loss`).
        """
        if state.layout is not None:
            return decode_fixed(self, tgt, state, state.layout, need_weights)
        offset: int | Tensor = len(state)  # one position for all rows, or one per row (N,)
        self_mask = None
        if state.start is not None:  # sentences at different steps (attnkit.decoding.continuous)
            if self.tgt_embed.positions is None:
                raise ValueError(
                    "sentences at different steps need absolute positions (sinusoidal or learned)"
                )
            start = state.start.repeat_interleave(state.group)  # (N,)
            offset = len(state) - start  # (N,) position of each row's first new token
            cache_pos = torch.arange(len(state) + tgt.size(1), device=tgt.device)  # (t + T,)
            self_mask = (cache_pos >= start[:, None])[:, None, None, :]  # (N, 1, 1, t + T) True = its own
        return self.layers_forward(self.tgt_embed(tgt, offset), state, self_mask, need_weights, project)

    def step(self, tgt: Tensor, state: TransformerState, need_weights: bool = False) -> DecoderOutput:
        """One step over a fixed layout's buffers: tgt (R, T) at the layout's position (a tensor) ->
        logits (R, T, V); no host value read, so ``torch.compile`` takes it whole
        (:mod:`attnkit.decoding.compiled`)."""
        layout = state.layout
        assert layout is not None, "step runs over a fixed layout"
        positions = layout.position(tgt.device) + torch.arange(tgt.size(1), device=tgt.device)  # (T,)
        visible = layout.visible(tgt.size(1), tgt.device)  # (1, 1, T, Tb)
        return self.layers_forward(self.tgt_embed.at(tgt, positions), state, visible, need_weights)

    def layers_forward(
        self,
        y: Tensor,
        state: TransformerState,
        self_mask: Tensor | None,
        need_weights: bool,
        project: bool = True,
    ) -> DecoderOutput:
        """The decoder layers, final norm and output projection over embedded targets y (N, T, D)."""
        self_ws, cross_ws = [], []
        for layer, cross_kv, self_kv in zip(self.decoder_layers, state.cross_kv, state.self_kv):
            y, self_w, cross_w = layer(
                y,
                cross_kv,
                src_mask=state.src_mask,
                self_cache=self_kv,
                self_mask=self_mask,
                kv_group=state.group,
                need_weights=need_weights,
            )
            self_ws.append(self_w)
            cross_ws.append(cross_w)
        y = self.decoder_norm(y)  # (N, T, D)
        logits = self.output_proj(y) if project else y  # (N, T, V), or (N, T, D) unprojected
        return DecoderOutput(logits, self_ws, cross_ws) if need_weights else DecoderOutput(logits)


class Transformer(TargetDecoder):
    """Encoder-decoder Transformer with tied embeddings and an incremental, cached decoder.

    Args:
        config: :class:`TransformerConfig`; ``TransformerConfig.preset("base")`` is the paper's model.
    Shape:
        forward: src (B, S), tgt_in (B, T) -> logits (B, T, V_tgt).
    """

    config: TransformerConfig

    # train.freeze: the parts a fine-tuning can keep fixed, by child module (the output layer trains)
    freezable = {
        "embeddings": ("src_embed", "tgt_embed"),
        "encoder": ("encoder",),
        "decoder": ("decoder_layers", "decoder_norm"),
    }

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.src_embed = TokenEmbedding(config.src_vocab_size, config)
        self.tgt_embed = (
            self.src_embed if config.share_vocab else TokenEmbedding(config.tgt_vocab_size, config)
        )
        self.encoder = Encoder(config, config.n_encoder_layers)
        self.decoder_layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        self.decoder_norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()
        # Pre-softmax linear layer; tied, its weight is the target embedding E (section 3.4): logits = h E^T.
        bias = not config.tie_output or config.output_bias  # tied: a bias only for imported models
        self.output_proj = nn.Linear(config.d_model, config.tgt_vocab_size, bias=bias)
        if config.tie_output:
            self.output_proj.weight = self.tgt_embed.embedding.weight
            self._register_load_state_dict_pre_hook(fill_tied_output("tgt_embed.embedding.weight"))
            if config.output_bias:
                nn.init.zeros_(self.output_proj.bias)

    def encode(self, src: Tensor, *, need_weights: bool = False) -> EncoderOutput:
        """src (B, S) token ids -> memory (B, S, D) and the source padding mask."""
        src_mask = padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        memory, weights = self.encoder(self.src_embed(src), src_mask, need_weights=need_weights)
        return EncoderOutput(memory, src_mask, weights)

    def forward(self, src: Tensor, tgt_in: Tensor, *, project: bool = True) -> Tensor:
        """Teacher forcing: logits (B, T, V) for every position of tgt_in (B, T) = bos + target
        (``project=False``: the hidden states (B, T, D) the output layer maps to them)."""
        return self.decode(tgt_in, self.init_state(self.encode(src)), project=project).logits


def fill_tied_output(embedding_key: str):
    """A load hook: checkpoints written before the tied output became an ``nn.Linear`` sharing the
    embedding have no ``output_proj.weight``; it is the embedding, so take it from there."""

    def hook(state_dict, prefix, *args):
        key = prefix + "output_proj.weight"
        if key not in state_dict and prefix + embedding_key in state_dict:
            state_dict[key] = state_dict[prefix + embedding_key]

    return hook


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, each shared tensor counted once (tied embeddings count once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
