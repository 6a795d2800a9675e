"""Decoding controls: what reshapes each step's distribution from the tokens chosen so far.

- repetition penalty (Keskar et al., 2019, CTRL, section 4.1, as Hugging Face's
  ``repetition_penalty``): the logit x of every token already in the row's history becomes x / θ
  when positive and x * θ when negative, so θ > 1 makes a repeat less likely; θ = 1 is off.
- no repeated n-gram (fairseq's and Hugging Face's ``no_repeat_ngram_size``): a token that would
  complete an n-gram already in the history is banned.
- a forced prefix (fairseq's ``prefix_tokens``): while a row has forced tokens left, its only
  possible next token is the forced one, scored with its own log-probability.

A row's history is what the search has of it: bos (a translation) or the prompt (a language model),
then the chosen tokens. Off (the defaults), none of this runs: :func:`~.common.step_log_probs` does
no extra work.

Legend: N rows, L history length, P longest prefix, V vocabulary.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import ConfigError
from ..model.interface import SpecialIds

FREE = -1  # a position of the forced-token table (N, P) with no token forced


@dataclass(frozen=True)
class Controls:
    """The history-dependent reshaping of each step: a repetition penalty and an n-gram ban."""

    no_repeat_ngram_size: int = 0  # 0 = off
    repetition_penalty: float = 1.0  # 1.0 = off

    def __post_init__(self) -> None:
        check_count("no_repeat_ngram_size", self.no_repeat_ngram_size)
        p = self.repetition_penalty
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < math.inf:
            raise ConfigError(f"repetition_penalty must be a finite number > 0 (1 = off), got {p!r}")

    @property
    def active(self) -> bool:
        return self.no_repeat_ngram_size > 0 or self.repetition_penalty != 1.0

    def reshape_logits(self, logits: Tensor, history: Tensor, *, pad_id: int) -> Tensor:
        """logits (N, V) with the repetition penalty applied to every token in ``history`` (N, L).

        pad in a history is the left padding of a row that joined a running search, not a token: its
        logit stays (the softmax's sum, and so every log-probability, is then the row's own)."""
        if self.repetition_penalty == 1.0:
            return logits
        seen = logits.gather(1, history)  # (N, L)
        penalized = torch.where(seen < 0, seen * self.repetition_penalty, seen / self.repetition_penalty)
        return logits.scatter(1, history, torch.where(history == pad_id, seen, penalized))

    def ban(self, logp: Tensor, history: Tensor, *, pad_id: int, eos_id: int, eos: Tensor) -> None:
        """Set to -inf, in place, each token of ``logp`` (N, V) that would repeat an n-gram of ``history``.

        A row left with no token at all may end: eos gets back its log-probability ``eos`` (N,).
        """
        n = self.no_repeat_ngram_size
        if n == 0 or history.size(1) < n:
            return
        windows = history.unfold(1, n, 1)  # (N, W, n) every n-gram of the history, W = L - n + 1
        if n > 1:
            context = history[:, -(n - 1) :]  # (N, n - 1) the newest n - 1 tokens
            match = (windows[:, :, :-1] == context[:, None, :]).all(dim=-1)  # (N, W)
            banned = windows[:, :, -1].masked_fill(~match, pad_id)  # (N, W); pad is banned anyway
        else:
            banned = windows[:, :, 0]  # a 1-gram ban: every token seen
        logp.scatter_(1, banned, float("-inf"))
        stuck = logp.amax(dim=-1) == float("-inf")  # (N,)
        if stuck.any():
            logp[stuck, eos_id] = eos[stuck]


def check_count(name: str, value: object) -> int:
    """``value`` if it is an integer >= 0, else a ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def forced_table(prefixes: list[list[int]], limits: Tensor, *, banned: tuple[int, ...]) -> Tensor | None:
    """Each sequence's forced tokens, right-padded with FREE: (N, P), or None when no prefix has any.

    ``limits`` (N,): the most tokens each may produce, eos included, so a prefix may hold at most
    limit - 1 tokens. ``banned``: ids no prefix may hold (pad, bos, eos).
    """
    if len(prefixes) != limits.numel():
        raise ConfigError(f"{len(prefixes)} prefixes for {limits.numel()} sequences")
    width = max((len(p) for p in prefixes), default=0)
    if width == 0:
        return None
    for i, (prefix, limit) in enumerate(zip(prefixes, limits.tolist(), strict=True)):
        if len(prefix) >= limit:
            raise ConfigError(
                f"prefix {i} has {len(prefix)} tokens: its length limit allows at most {limit - 1}"
            )
        bad = [t for t in prefix if t in banned or t < 0]
        if bad:
            raise ConfigError(f"prefix {i} holds token id {bad[0]}, which cannot be generated")
    table = torch.full((len(prefixes), width), FREE, dtype=torch.long)
    for i, prefix in enumerate(prefixes):
        table[i, : len(prefix)] = torch.tensor(prefix, dtype=torch.long)
    return table.to(limits.device)


def prepare(
    cfg: SpecialIds, limits: Tensor, prefix: list[list[int]] | None, controls: Controls | None
) -> tuple[Controls | None, Tensor | None]:
    """What a search passes on: the controls if any is on (else None), and the forced-token table."""
    forced = None
    if prefix is not None:
        forced = forced_table(prefix, limits, banned=(cfg.pad_id, cfg.bos_id, cfg.eos_id))
    return (controls if controls is not None and controls.active else None), forced


def forced_now(forced: Tensor, step: int | Tensor) -> Tensor:
    """The token each row must take now (N,), FREE where none: ``forced`` (N, P), ``step`` one int or (N,)."""
    width = forced.size(1)
    if isinstance(step, int):
        return forced[:, step] if step < width else forced.new_full((forced.size(0),), FREE)
    tok = forced.gather(1, step.clamp(max=width - 1)[:, None]).squeeze(1)  # (N,)
    return tok.masked_fill(step >= width, FREE)


def force(logp: Tensor, tok: Tensor, kept: Tensor) -> None:
    """Rows with a forced token ``tok`` (N,) (FREE: none) may only take it, at its log-probability
    ``kept`` (N,)."""
    rows = (tok != FREE).nonzero().squeeze(1)  # (R,)
    if rows.numel():
        logp[rows] = float("-inf")
        logp[rows, tok[rows]] = kept[rows]
