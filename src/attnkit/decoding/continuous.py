"""Continuous batching: one beam search that sentences join and leave at every step.

A server's requests arrive one by one. Decoding each arriving group as its own batch leaves the
batch small (a handful of sentences) and makes every sentence wait for the longest of its group.
:class:`BeamPool` keeps one batch decoding instead: ``add`` encodes new sentences and joins them to
the running decoder state (:class:`~attnkit.model.interface.JoinableState`), ``step`` advances
every sentence by one token and returns those that finished. Each sentence goes through exactly
the search of :func:`~attnkit.decoding.beam.beam_search` (same ranking, same stopping rule, same
length limit), only alongside different company, so its result is the same (up to float rounding
from the padding).

A sentence joins with K rows of which only the first is alive (the others score -inf), so its
first step picks K tokens from one row, as ``beam_decode``'s one-row first step does, while it
shares the model call with sentences further along.

Legend: B sentences decoding, K beam size, N = B * K rows, S source length, L prefix width.
"""

from __future__ import annotations

from collections.abc import Hashable

import torch
from torch import Tensor

from ..model.interface import JoinableState, Seq2SeqModel
from .beam import is_done, keep_best, length_penalty, rank_extensions, score_bounds
from .common import Hypothesis, check_nbest, start_from_source, step_log_probs


class BeamPool:
    """Beam search over a changing set of sentences.

    Args:
        model: a seq2seq model whose decoder state can ``join`` (the Transformer with absolute positions).
        beam_size, length_penalty_alpha, nbest, max_len_a, max_len_b: as :func:`beam_search`.
    """

    def __init__(
        self,
        model: Seq2SeqModel,
        *,
        beam_size: int = 4,
        length_penalty_alpha: float = 0.6,
        nbest: int = 1,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
    ):
        check_nbest(beam_size, nbest)
        self.model, self.K, self.alpha, self.nbest = model, beam_size, length_penalty_alpha, nbest
        self.max_len_a, self.max_len_b = max_len_a, max_len_b
        self.state: JoinableState | None = None
        self.tags: list[Hashable] = []  # (B,) the caller's name for each sentence
        self.finished: list[list[Hypothesis]] = []  # (B,) finished hypotheses, the K best
        self.scores = torch.zeros(0, beam_size)  # (B, K) running log P of the live hypotheses
        self.limits = torch.zeros(0, dtype=torch.long)  # (B,) most tokens each may produce, eos included
        self.steps = torch.zeros(0, dtype=torch.long)  # (B,) tokens chosen so far
        self.prefix = torch.zeros(0, 1, dtype=torch.long)  # (N, L) chosen tokens, right-aligned

    def __len__(self) -> int:
        return len(self.tags)

    @torch.no_grad()
    def add(self, src: Tensor, tags: list[Hashable]) -> None:
        """Start decoding src (B', S) (no empty rows); ``tags`` name its sentences in ``step``'s results."""
        if src.size(0) != len(tags):
            raise ValueError(f"{src.size(0)} sentences but {len(tags)} tags")
        K, device = self.K, src.device
        if 2 * K > self.model.config.tgt_vocab_size:
            raise ValueError(f"beam {K} is over half the vocabulary: use beam_search")
        state, first, limits = start_from_source(self.model, src, self.max_len_a, self.max_len_b)
        if not isinstance(state, JoinableState):
            raise ValueError(f"{type(state).__name__} cannot join a running batch: use beam_search")
        state.expand(K)
        scores = torch.full((src.size(0), K), float("-inf"), device=device)
        scores[:, 0] = 0.0  # one live row per new sentence
        prefix = first.repeat_interleave(K, dim=0)  # (B' * K, 1) bos
        if self.state is None:
            self.state, self.prefix = state, prefix
            self.scores, self.limits = scores, limits
            self.steps = torch.zeros(src.size(0), dtype=torch.long, device=device)
        else:
            self.state.join(state)
            width = self.prefix.size(1)
            self.prefix = torch.cat([self.prefix, torch.nn.functional.pad(prefix, (width - 1, 0))])  # (N, L)
            self.scores = torch.cat([self.scores, scores])
            self.limits = torch.cat([self.limits, limits])
            self.steps = torch.cat([self.steps, torch.zeros_like(limits)])
        self.tags += tags
        self.finished += [[] for _ in tags]

    @torch.no_grad()
    def step(self) -> list[tuple[Hashable, list[Hypothesis]]]:
        """One token for every sentence; returns (tag, its ``nbest`` hypotheses best first) of those done."""
        if self.state is None or not self.tags:
            return []
        K = self.K
        # step 0 with limits shifted by each sentence's own step: at_limit = steps + 1 >= limits
        logp, _ = step_log_probs(
            self.model,
            self.prefix[:, -1:],
            self.state,
            step=0,
            limits=(self.limits - self.steps).repeat_interleave(K),
        )
        ranked = rank_extensions(self.scores, logp, K, self.model.config.eos_id)
        width = self.prefix.size(1)
        steps = self.steps.tolist()
        for b, row, log_p in ranked.finished:
            tokens = self.prefix[row, width - steps[b] :].tolist()  # without bos
            hyp = Hypothesis(tokens, log_p / length_penalty(len(tokens) + 1, self.alpha), log_p)
            keep_best(self.finished[b], hyp, K)
        self.scores = ranked.scores
        self.steps = self.steps + 1
        bound = score_bounds(self.scores, self.limits, self.alpha)
        done = [is_done(f, bound[b], K) for b, f in enumerate(self.finished)]
        out = [
            (tag, sorted(f, key=lambda h: h.score, reverse=True)[: self.nbest])
            for tag, f, d in zip(self.tags, self.finished, done)
            if d
        ]
        prefix = torch.cat([self.prefix.index_select(0, ranked.origin), ranked.new_tok], dim=1)  # (N, L + 1)
        if not out:
            self.prefix = prefix
            self.state.reorder(ranked.origin)  # origin stays within each sentence's K rows
            return out
        keep = torch.tensor(
            [b for b, d in enumerate(done) if not d], dtype=torch.long, device=self.scores.device
        )
        keep_rows = (keep[:, None] * K + torch.arange(K, device=keep.device)).view(-1)  # (B' * K,)
        self.tags = [self.tags[b] for b in keep.tolist()]
        self.finished = [self.finished[b] for b in keep.tolist()]
        self.scores, self.limits, self.steps = self.scores[keep], self.limits[keep], self.steps[keep]
        longest = int(self.steps.max()) + 1 if keep.numel() else 1  # bos and the tokens of the oldest
        self.prefix = prefix.index_select(0, keep_rows)[:, -longest:]
        if keep.numel():
            self.state.select(keep, rows=ranked.origin[keep_rows])  # reorder and select in one copy
        else:
            self.state = None  # an empty pool starts afresh
        return out
