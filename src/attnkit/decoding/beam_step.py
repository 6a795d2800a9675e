"""Beam search with its ranking and its moves inside the fixed-layout step.

:class:`~.beam.BeamSearch` ranks, reorders and keeps its history in eager Python around the step:
~30 small operations a step that cost as much as the decoder itself for one sentence on a CPU.
:class:`BeamStep` puts them into the step, so that ``torch.compile`` takes decoder, ranking and
beam moves as one graph:

- every sentence owns K buffer rows from the first step on; before any token only its first row
  is alive (running log P 0, the others -inf), so the first ranking reads one row as the eager
  search's does, and no ``expand`` is needed;
- the K*V extensions of a sentence are ranked with one top-k of 2K; eos candidates among the top K
  are reported, the K best others live on (eos ones at -inf when fewer survive), as
  :func:`~.beam.rank_extensions` does;
- beam moves are index operations on the buffers: each row takes its origin's keys and values at
  the start of the next step, and its history of chosen tokens at once.

The host keeps what is not a tensor: each sentence's finished hypotheses and the stopping rule
(:func:`~.beam.is_done`), from one small copy per step. Sentences that are done keep decoding in
their rows, unread, until the batch is done.

Legend: B sentences, K beam, R buffer rows (B * K plus spare rows), V vocabulary, Tb cache positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn

from .beam import is_done, keep_best, length_penalty, score_bound
from .common import Hypothesis
from .fixed_layout import StaticCaches, StaticStep


class Moves(NamedTuple):
    """One step's outcome. tokens (R,) and origin (R,): each row's new token and the row it
    extends; scores (B, K) running log P of the survivors; top (B, 2K) the ranked extensions'
    log P, beam (B, 2K) the beam each extends and eos (B, 2K) which end in eos; history (R, Tb)
    each row's chosen tokens, the new one included."""

    tokens: Tensor
    origin: Tensor
    scores: Tensor
    top: Tensor
    beam: Tensor
    eos: Tensor
    history: Tensor


class BeamStep(nn.Module):
    """(tokens (R,), origin (R,), pos (1,) or (R,), caches, scores (B, K), history (R, Tb)) -> :class:`Moves`.

    Rows first take the keys and values of ``origin`` (the previous step's moves, which ``history``
    already follows; ``arange`` before the first), then the step decodes ``tokens`` at ``pos`` and
    the 2K best extensions per sentence are ranked. B sentence places (R // K, whatever the batch:
    places without a sentence are -inf) of K rows each; rows beyond B * K decode, unread.
    """

    def __init__(self, step: StaticStep):
        super().__init__()
        self.step = step
        self.eos_id = step.model.config.eos_id

    def forward(
        self,
        tokens: Tensor,
        origin: Tensor,
        pos: Tensor,
        caches: StaticCaches,
        scores: Tensor,
        history: Tensor,
    ) -> Moves:
        # Beam moves first: a move after the cache write of the same graph met an aliasing error in
        # Inductor (torch 2.13: a gather of a buffer into itself, fused with the write, read new rows).
        for buf in (*caches.self_k, *caches.self_v):
            buf.copy_(buf.index_select(0, origin))  # (R, H, Tb, Dh)
        logp = self.step(tokens, pos, caches)  # (R, V)
        B, K = scores.shape
        V = logp.size(1)
        cand = (scores.reshape(-1, 1) + logp[: B * K]).view(B, K * V)  # (B, K * V)
        top, idx = cand.topk(2 * K, dim=1)  # (B, 2K) best first
        beam, tok = idx // V, idx % V
        eos = (tok == self.eos_id) & torch.isfinite(top)  # (B, 2K)
        # The K best non-eos candidates live on (eos ones pushed behind all others).
        rank = torch.arange(2 * K, device=top.device) + eos.long() * (2 * K)  # (B, 2K)
        keep = rank.topk(K, dim=1, largest=False).indices  # (B, K)
        new_scores = top.gather(1, keep).masked_fill(eos.gather(1, keep), float("-inf"))  # (B, K)
        rows = beam.gather(1, keep) + torch.arange(B, device=top.device)[:, None] * K  # (B, K)
        R = tokens.size(0)
        spare = torch.arange(B * K, R, device=top.device)  # rows beyond the sentences' keep their place
        new_origin = torch.cat([rows.view(-1), spare])  # (R,)
        new_tokens = torch.cat([tok.gather(1, keep).view(-1), tokens[B * K :]])  # (R,)
        t = pos - caches.offset  # (1 or R,) new tokens chosen before this one
        history = history.index_select(0, new_origin)  # (R, Tb)
        if t.size(0) == 1:
            history = history.index_copy(1, t, new_tokens[:, None])
        else:  # each row at its own step
            history = history.scatter(1, t[:, None], new_tokens[:, None])
        return Moves(new_tokens, new_origin, new_scores, top, beam, eos, history)


def record_ended(
    moves: Moves,
    history: Tensor,
    K: int,
    alpha: float,
    sentences: Sequence[tuple[list[Hypothesis], int] | None],
) -> None:
    """Keep each sentence's eos candidates among its top K in its finished hypotheses (the K best).

    ``history`` (R, Tb): the rows' tokens before this step; ``sentences[b]``: sentence place b's
    finished list and its tokens chosen before this step, or None for a place not followed."""
    ended = moves.eos[:, :K].nonzero().tolist()  # (b, j) of the eos candidates among the top K
    if not ended:
        return
    top, beam = moves.top.tolist(), moves.beam.tolist()
    for b, j in ended:
        followed = sentences[b] if b < len(sentences) else None
        if followed is not None:
            finished, t = followed
            log_p = top[b][j]
            tokens = history[b * K + beam[b][j], :t].tolist()
            keep_best(finished, Hypothesis(tokens, log_p / length_penalty(t + 1, alpha), log_p, None), K)


def run_beam_step(
    run: Callable[..., Moves],
    caches: StaticCaches,
    first: Tensor,
    limits: Tensor,
    *,
    beam_size: int,
    length_penalty_alpha: float,
    nbest: int,
    pos: int = 0,
) -> list[list[Hypothesis]]:
    """Beam search of B sentences from their newest tokens ``first`` (B,) at position ``pos``, with
    length limits (B,), through ``run`` (a :class:`BeamStep`, compiled or not) over ``caches`` (rows
    sentence-major, ``beam_size`` each): each sentence's ``nbest`` hypotheses, best first.

    The step ranks R // K sentence places whatever B, so every batch of a row bucket has the same
    shapes (one graph): places beyond B hold no live hypothesis (-inf) and never finish."""
    K, alpha = beam_size, length_penalty_alpha
    B = first.size(0)
    R, Tb = caches.limits.size(0), caches.self_k[0].size(2)
    places = R // K
    device = first.device
    scores = torch.full((places, K), float("-inf"), device=device)
    scores[:B, 0] = 0.0  # one live row per sentence before the first step
    tokens = torch.cat([first.repeat_interleave(K), first.new_zeros(R - B * K)])  # (R,)
    origin = torch.arange(R, device=device)
    history = torch.zeros(R, Tb, dtype=torch.long, device=device)
    limit_list = limits.tolist()
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    done = [False] * B
    for t in range(Tb - pos):
        moves = run(tokens, origin, torch.tensor([pos + t], device=device), caches, scores, history)
        record_ended(moves, history, K, alpha, [None if done[b] else (finished[b], t) for b in range(B)])
        tokens, origin, scores, history = moves.tokens, moves.origin, moves.scores, moves.history
        best = scores[:B].max(dim=1).values.tolist()  # (B,) a live hypothesis's log P only falls
        for b in range(B):
            if not done[b]:
                done[b] = is_done(finished[b], score_bound(best[b], limit_list[b], alpha), K)
        if all(done):
            break
    return [sorted(f, key=lambda h: h.score, reverse=True)[:nbest] for f in finished]
