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

from ..errors import ConfigError
from .common import Hypothesis, decode_cap, length_limits


@dataclass(frozen=True)
class SamplingConfig:
    """How to reshape the next-token distribution before drawing from it."""

    temperature: float = 1.0
    top_k: int = 0  # 0 = no top-k limit
    top_p: float = 1.0  # 1.0 = no nucleus limit

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ConfigError(f"top_k must be a non-negative integer (0 = off), got {self.top_k!r}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")


def filter_logits(logits: Tensor, cfg: SamplingConfig) -> Tensor:
    """Scaled logits (N, V) with every token outside top-k / top-p set to -inf."""
    logits = logits.float() / cfg.temperature  # (N, V)
    if cfg.top_k and cfg.top_k < logits.size(-1):
        kth = logits.topk(cfg.top_k, dim=-1).values[:, -1:]  # (N, 1) the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if cfg.top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (N, V)
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # (N, V) mass of the more probable tokens
        drop_sorted = before >= cfg.top_p  # the first token has 0 before it: always kept
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


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


def step_log_probs(logits: Tensor, model_cfg, *, at_limit: Tensor, ban_eos: bool) -> Tensor:
    """log p of the next token (N, V) with the bans every search applies.

    pad and bos are never generated; eos is banned before the minimum length; rows at their
    length limit may only produce eos (the limit wins over the minimum length).
    """
    logp = torch.log_softmax(logits.float(), dim=-1)  # (N, V)
    eos = logp[:, model_cfg.eos_id].clone()
    logp[:, model_cfg.pad_id] = float("-inf")
    logp[:, model_cfg.bos_id] = float("-inf")
    if ban_eos:
        logp[:, model_cfg.eos_id] = float("-inf")
    if at_limit.any():
        logp[at_limit] = float("-inf")
        logp[at_limit, model_cfg.eos_id] = eos[at_limit]
    return logp


@torch.no_grad()
def sample_search(
    model,
    src: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    num_samples: int = 1,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    min_len: int = 0,
) -> list[list[Hypothesis]]:
    """Draw ``num_samples`` outputs for each sentence of src (B, S), one cached step at a time.

    Pass a ``generator`` (or a ``seed`` to make one): the same seed and inputs give the same samples.
    Returns per sentence its samples in the order drawn; a Hypothesis's score is its log-probability.
    """
    sampling = SamplingConfig(temperature, top_k, top_p)
    if num_samples < 1:
        raise ConfigError(f"num_samples must be >= 1, got {num_samples}")
    if generator is None:
        generator = torch.Generator(device=src.device)
        generator.manual_seed(0 if seed is None else seed)
    cfg = model.config
    B = src.size(0)
    rows = torch.arange(B, device=src.device).repeat_interleave(num_samples)  # (N,) sentence of each row
    limits = length_limits(src, cfg.pad_id, max_len_a, max_len_b, decode_cap(model))[rows]  # (N,)
    enc = model.encode(src).index_select(rows) if num_samples > 1 else model.encode(src)
    cache = model.init_cache(enc)
    N = rows.numel()
    active = torch.arange(N, device=src.device)  # original row of each row still decoding
    last = torch.full((N, 1), cfg.bos_id, dtype=torch.long, device=src.device)
    tokens: list[list[int]] = [[] for _ in range(N)]
    log_probs = [0.0] * N
    step = 0
    while active.numel() > 0:
        logits = model.decode(last, enc, cache=cache).logits[:, -1]  # (n, V)
        logp = step_log_probs(logits, cfg, at_limit=step + 1 >= limits[active], ban_eos=step < min_len)
        tok, tok_lp = sample_tokens(logp, sampling, generator)  # (n,), (n,)
        done = tok == cfg.eos_id
        for i, t, lp in zip(active.tolist(), tok.tolist(), tok_lp.tolist()):
            log_probs[i] += lp
            if t != cfg.eos_id:
                tokens[i].append(t)
        step += 1
        if done.any():
            keep = (~done).nonzero().squeeze(1)
            active, tok = active[keep], tok[keep]
            enc = enc.index_select(keep)
            cache.index_select(keep)
        last = tok[:, None]
    hyps = [Hypothesis(t, lp, lp) for t, lp in zip(tokens, log_probs)]
    return [hyps[b * num_samples : (b + 1) * num_samples] for b in range(B)]
