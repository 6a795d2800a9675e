"""Sampling: draw each next token from the model's distribution, reshaped by temperature, top-k, top-p.

- temperature T: p ∝ exp(logit / T); T < 1 sharpens, T > 1 flattens.
- top-k: only the k most probable tokens may be drawn (k = 1 is greedy).
- top-p (nucleus, Holtzman et al., 2020): only the smallest set of most probable tokens whose
  probability reaches p (the most probable token is always kept, so p near 0 is greedy).

Draws come from a caller-owned ``torch.Generator``: the same seed gives the same samples.

Legend: N rows (hypotheses), V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..denormals import ieee_arithmetic
from ..errors import ConfigError
from ..model.interface import DecoderState, IncrementalDecoder, Seq2SeqModel
from .common import Hypothesis, Layout, start_from_source
from .controls import Controls, prepare
from .defaults import MAX_LEN_A, MAX_LEN_B, SEED_RANGE, TEMPERATURE, TOP_K, TOP_P
from .loop import TokenSearch, run_search


@dataclass(frozen=True)
class SamplingConfig:
    """How to reshape the next-token distribution before drawing from it."""

    temperature: float = TEMPERATURE
    top_k: int = TOP_K  # 0 = no top-k limit
    top_p: float = TOP_P  # 1.0 = no nucleus limit

    def __post_init__(self) -> None:
        with ieee_arithmetic():  # checked alike inside a loop that flushes denormals
            self._check()

    def _check(self) -> None:
        if not 0 < self.temperature < float("inf"):
            raise ConfigError(f"temperature must be a finite number > 0, got {self.temperature}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ConfigError(f"top_k must be a non-negative integer (0 = off), got {self.top_k!r}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")


def filter_logits(logits: Tensor, cfg: SamplingConfig) -> Tensor:
    """Scaled logits (N, V) with every token outside top-k / top-p set to -inf.

    Any temperature > 0 and top-p in (0, 1] leave at least the most probable token: a temperature or a
    nucleus too small for float32 is greedy (the top token, ties shared), never a row of nan.
    """
    logits = _scaled(logits.float(), cfg.temperature)  # (N, V)
    if cfg.top_k and cfg.top_k < logits.size(-1):
        kth = logits.topk(cfg.top_k, dim=-1).values[:, -1:]  # (N, 1) the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if cfg.top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (N, V)
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # (N, V) mass of the more probable tokens
        drop_sorted = before >= cfg.top_p
        drop_sorted[:, 0] = False  # the most probable token is always kept (a top_p below float32's 0 too)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def _scaled(logits: Tensor, temperature: float) -> Tensor:
    """logits / temperature, shifted so each row's largest is 0 (softmax and the filters do not change).

    The shift first makes a tiny temperature safe: the top token(s) stay 0 and the rest go to -inf,
    where dividing the raw logits would give inf - inf or 0 / 0 (nan) once it underflows in float32.
    """
    top = logits.amax(dim=-1, keepdim=True)  # (N, 1)
    shifted = logits - torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # (N, V), all <= 0
    if temperature == 1.0:
        return shifted
    keep = (shifted == 0) | ~torch.isfinite(shifted)  # the top token(s), and banned ones (-inf)
    return torch.where(keep, shifted, shifted / temperature)


def seeded_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator on ``device`` seeded with ``seed``; a seed torch cannot take is a ConfigError."""
    low, high = SEED_RANGE
    if isinstance(seed, bool) or not isinstance(seed, int) or not low <= seed <= high:
        raise ConfigError(f"seed must be an integer from -2**53 to 2**53, got {seed!r}")
    return torch.Generator(device=device).manual_seed(seed)


def sample_tokens(
    logp: Tensor, cfg: SamplingConfig, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """Draw one token per row from log-probabilities (N, V); banned tokens hold -inf.

    Returns the tokens (N,) and their entries of ``logp``: the model's own (temperature 1,
    unfiltered) log-probabilities, so a sample's score compares with greedy and beam scores.
    """
    probs = filter_logits(logp, cfg).softmax(dim=-1)  # (N, V)
    tok = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (N,)
    return tok, logp.gather(1, tok[:, None]).squeeze(1)


@torch.no_grad()
def sample_search(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    temperature: float = TEMPERATURE,
    top_k: int = TOP_K,
    top_p: float = TOP_P,
    num_samples: int = 1,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    max_len_a: float = MAX_LEN_A,
    max_len_b: int = MAX_LEN_B,
    min_len: int = 0,
    controls: Controls | None = None,
    prefix: list[list[int]] | None = None,
    layout: Layout | None = None,
) -> list[list[Hypothesis]]:
    """Draw ``num_samples`` outputs for each sentence of src (B, S), each starting with its ``prefix``.

    Pass a ``generator`` (or a ``seed`` to make one): the same seed and inputs give the same samples.
    Returns per sentence its samples in the order drawn; a Hypothesis's score is its log-probability.
    Samples are independent, so each is its own row from the start (the source is repeated), and a
    finished sample leaves the batch on its own.
    ``layout``: decode over a fixed layout (:func:`~.common.start_from_source`).
    """
    if num_samples < 1:
        raise ConfigError(f"num_samples must be >= 1, got {num_samples}")
    B = src.size(0)
    state, first, limits = start_from_source(
        model, src.repeat_interleave(num_samples, dim=0), max_len_a, max_len_b, layout=layout
    )
    hyps = sample_decode(
        model,
        state,
        first,
        limits,
        sampling=SamplingConfig(temperature, top_k, top_p),
        generator=generator,
        seed=seed,
        min_len=min_len,
        controls=controls,
        prefix=None if prefix is None else [p for p in prefix for _ in range(num_samples)],
    )
    return [hyps[b * num_samples : (b + 1) * num_samples] for b in range(B)]


class Sampling(TokenSearch):
    """Draw each next token from the reshaped distribution (:func:`sample_tokens`)."""

    def __init__(
        self,
        eos_id: int,
        last: Tensor,
        limits: Tensor,
        *,
        sampling: SamplingConfig,
        generator,
        history: bool = False,
        forced: Tensor | None = None,
    ):
        super().__init__(eos_id, last, limits, history=history, forced=forced)
        self.sampling, self.generator = sampling, generator

    def pick(self, logp: Tensor) -> tuple[Tensor, Tensor]:
        return sample_tokens(logp, self.sampling, self.generator)


@torch.no_grad()
def sample_decode(
    model: IncrementalDecoder,
    state: DecoderState,
    last: Tensor,
    limits: Tensor,
    *,
    sampling: SamplingConfig,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    min_len: int = 0,
    controls: Controls | None = None,
    prefix: list[list[int]] | None = None,
) -> list[Hypothesis]:
    """Continue N sequences from their newest tokens ``last`` (N, P), drawing each next token.

    ``limits`` (N,) caps the new tokens (eos included); the state has one row per sequence
    (group 1), and finished sequences leave it through ``select``. ``controls`` and ``prefix``: as
    :func:`~.greedy.greedy_decode`.
    """
    if state.group != 1:
        raise ValueError(f"sampling needs one row per sequence, the state has {state.group}")
    if generator is None:
        generator = seeded_generator(0 if seed is None else seed, last.device)
    controls, forced = prepare(model.config, limits, prefix, controls)
    strategy = Sampling(
        model.config.eos_id,
        last,
        limits,
        sampling=sampling,
        generator=generator,
        history=controls is not None,
        forced=forced,
    )
    return run_search(model, state, strategy, min_len=min_len, controls=controls)
