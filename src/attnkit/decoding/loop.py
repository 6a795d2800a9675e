"""The one search loop, and the strategies that choose each next token: greedy, sampling and beam.

Every search is the same loop: a cached decoder step gives log-probabilities for every live row
(:func:`~.common.step_log_probs`), a strategy chooses the next tokens from them, moves the decoder
state to follow its rows, and hands back the sequences that finished. Greedy search takes the most
probable token (:class:`Greedy`), sampling draws one (:class:`~.sampling.Sampling`), beam search keeps
the K best extensions of each sentence (:class:`~.beam.BeamSearch`). A server drives the same step,
one call at a time, while sentences join (:class:`~.continuous.BeamPool`).

Legend: N live rows, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

import torch
from torch import Tensor

from ..model.interface import DecoderState, IncrementalDecoder
from .common import Hypothesis, step_log_probs
from .controls import Controls


class Strategy(Protocol):
    """What the loop asks of a search strategy."""

    def __len__(self) -> int:
        """Sequences still decoding."""
        ...

    def last_tokens(self) -> Tensor:
        """(N, 1) the newest token of every live row: the next step's input."""
        ...

    def row_steps(self) -> int | Tensor:
        """Tokens each live row has chosen so far: one int, or (N,) where sequences differ."""
        ...

    def row_limits(self) -> Tensor:
        """(N,) the most tokens (eos included) each live row may produce."""
        ...

    def row_history(self) -> Tensor:
        """(N, L) each live row's tokens so far, newest last (asked for only when controls are on)."""
        ...

    def row_forced(self) -> Tensor | None:
        """(N, P) each live row's forced prefix, FREE-padded; None once no row has one left."""
        ...

    def advance(self, logp: Tensor, attn: Tensor | None, state: DecoderState) -> list[tuple[Hashable, Any]]:
        """Choose the next tokens from ``logp`` (N, V), move ``state`` to follow the live rows, and
        return (tag, result) of every sequence that finished."""
        ...


def decode_step(
    model: IncrementalDecoder,
    state: DecoderState,
    strategy: Strategy,
    *,
    min_len: int = 0,
    need_weights: bool = False,
    controls: Controls | None = None,
) -> list[tuple[Hashable, Any]]:
    """One step of every live sequence; returns (tag, result) of those that finished.

    ``controls`` (:mod:`.controls`), when on, reshape the step from the strategy's row histories.
    """
    logp, attn = step_log_probs(
        model,
        strategy.last_tokens(),
        state,
        step=strategy.row_steps(),
        limits=strategy.row_limits(),
        min_len=min_len,
        need_weights=need_weights,
        controls=controls,
        history=strategy.row_history() if controls is not None else None,
        forced=strategy.row_forced(),
    )
    return strategy.advance(logp, attn, state)


@torch.no_grad()
def run_search(
    model: IncrementalDecoder,
    state: DecoderState,
    strategy: Strategy,
    *,
    min_len: int = 0,
    return_attention: bool = False,
    controls: Controls | None = None,
) -> list[Any]:
    """Step until every sequence has finished; results in the order of the strategy's tags 0..B-1."""
    results: dict[Hashable, Any] = {}
    while len(strategy):
        results.update(
            decode_step(
                model, state, strategy, min_len=min_len, need_weights=return_attention, controls=controls
            )
        )
    return [results[i] for i in range(len(results))]


class TokenSearch:
    """One row per sequence, one token chosen per row and step (``pick``); a finished row leaves.

    The base of :class:`Greedy` and :class:`~.sampling.Sampling`; results are :class:`Hypothesis`
    objects scored by their total log-probability. ``last`` (B, P) (the newest token last) and
    ``limits`` (B,) start B sequences, tagged 0..B-1. ``history``: keep each row's tokens, ``last``
    first, for the controls; ``forced`` (B, P'): each sequence's prefix (:func:`~.controls.forced_table`).
    """

    def __init__(
        self,
        eos_id: int,
        last: Tensor,
        limits: Tensor,
        *,
        attention: bool = False,
        history: bool = False,
        forced: Tensor | None = None,
    ):
        B = last.size(0)
        self.eos_id, self.attention = eos_id, attention
        self.last, self.limits, self.step = last[:, -1:], limits, 0
        self.history = last if history else None  # (N, P + step) when kept
        self.forced = forced  # (B, P') indexed by original sequence, dropped once passed
        self.active = torch.arange(B, device=last.device)  # original index of each row still decoding
        self.tokens: list[list[int]] = [[] for _ in range(B)]
        self.log_probs = [0.0] * B
        self.attns: list[list[Tensor]] = [[] for _ in range(B)]

    def pick(self, logp: Tensor) -> tuple[Tensor, Tensor]:
        """The chosen token of every row (N,) and its log-probability (N,)."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.active.numel()

    def last_tokens(self) -> Tensor:
        return self.last

    def row_steps(self) -> int:
        return self.step

    def row_limits(self) -> Tensor:
        return self.limits[self.active]

    def row_history(self) -> Tensor:
        if self.history is None:
            raise ValueError("this search keeps no history: start it with history=True")
        return self.history

    def row_forced(self) -> Tensor | None:
        if self.forced is not None and self.step >= self.forced.size(1):
            self.forced = None  # every prefix is behind: no more work per step
        return None if self.forced is None else self.forced[self.active]

    def advance(self, logp: Tensor, attn: Tensor | None, state: DecoderState) -> list[tuple[Hashable, Any]]:
        tok, tok_lp = self.pick(logp)  # (N,), (N,)
        finished = []
        for row, (i, t, lp) in enumerate(
            zip(self.active.tolist(), tok.tolist(), tok_lp.tolist(), strict=True)
        ):
            self.log_probs[i] += lp
            if attn is not None and self.attention:
                self.attns[i].append(attn[row])
            if t == self.eos_id:
                attention = torch.stack(self.attns[i]) if self.attns[i] else None
                finished.append(
                    (i, Hypothesis(self.tokens[i], self.log_probs[i], self.log_probs[i], attention))
                )
            else:
                self.tokens[i].append(t)
        self.step += 1
        if self.history is not None:
            self.history = torch.cat([self.history, tok[:, None]], dim=1)  # (N, L + 1)
        done = tok == self.eos_id
        if done.any():
            keep = (~done).nonzero().squeeze(1)  # rows still decoding
            self.active, tok = self.active[keep], tok[keep]
            if self.history is not None:
                self.history = self.history[keep]
            state.select(keep)
        self.last = tok[:, None]
        return finished


class Greedy(TokenSearch):
    """Greedy decoding: at every step the most probable next token (seed 001, section 3)."""

    def pick(self, logp: Tensor) -> tuple[Tensor, Tensor]:
        best_lp, best = logp.max(dim=-1)  # (N,)
        return best, best_lp
