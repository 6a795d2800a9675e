"""Batched beam search with the GNMT length penalty (Wu et al., 2016), for any incremental decoder.

Each sentence keeps K live hypotheses (:class:`BeamSearch`, a strategy of the one search loop); at
every step the 2K best extensions are ranked, those ending
in eos (among the top K) are finalized (the K best are kept), and the best K others live on. A
sentence is done once it has K finished hypotheses and no live one can still beat the worst of
them (log-probabilities only fall, and the length penalty is at most lp(length limit)); its rows
then leave the batch, so later steps cost less. The decoder state follows through its three moves:
``expand`` after the first step, ``reorder`` after each later one, ``select`` when sentences finish.

Legend: B sentences still decoding, K beam size, N = B * K rows, V vocabulary, S source length.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..model.interface import DecoderState, IncrementalDecoder, Seq2SeqModel
from .common import Hypothesis, Layout, start_from_source
from .controls import FREE, Controls, prepare
from .defaults import BEAM, LENGTH_PENALTY, MAX_LEN_A, MAX_LEN_B
from .loop import run_search
from .options import check_nbest
from .topk import top_extensions  # the C best sums: one top-k, or a faster equal one on a CPU


def length_penalty(length: int, alpha: float) -> float:
    """``lp(Y) = ((5 + len(Y)) / 6) ** alpha``; ``score = log P(Y | X) / lp(Y)``. alpha = 0 disables it."""
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class Ranked:
    """One step's outcome for B sentences of ``beams`` rows each (N = B * beams).

    scores (B, K) and new_tok (B * K, 1): the K survivors, extending rows ``origin`` (B * K,);
    finished: (sentence, row, log P) of each eos candidate that ranked among its sentence's top K.
    """

    scores: Tensor
    origin: Tensor
    new_tok: Tensor
    finished: list[tuple[int, int, float]]


def rank_extensions(scores: Tensor, logp: Tensor, K: int, eos_id: int) -> Ranked:
    """Rank the extensions of every live hypothesis: scores (B, beams) running log P, logp (N, V)."""
    n, beams = scores.shape
    C = min(2 * K, beams * logp.size(-1))
    top_scores, top_beam, top_tok = top_extensions(scores, logp, C)  # (B, C) each, best first
    is_eos = (top_tok == eos_id) & torch.isfinite(top_scores)
    finished = [
        (b, b * beams + int(top_beam[b, j]), float(top_scores[b, j]))
        for b, j in is_eos[:, :K].nonzero().tolist()
    ]
    # The K best non-eos candidates live on (eos ones pushed behind all others).
    rank = torch.arange(C, device=scores.device).expand(n, -1) + is_eos.long() * C  # (B, C)
    keep_pos = rank.topk(min(K, C), dim=1, largest=False).indices  # (B, K)
    if keep_pos.size(1) < K:  # a vocabulary smaller than K: pad with hopeless copies
        keep_pos = torch.cat([keep_pos, keep_pos[:, -1:].expand(n, K - keep_pos.size(1))], dim=1)
    # With a vocabulary narrower than the beam, eos or impossible candidates fill the K places:
    # they live on at -inf, so they never finish and never keep a sentence open.
    new_scores = top_scores.gather(1, keep_pos).masked_fill(
        is_eos.gather(1, keep_pos), float("-inf")
    )  # (B, K)
    if C < K:
        new_scores[:, C:] = float("-inf")
    origin = (top_beam.gather(1, keep_pos) + torch.arange(n, device=scores.device)[:, None] * beams).view(-1)
    new_tok = top_tok.gather(1, keep_pos).view(-1, 1)  # (N, 1)
    return Ranked(new_scores, origin, new_tok, finished)


def keep_best(finished: list[Hypothesis], hyp: Hypothesis, K: int) -> None:
    """Add ``hyp`` to a sentence's finished hypotheses, keeping the K best."""
    finished.append(hyp)
    if len(finished) > K:
        finished.remove(min(finished, key=lambda h: h.score))


def score_bounds(scores: Tensor, limits: Tensor, alpha: float) -> list[float]:
    """The best score a live hypothesis of each sentence could still reach: its log P (which only
    falls) over the largest length penalty it can get (at its length limit). scores (B, K), limits (B,)."""
    alive = scores.max(dim=1).values  # (B,)
    return (alive / ((5.0 + limits.double()) / 6.0) ** alpha).tolist()


def is_done(finished: list[Hypothesis], bound: float, K: int) -> bool:
    """A sentence is done when no live hypothesis can reach its K best finished ones."""
    return bound == float("-inf") or (len(finished) >= K and bound <= min(h.score for h in finished))


class BeamSearch:
    """Beam search as a strategy of :func:`~.search.run_search`: K hypotheses per sentence.

    ``add`` starts sentences from their newest tokens (B', 1), length limits (B',) and tags, with one
    row each (``rows=1``: the first step picks K tokens from it, then the state expands to K rows) or
    K rows of which only the first is alive (``rows=K``: how sentences join a search already at K rows,
    :class:`~.continuous.BeamPool`). Sentences at different steps may share the search: each keeps its
    own step count, and ``prefix`` holds every row's chosen tokens right-aligned (after the context
    the first ``add`` starts from: the controls' history). ``forced`` (B', P): each sentence's
    forced first tokens (:func:`~.controls.forced_table`).
    Results are each sentence's ``nbest`` finished hypotheses, best first.
    """

    def __init__(self, eos_id: int, *, beam_size: int, length_penalty: float, nbest: int = 1):
        check_nbest(beam_size, nbest)
        self.eos_id, self.K, self.alpha, self.nbest = eos_id, beam_size, length_penalty, nbest
        self.beams = 0  # rows per live sentence: 1 before an offline search's first step, else K
        self.tags: list[Hashable] = []  # (B,) the caller's name for each live sentence
        self.finished: list[list[Hypothesis]] = []  # (B,) finished hypotheses, the K best
        self.scores = torch.zeros(0, beam_size)  # (B, beams) running log P of the live hypotheses
        self.limits = torch.zeros(0, dtype=torch.long)  # (B,) most tokens each may produce, eos included
        self.steps = torch.zeros(0, dtype=torch.long)  # (B,) tokens chosen so far
        self.prefix = torch.zeros(0, 1, dtype=torch.long)  # (N, L) chosen tokens, right-aligned
        self.attn_hist: Tensor | None = None  # (N, t, S) cross-attention of each chosen token, when asked for
        self.same_step: int | None = None  # the step of every sentence while all started together
        self.lead = 0  # context columns of ``prefix`` before the start token (a prompt's), kept
        self.forced: Tensor | None = None  # (B, P) each sentence's forced prefix, FREE-padded

    def add(
        self, last: Tensor, limits: Tensor, tags: list[Hashable], *, rows: int, forced: Tensor | None = None
    ) -> None:
        """Start B' sentences from their newest tokens ``last`` (B', P) with length limits (B',) and
        ``tags``, with ``rows`` rows each (1 or K: see the class doc). Only a first ``add`` keeps more
        than the newest token (the context of the controls' history)."""
        B, device = len(tags), last.device
        scores = torch.full((B, rows), float("-inf"), device=device)
        scores[:, 0] = 0.0  # one live row per new sentence
        steps = torch.zeros(B, dtype=torch.long, device=device)
        if not self.tags:
            self.lead = last.size(1) - 1
            self.beams, self.scores, self.prefix = rows, scores, last.repeat_interleave(rows, dim=0)
            self.limits, self.steps, self.same_step = limits, steps, 0
            self.forced = forced
        else:
            prefix = last[:, -1:].repeat_interleave(rows, dim=0)  # (B' * rows, 1) the start token
            self.forced = _join_forced(self.forced, forced, len(self.tags), B)
            self.same_step = None
            if rows != self.beams:
                raise ValueError(f"sentences join with {self.beams} rows each, not {rows}")
            width = self.prefix.size(1)
            self.prefix = torch.cat([self.prefix, torch.nn.functional.pad(prefix, (width - 1, 0))])  # (N, L)
            self.scores = torch.cat([self.scores, scores])
            self.limits = torch.cat([self.limits, limits])
            self.steps = torch.cat([self.steps, steps])
        self.tags += tags
        self.finished += [[] for _ in tags]

    def __len__(self) -> int:
        return len(self.tags)

    def last_tokens(self) -> Tensor:
        return self.prefix[:, -1:]

    def row_steps(self) -> int | Tensor:
        if self.same_step is not None:  # one int: no per-row tensor to build (an offline search)
            return self.same_step
        return self.steps.repeat_interleave(self.beams)

    def row_limits(self) -> Tensor:
        return self.limits.repeat_interleave(self.beams)

    def row_history(self) -> Tensor:
        return self.prefix

    def row_forced(self) -> Tensor | None:
        if self.forced is None:
            return None
        width = self.forced.size(1)
        if self.same_step is not None:
            behind = self.same_step >= width
        else:
            behind = bool((self.steps >= width).all())
        if behind:  # every prefix is behind: no more work per step
            self.forced = None
            return None
        return self.forced.repeat_interleave(self.beams, dim=0)  # (N, P)

    def advance(self, logp: Tensor, attn: Tensor | None, state: DecoderState) -> list[tuple[Hashable, Any]]:
        K = self.K
        ranked = rank_extensions(self.scores, logp, K, self.eos_id)
        if attn is not None:
            if self.same_step is None:
                raise ValueError("attention histories need sentences that started together (no joins)")
            step_attn = attn[:, None]  # (N, 1, S)
            self.attn_hist = (
                step_attn if self.attn_hist is None else torch.cat([self.attn_hist, step_attn], dim=1)
            )
        width = self.prefix.size(1)
        if ranked.finished:  # each sentence's own step (one host sync, only when something finished)
            steps = [self.same_step] * len(self.tags) if self.same_step is not None else self.steps.tolist()
        for b, row, log_p in ranked.finished:
            tokens = self.prefix[row, width - steps[b] :].tolist()  # without the start token
            attention = self.attn_hist[row].clone() if self.attn_hist is not None else None
            hyp = Hypothesis(tokens, log_p / length_penalty(len(tokens) + 1, self.alpha), log_p, attention)
            keep_best(self.finished[b], hyp, K)
        self.scores, self.steps = ranked.scores, self.steps + 1
        if self.same_step is not None:
            self.same_step += 1
        prefix = torch.cat([self.prefix.index_select(0, ranked.origin), ranked.new_tok], dim=1)  # (N, L + 1)
        if self.attn_hist is not None:
            self.attn_hist = self.attn_hist.index_select(0, ranked.origin)
        if self.beams == 1:  # one row per sentence becomes K (origin repeats each row K times)
            state.expand(K)
            self.beams = K
        else:
            state.reorder(ranked.origin)  # origin stays within each sentence's K rows
        bound = score_bounds(self.scores, self.limits, self.alpha)
        done = [is_done(f, bound[b], K) for b, f in enumerate(self.finished)]
        out = [
            (tag, sorted(f, key=lambda h: h.score, reverse=True)[: self.nbest])
            for tag, f, d in zip(self.tags, self.finished, done, strict=True)
            if d
        ]
        if not out:
            self.prefix = prefix
            return out
        keep = torch.tensor(
            [b for b, d in enumerate(done) if not d], dtype=torch.long, device=self.scores.device
        )
        keep_rows = (keep[:, None] * K + torch.arange(K, device=keep.device)).view(-1)  # (B' * K,)
        self.tags = [self.tags[b] for b in keep.tolist()]
        self.finished = [self.finished[b] for b in keep.tolist()]
        self.scores, self.limits, self.steps = self.scores[keep], self.limits[keep], self.steps[keep]
        if self.forced is not None:
            self.forced = self.forced[keep]
        # the context, the start token and the oldest's tokens
        longest = self.lead + (int(self.steps.max()) + 1 if keep.numel() else 1)
        self.prefix = prefix.index_select(0, keep_rows)[:, -longest:]
        if self.attn_hist is not None:
            self.attn_hist = self.attn_hist.index_select(0, keep_rows)
        if keep.numel():
            state.select(keep)
        return out


def _join_forced(mine: Tensor | None, theirs: Tensor | None, B: int, B_new: int) -> Tensor | None:
    """The forced-prefix tables (B, P) and (B', P') of joining sentences as one (B + B', max(P, P'))."""
    if mine is None and theirs is None:
        return None
    like = mine if mine is not None else theirs
    assert like is not None
    a = mine if mine is not None else like.new_full((B, 0), FREE)
    b = theirs if theirs is not None else like.new_full((B_new, 0), FREE)
    width = max(a.size(1), b.size(1))
    pad = torch.nn.functional.pad
    return torch.cat([pad(a, (0, width - a.size(1)), value=FREE), pad(b, (0, width - b.size(1)), value=FREE)])


@torch.no_grad()
def beam_search(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    beam_size: int = BEAM,
    length_penalty: float = LENGTH_PENALTY,
    nbest: int = 1,
    max_len_a: float = MAX_LEN_A,
    max_len_b: int = MAX_LEN_B,
    min_len: int = 0,
    return_attention: bool = False,
    controls: Controls | None = None,
    prefix: list[list[int]] | None = None,
    layout: Layout | None = None,
) -> list[list[Hypothesis]]:
    """Translate src (B, S); returns for each sentence its ``nbest`` hypotheses, best first.

    ``prefix``: each sentence's first target tokens (forced); ``controls``: see :mod:`.controls`.
    ``layout``: decode over a fixed layout (:func:`~.common.start_from_source`).
    """
    state, first, limits = start_from_source(model, src, max_len_a, max_len_b, layout=layout)
    return beam_decode(
        model,
        state,
        first,
        limits,
        beam_size=beam_size,
        length_penalty=length_penalty,
        nbest=nbest,
        min_len=min_len,
        return_attention=return_attention,
        controls=controls,
        prefix=prefix,
    )


@torch.no_grad()
def beam_decode(
    model: IncrementalDecoder,
    state: DecoderState,
    last: Tensor,
    limits: Tensor,
    *,
    beam_size: int = BEAM,
    length_penalty: float = LENGTH_PENALTY,
    nbest: int = 1,
    min_len: int = 0,
    return_attention: bool = False,
    controls: Controls | None = None,
    prefix: list[list[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Continue B sequences from their newest tokens ``last`` (B, P) with K hypotheses each.

    ``limits`` (B,) caps the new tokens (eos included). The first step decodes one row per
    sentence (all K beams would be identical); its K best tokens then open K rows per sentence.
    ``controls`` and ``prefix``: as :func:`~.greedy.greedy_decode`.
    """
    controls, forced = prepare(model.config, limits, prefix, controls)
    search = BeamSearch(model.config.eos_id, beam_size=beam_size, length_penalty=length_penalty, nbest=nbest)
    search.add(
        last if controls is not None else last[:, -1:],
        limits,
        list(range(last.size(0))),
        rows=1,
        forced=forced,
    )
    return run_search(
        model, state, search, min_len=min_len, return_attention=return_attention, controls=controls
    )
