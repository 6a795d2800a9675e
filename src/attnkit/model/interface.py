"""The contracts every model keeps, written as code: what the searches and the trainer rely on.

A *decoder state* is everything an incremental decoder carries between steps (its key/value caches,
the encoder output it attends to). It is owned by the caller and changed only through three moves,
the whole vocabulary of beam search:

    state.expand(k)         each row becomes k rows (one row per sentence -> k hypotheses each)
    state.reorder(rows)     new row i continues old row rows[i] (hypotheses move within a sentence)
    state.select(sentences) keep only these sentences, with all their rows (finished ones leave)

``state.group`` is the number of rows (hypotheses) per sentence. It is stored once, here, and the
decoder passes it to cross-attention as ``kv_group`` so a sentence's hypotheses share its encoder
keys and values; nothing infers it from tensor shapes.

Legend: B sentences, G rows per sentence (group), N = B * G rows, S source length, T new positions,
V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from torch import Tensor


@dataclass
class DecoderOutput:
    """logits (N, T, V) for the decoded positions; attention weights when asked for."""

    logits: Tensor
    self_attn: list[Tensor] | None = None  # L x (N, H, T, T')
    cross_attn: list[Tensor] | None = None  # L x (N, H, T, S)


class SpecialIds(Protocol):
    """The token ids a search needs; model configs carry them (filled from the tokenizer)."""

    pad_id: int
    bos_id: int
    eos_id: int
    max_len: int


class Seq2SeqIds(SpecialIds, Protocol):
    """An encoder-decoder's config: the special ids and the target vocabulary's size."""

    tgt_vocab_size: int


@runtime_checkable
class DecoderState(Protocol):
    group: int

    def __len__(self) -> int:
        """Target positions decoded so far."""
        ...

    def expand(self, k: int) -> None:
        """Each row becomes k consecutive rows; needs group == 1, leaves group == k."""
        ...

    def reorder(self, rows: Tensor) -> None:
        """rows (N,): new row i continues old row rows[i]; rows stay within their sentence."""
        ...

    def select(self, sentences: Tensor) -> None:
        """sentences (B',): keep these sentences and all their rows, in this order."""
        ...


class IncrementalDecoder(Protocol):
    """What greedy, beam and sampling search drive: one step at a time over a decoder state."""

    config: SpecialIds

    def decode(self, tokens: Tensor, state: DecoderState, *, need_weights: bool = False) -> DecoderOutput:
        """Logits for positions len(state)..len(state)+T-1 given tokens (N, T); the state grows by T."""
        ...


@runtime_checkable
class Seq2SeqModel(IncrementalDecoder, Protocol):
    """An encoder-decoder: the Transformer and the RNN baseline.

    Teacher forcing is ``model(src, tgt_in)`` = ``decode(tgt_in, init_state(encode(src))).logits``.
    """

    config: Seq2SeqIds

    def encode(self, src: Tensor, *, need_weights: bool = False): ...

    def init_state(self, enc, *, cache: Any = ...) -> DecoderState:
        """The state before the first target token; ``cache``: the key/value cache class to use,
        where the model keeps such caches, or a fixed layout (:mod:`attnkit.attention.layout`)."""
        ...

    def __call__(self, src: Tensor, tgt_in: Tensor) -> Tensor: ...


@runtime_checkable
class LanguageModel(IncrementalDecoder, Protocol):
    """A decoder-only model: ``model(tokens)`` -> next-token logits at every position."""

    def init_state(self, batch_size: int, *, cache: Any = ...) -> DecoderState: ...

    def __call__(self, tokens: Tensor) -> Tensor: ...
