"""Continuous batching: one beam search that sentences join and leave at every step.

A server's requests arrive one by one. Decoding each arriving group as its own batch leaves the
batch small (a handful of sentences) and makes every sentence wait for the longest of its group.
:class:`BeamPool` keeps one batch decoding instead: ``add`` encodes new sentences and joins them to
the running decoder state (:func:`join_states`), ``step`` advances every sentence by one token
(the one search step, :func:`~.search.decode_step`, with :class:`~.beam.BeamSearch`) and returns
those that finished. Each sentence goes through exactly the search of
:func:`~attnkit.decoding.beam.beam_search` (same ranking, same stopping rule, same length limit),
only alongside different company, so its result is the same (up to float rounding from the padding).

A sentence joins with K rows of which only the first is alive (the others score -inf), so its
first step picks K tokens from one row, as ``beam_decode``'s one-row first step does, while it
shares the model call with sentences further along.

Joining works on a decoder state with per-sentence start positions (:class:`JoinableState`: the
Transformer's, with absolute positions): the shorter self-attention caches are left-padded to one
length and ``start`` (B,) records where each sentence's first target position sits in the cache;
the decoder masks the padding out of self-attention and counts each row's positions from its start.

Legend: B sentences decoding, K beam size, N = B * K rows, S source length, H heads, Dh head size.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..attention import KVCache
from ..model.interface import Seq2SeqModel
from .beam import BeamSearch
from .common import Hypothesis, start_from_source
from .controls import Controls, prepare
from .defaults import BEAM, LENGTH_PENALTY, MAX_LEN_A, MAX_LEN_B
from .loop import decode_step
from .options import check_nbest


@runtime_checkable
class JoinableState(Protocol):
    """A decoder state whose sentences may sit at different steps (``start`` per sentence)."""

    group: int
    src_mask: Tensor  # (B, 1, 1, S)
    cross_kv: list[tuple[Tensor, Tensor]]  # L x 2 x (B, H, S, Dh)
    self_kv: list[KVCache]  # L x (N, H, t, Dh)
    start: Tensor | None  # (B,) cache position of each sentence's first target token; None: all 0

    def __len__(self) -> int: ...


def join_states(state: JoinableState, other: JoinableState) -> None:
    """Append ``other``'s sentences after those of ``state`` (same group; positions may differ)."""
    if other.group != state.group:
        raise ValueError(f"cannot join states of {state.group} and {other.group} rows per sentence")
    t = max(len(state), len(other))
    S = max(state.src_mask.size(-1), other.src_mask.size(-1))
    start = torch.cat([_starts(state) + t - len(state), _starts(other) + t - len(other)])  # (B + B',)
    state.src_mask = torch.cat(
        [_pad_right(state.src_mask, S), _pad_right(other.src_mask, S)]
    )  # (B+B', 1, 1, S)
    state.cross_kv = [
        (torch.cat([_pad_time(k, S), _pad_time(ko, S)]), torch.cat([_pad_time(v, S), _pad_time(vo, S)]))
        for (k, v), (ko, vo) in zip(state.cross_kv, other.cross_kv, strict=True)
    ]
    n_self, n_other = start.size(0) - other.src_mask.size(0), other.src_mask.size(0)
    for mine, theirs in zip(state.self_kv, other.self_kv, strict=True):
        like = mine.k if mine.k is not None else theirs.k
        if like is None:  # nothing decoded on either side yet
            continue
        k_a, v_a = _cache_or_empty(mine, n_self * state.group, like)
        k_b, v_b = _cache_or_empty(theirs, n_other * state.group, like)
        mine.k = torch.cat([_pad_time(k_a, t, left=True), _pad_time(k_b, t, left=True)])  # (N+N', H, t, Dh)
        mine.v = torch.cat([_pad_time(v_a, t, left=True), _pad_time(v_b, t, left=True)])
    state.start = start
    trim(state)


def trim(state: JoinableState) -> None:
    """Drop cache positions no sentence uses any more, and source positions past every sentence."""
    drop = int(state.start.min()) if state.start is not None and state.start.numel() else 0
    if drop > 0:
        for kv in state.self_kv:
            if kv.k is not None and kv.v is not None:
                kv.k, kv.v = kv.k[:, :, drop:], kv.v[:, :, drop:]
        state.start = state.start - drop if state.start is not None else None
    if state.start is not None and not bool(state.start.any()):
        state.start = None  # every sentence starts at 0 again: no mask needed
    S = int(state.src_mask.sum(dim=-1).max()) if state.src_mask.size(0) else 0
    if 0 < S < state.src_mask.size(-1):
        state.src_mask = state.src_mask[..., :S]
        state.cross_kv = [(k[:, :, :S], v[:, :, :S]) for k, v in state.cross_kv]


def _starts(state: JoinableState) -> Tensor:
    """(B,) cache position of each sentence's first target token."""
    if state.start is not None:
        return state.start
    return torch.zeros(state.src_mask.size(0), dtype=torch.long, device=state.src_mask.device)


def _pad_time(x: Tensor, length: int, *, left: bool = False) -> Tensor:
    """(N, H, t, Dh) zero-padded along t to ``length`` (on the left for self-attention caches)."""
    pad = length - x.size(2)
    if pad == 0:
        return x
    return F.pad(x, (0, 0, pad, 0) if left else (0, 0, 0, pad))


def _pad_right(mask: Tensor, length: int) -> Tensor:
    """(B, 1, 1, S) padded with False (padding) to S = ``length``."""
    return F.pad(mask, (0, length - mask.size(-1)), value=False)


def _cache_or_empty(kv: KVCache, rows: int, like: Tensor) -> tuple[Tensor, Tensor]:
    if kv.k is not None and kv.v is not None:
        return kv.k, kv.v
    empty = like.new_zeros(rows, like.size(1), 0, like.size(3))  # (N, H, 0, Dh)
    return empty, empty


class BeamPool:
    """Beam search over a changing set of sentences.

    Args:
        model: a seq2seq model whose decoder state can join (the Transformer with absolute positions).
        beam_size, length_penalty, nbest, max_len_a, max_len_b, min_len, controls: as
            :func:`~.beam.beam_search`; ``add`` takes each sentence's ``prefix``.
    """

    def __init__(
        self,
        model: Seq2SeqModel,
        *,
        beam_size: int = BEAM,
        length_penalty: float = LENGTH_PENALTY,
        nbest: int = 1,
        max_len_a: float = MAX_LEN_A,
        max_len_b: int = MAX_LEN_B,
        min_len: int = 0,
        controls: Controls | None = None,
    ):
        check_nbest(beam_size, nbest)
        self.model, self.K, self.nbest = model, beam_size, nbest
        self.max_len_a, self.max_len_b, self.min_len = max_len_a, max_len_b, min_len
        self.controls = controls if controls is not None and controls.active else None
        self.search = BeamSearch(
            model.config.eos_id, beam_size=beam_size, length_penalty=length_penalty, nbest=nbest
        )
        self.state: Any = None  # a JoinableState while sentences decode

    def __len__(self) -> int:
        return len(self.search)

    @torch.no_grad()
    def add(self, src: Tensor, tags: list[Hashable], *, prefix: list[list[int]] | None = None) -> None:
        """Start decoding src (B', S) (no empty rows); ``tags`` name its sentences in ``step``'s results;
        ``prefix``: each sentence's first target tokens (forced)."""
        if src.size(0) != len(tags):
            raise ValueError(f"{src.size(0)} sentences but {len(tags)} tags")
        K = self.K
        if 2 * K > self.model.config.tgt_vocab_size:
            raise ValueError(f"beam {K} is over half the vocabulary: use beam_search")
        state, first, limits = start_from_source(self.model, src, self.max_len_a, self.max_len_b)
        _, forced = prepare(self.model.config, limits, prefix, None)
        if not isinstance(state, JoinableState):
            raise ValueError(f"{type(state).__name__} cannot join a running batch: use beam_search")
        state.expand(K)
        if self.state is None:
            self.state = state
        else:
            join_states(self.state, state)
        self.search.add(first, limits, tags, rows=K, forced=forced)

    @torch.no_grad()
    def step(self) -> list[tuple[Hashable, list[Hypothesis]]]:
        """One token for every sentence; returns (tag, its ``nbest`` hypotheses best first) of those done."""
        if self.state is None or not len(self.search):
            return []
        out = decode_step(self.model, self.state, self.search, min_len=self.min_len, controls=self.controls)
        if not len(self.search):
            self.state = None  # an empty pool starts afresh
        elif out and self.state.start is not None:
            trim(self.state)
        return out
