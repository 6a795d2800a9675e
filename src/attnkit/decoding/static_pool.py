"""Continuous batching over the fixed layout: sentences join and leave a compiled beam search.

:class:`~.continuous.BeamPool` joins sentences to the eager search's decoder state, whose caches
change length and layout at every join: a compiled step would trace again. :class:`StaticBeamPool`
keeps the buffers of :mod:`.fixed_layout` instead:

- every sentence owns a *place* of K buffer rows from the step it joins to the step it is done;
  its keys and values start at position 0 of its rows, and each row decodes at its own position
  (``pos`` (R,), a tensor: every step of every sentence is the same graph);
- joining writes a sentence's cross-attention keys and values, bos and a fresh running score
  (0 for the first row, -inf for the others, as :func:`~.beam_step.run_beam_step` starts) into a free
  place; leaving only marks the place free: its rows decode on, unread, scored -inf;
- the step is :class:`~.beam_step.BeamStep`, compiled or not: decoder, ranking and beam moves in one
  graph per bucket (R rows, Tb cache positions, Sb source positions), whatever joins or leaves;
- the buckets follow the live sentences: a join that finds no free place or brings a longer
  source, or a hypothesis about to outgrow the cache, moves the live places into buffers of a
  larger bucket (the cache grows with the longest hypothesis, not to the largest length limit: most
  sentences end far below theirs); once the longest source or hypothesis has left, the buffers
  shrink to the longest left, and once the live sentences fill a quarter of the rows or less, they
  move, packed, into the smallest bucket that holds them: finished sentences stop costing.

Each sentence gets :func:`~.beam.beam_search`'s ranking, length limit and stopping rule, alone,
(the host keeps each sentence's finished hypotheses, as :func:`~.beam_step.run_beam_step` does),
so its result is the one it gets alone up to float rounding (tests/test_static_pool.py).

Legend: B sentences joining, K beam, P places, R buffer rows (P * K and spare rows), L layers,
H heads, Dh head size, Tb cache positions, Sb source positions (bucketed), V vocabulary.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor

from ..model.interface import Seq2SeqModel
from ..model.transformer import TransformerState
from .beam import is_done, score_bound
from .beam_step import Moves, record_ended
from .common import Hypothesis, check_nbest, start_from_source
from .fixed_layout import StaticCaches, length_bucket, row_bucket
from .static import StaticDecoder


@dataclass
class _Place:
    """One sentence's K rows, as the host follows them."""

    tag: Hashable
    limit: int  # most new tokens, eos included
    src_len: int  # real source tokens
    t: int = 0  # tokens chosen so far
    finished: list[Hypothesis] = field(default_factory=list)


class StaticBeamPool:
    """Beam search over a changing set of sentences through ``decoder``'s beam step
    (:class:`~.static.StaticDecoder`, compiled or not). The interface of
    :class:`~.continuous.BeamPool`, without prefixes or controls; ``min_len`` is the decoder's.

    Args:
        decoder: the fixed-layout searches of a Transformer (not a CUDA-graph replay: its beams rank
            around the graph).
        beam_size, length_penalty_alpha, nbest, max_len_a, max_len_b: as :func:`~.beam.beam_search`.
    """

    # The step's inputs beside the caches: each row's newest token, origin and position (R,),
    # each place's running log P (P, K), each row's chosen tokens (R, Tb).
    tokens: Tensor
    origin: Tensor
    pos: Tensor
    scores: Tensor
    history: Tensor

    def __init__(
        self,
        decoder: StaticDecoder,
        *,
        beam_size: int = 4,
        length_penalty_alpha: float = 0.6,
        nbest: int = 1,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
    ):
        check_nbest(beam_size, nbest)
        self.model = decoder.seq2seq()
        if decoder.run_beam is None:
            raise ValueError("a CUDA-graph step ranks its beams around the graph: use BeamPool")
        if 2 * beam_size > self.model.config.tgt_vocab_size:
            raise ValueError(f"beam {beam_size} is over half the vocabulary: use beam_search")
        self.run_beam: Callable[..., Moves] = decoder.run_beam
        # The same step uncompiled, for when the compiled one may hold no more graphs.
        self.eager_beam: Callable[..., Moves] = decoder.beam_step
        self.K, self.alpha, self.nbest = beam_size, length_penalty_alpha, nbest
        self.max_len_a, self.max_len_b = max_len_a, max_len_b
        self.places: list[_Place | None] = []  # P entries once buffers exist; None: a free place
        self.caches: StaticCaches | None = None
        self._clear()  # and the step's other inputs

    def __len__(self) -> int:
        return sum(p is not None for p in self.places)

    @property
    def buckets(self) -> tuple[int, int, int]:
        """(R, Tb, Sb) of the buffers now; (0, 0, 0) without any."""
        c = self.caches
        return (0, 0, 0) if c is None else (c.limits.size(0), c.self_k[0].size(2), c.cross_k[0].size(2))

    @torch.no_grad()
    def add(self, src: Tensor, tags: list[Hashable]) -> None:
        """Start decoding src (B, S) (no empty rows); ``tags`` name its sentences in ``step``'s results."""
        if src.size(0) != len(tags):
            raise ValueError(f"{src.size(0)} sentences but {len(tags)} tags")
        cfg = self.model.config
        state, first, limits = start_from_source(
            cast(Seq2SeqModel, self.model), src, self.max_len_a, self.max_len_b
        )
        assert isinstance(state, TransformerState)
        src_len = (src != cfg.pad_id).sum(dim=1).tolist()
        new = [_Place(tag, n, s) for tag, n, s in zip(tags, limits.tolist(), src_len, strict=True)]
        live = self._live()
        free = [i for i, p in enumerate(self.places) if p is None]
        R, Tb, Sb = self._buckets([*(p for p in self.places if p is not None), *new])
        _, Tb_now, Sb_now = self.buckets
        if len(free) < len(new) or Tb > Tb_now or Sb > Sb_now:
            self._relayout(live, R, max(Tb, Tb_now), max(Sb, Sb_now))
            free = list(range(len(live), len(self.places)))
        caches = self.caches
        assert caches is not None
        B, K, Sb = len(new), self.K, caches.cross_k[0].size(2)
        at = torch.tensor(free[:B], device=src.device)  # (B,) their places
        rows = (at[:, None] * K + torch.arange(K, device=src.device)).view(-1)  # (B * K,)
        which = torch.arange(B, device=src.device).repeat_interleave(K)  # (B * K,) each row's sentence
        S = min(src.size(1), Sb)  # columns past the real tokens are padding either way
        for ck, cv, (k, v) in zip(caches.cross_k, caches.cross_v, state.cross_kv, strict=True):
            ck.index_copy_(0, rows, F.pad(k[:, :, :S], (0, 0, 0, Sb - S)).index_select(0, which))
            cv.index_copy_(0, rows, F.pad(v[:, :, :S], (0, 0, 0, Sb - S)).index_select(0, which))
        for buf in (*caches.self_k, *caches.self_v):  # a reused row's old keys: masked, but never NaN
            buf.index_fill_(0, rows, 0.0)
        assert caches.src_mask is not None
        mask = F.pad(state.src_mask[..., :S], (0, Sb - S), value=False)  # (B, 1, 1, Sb)
        caches.src_mask.index_copy_(0, rows, mask.index_select(0, which))
        caches.limits.index_copy_(0, rows, limits.index_select(0, which))
        self.tokens = self.tokens.index_copy(0, rows, first[:, 0].index_select(0, which))
        self.origin = self.origin.index_copy(0, rows, rows)
        self.pos = self.pos.index_fill(0, rows, 0)
        self.history = self.history.index_fill(0, rows, 0)
        start = torch.full((B, K), float("-inf"), device=src.device)
        start[:, 0] = 0.0  # one live row per sentence before its first step
        self.scores = self.scores.index_copy(0, at, start)
        for i, place in zip(free, new):
            self.places[i] = place

    @torch.no_grad()
    def step(self) -> list[tuple[Hashable, list[Hypothesis]]]:
        """One token for every sentence; returns (tag, its ``nbest`` hypotheses best first) of those done."""
        if self.caches is None or not len(self):
            return []
        K, alpha = self.K, self.alpha
        moves = self._run()
        followed = [None if p is None else (p.finished, p.t) for p in self.places]
        record_ended(moves, self.history, K, alpha, followed)
        self.tokens, self.origin, self.scores, self.history = (
            moves.tokens,
            moves.origin,
            moves.scores,
            moves.history,
        )
        R, Tb, Sb = self.buckets
        self.pos = self.pos + 1
        best = self.scores.max(dim=1).values.tolist()  # (P,) a live hypothesis's log P only falls
        out, freed = [], []
        for b, place in enumerate(self.places):
            if place is None:
                continue
            place.t += 1
            if is_done(place.finished, score_bound(best[b], place.limit, alpha), K):
                out.append(
                    (place.tag, sorted(place.finished, key=lambda h: h.score, reverse=True)[: self.nbest])
                )
                self.places[b] = None
                freed.append(b)
        if freed:
            self.scores = self.scores.index_fill(
                0, torch.tensor(freed, device=self.scores.device), float("-inf")
            )
        live = [p for p in self.places if p is not None]
        if not live:
            self._relayout([], 0, 0, 0)  # an empty pool holds no buffers
        else:  # rows shrink at a quarter full; the cache and the source follow the longest live
            rows, Tb_live, Sb_live = self._buckets(live)
            rows = rows if 4 * rows <= R else R
            if (rows, Tb_live, Sb_live) != (R, Tb, Sb):
                self._relayout(self._live(), rows, Tb_live, Sb_live)
            # free rows' positions stop at the cache's (and the embeddings') last one
            self.pos.clamp_(max=min(self.buckets[1], self.model.config.max_len) - 1)
        return out

    def _run(self) -> Moves:
        """One beam step; once the compiled step may hold no more graphs (a long-lived server meeting
        more buckets than ``GRAPHS_PER_STEP``), the step runs eagerly from then on, with a warning."""
        from torch._dynamo.exc import FailOnRecompileLimitHit

        args = (self.tokens, self.origin, self.pos, self.caches, self.scores, self.history)
        try:
            return self.run_beam(*args)
        except FailOnRecompileLimitHit:
            if self.run_beam is self.eager_beam:
                raise
            warnings.warn(
                f"the compiled decoding step holds its most graphs; buckets {self.buckets} and later "
                "new ones decode eagerly",
                stacklevel=2,
            )
            self.run_beam = self.eager_beam
            return self.run_beam(*args)

    def _live(self) -> list[int]:
        return [i for i, p in enumerate(self.places) if p is not None]

    def _clear(self) -> None:
        self.places, self.caches = [], None
        self.tokens, self.origin, self.pos = torch.empty(0), torch.empty(0), torch.empty(0)  # (R,) each
        self.scores, self.history = torch.empty(0), torch.empty(0)  # (P, K), (R, Tb)

    def _buckets(self, places: list[_Place]) -> tuple[int, int, int]:
        """(R, Tb, Sb) that hold ``places`` for their next step: the cache grows with the longest
        hypothesis, not to the longest length limit (most sentences end far below theirs)."""
        return (
            row_bucket(len(places) * self.K),
            length_bucket(max(p.t for p in places) + 1),
            length_bucket(max(p.src_len for p in places)),
        )

    def _relayout(self, keep: list[int], R: int, Tb: int, Sb: int) -> None:
        """Move the places ``keep`` (in order) to the first places of new buffers (R, Tb, Sb)."""
        old, K = self.caches, self.K
        if R == 0:
            self._clear()
            return
        cfg, weight = self.model.config, self.model.output_proj.weight
        H, Dh, L = cfg.n_heads, cfg.d_model // cfg.n_heads, len(self.model.decoder_layers)
        device, P = weight.device, R // K

        def zeros(T: int) -> list[Tensor]:
            return [torch.zeros(R, H, T, Dh, dtype=weight.dtype, device=device) for _ in range(L)]

        new = StaticCaches(
            zeros(Tb),
            zeros(Tb),
            zeros(Sb),
            zeros(Sb),
            torch.zeros(R, 1, 1, Sb, dtype=torch.bool, device=device),
            torch.ones(R, dtype=torch.long, device=device),
            torch.zeros(1, dtype=torch.long, device=device),
        )
        tokens = torch.zeros(R, dtype=torch.long, device=device)
        origin = torch.arange(R, device=device)
        pos = torch.zeros(R, dtype=torch.long, device=device)
        scores = torch.full((P, K), float("-inf"), device=device)
        history = torch.zeros(R, Tb, dtype=torch.long, device=device)
        n = len(keep) * K
        if old is not None and keep:
            at = torch.tensor(keep, device=device)  # (P',) old places
            src = (at[:, None] * K + torch.arange(K, device=device)).view(-1)  # (n,) their old rows
            t, s = min(Tb, old.self_k[0].size(2)), min(Sb, old.cross_k[0].size(2))
            for mine, theirs in zip((*new.self_k, *new.self_v), (*old.self_k, *old.self_v), strict=True):
                mine[:n, :, :t] = theirs.index_select(0, src)[:, :, :t]
            for mine, theirs in zip((*new.cross_k, *new.cross_v), (*old.cross_k, *old.cross_v), strict=True):
                mine[:n, :, :s] = theirs.index_select(0, src)[:, :, :s]
            assert new.src_mask is not None and old.src_mask is not None
            new.src_mask[:n, ..., :s] = old.src_mask.index_select(0, src)[..., :s]
            new.limits[:n] = old.limits.index_select(0, src)
            tokens[:n] = self.tokens.index_select(0, src)
            pos[:n] = self.pos.index_select(0, src)
            history[:n, :t] = self.history.index_select(0, src)[:, :t]
            # A row's origin is a row of its own place: the same offset in the new place.
            origin[:n] = self.origin.index_select(0, src) - src + torch.arange(n, device=device)
            scores[: len(keep)] = self.scores.index_select(0, at)
        self.places = [self.places[i] for i in keep] + [None] * (P - len(keep))
        self.caches = new
        self.tokens, self.origin, self.pos, self.scores, self.history = tokens, origin, pos, scores, history
