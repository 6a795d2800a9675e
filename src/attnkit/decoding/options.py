"""How to search, as one object: checked once where it is made, then passed down whole.

The command line (``attnkit.plugin.flags.add_search_flags``), the HTTP schema
(``attnkit.plugin.http``) and the Python API (``Translator.translate(text, options)``) each build
a :class:`SearchOptions`; a test keeps the three in step, field by field, with the same names and
defaults. :func:`search` then picks the strategy (greedy, beam or sampling) in one place, for every
caller. A forced prefix is not an option: it belongs to its sentence, and is passed beside them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..bounds import Bound
from ..errors import ConfigError
from ..model.interface import DecoderState, IncrementalDecoder, Seq2SeqModel
from .beam import beam_decode
from .common import Hypothesis, Layout, check_nbest, start_from_source
from .controls import Controls
from .defaults import BEAM, LENGTH_PENALTY, MAX_LEN_A, MAX_LEN_B, NBEST, TEMPERATURE, TOP_K, TOP_P
from .greedy import greedy_decode
from .sampling import SEED_RANGE, SamplingConfig, sample_decode, sample_search

MAX_BEAM = 256  # a beam's rows and candidates are allocated at once


# The one declaration of every numeric option's range: SearchOptions checks it, the HTTP schema
# states it (attnkit.plugin.http), and the command line's errors quote it.
BOUNDS = {
    "beam": Bound(int, 1, MAX_BEAM),
    "nbest": Bound(int, 1, 1000),
    "length_penalty": Bound(float, 0.0, 10.0),
    "max_len_a": Bound(float, 0.0, 1000.0),
    "max_len_b": Bound(int, 0, 100_000),
    "min_length": Bound(int, 0, 100_000),
    "no_repeat_ngram_size": Bound(int, 0, 1000),
    "repetition_penalty": Bound(float, 0.01, 100.0),
    "temperature": Bound(float, 0.0, 100.0, open_low=True),
    "top_k": Bound(int, 0, 1_000_000),
    "top_p": Bound(float, 0.0, 1.0, open_low=True),
    "seed": Bound(int, SEED_RANGE[0], SEED_RANGE[1]),
}


# What each option means, said once: the command line's help and the HTTP schema's descriptions.
HELP = {
    "beam": "beam size; 1 = greedy",
    "nbest": "results per input: a search's best first (at most --beam), or N samples with --sample",
    "length_penalty": "GNMT length penalty alpha (0 = off)",
    "max_len_a": "output tokens at most A * input tokens + B, eos included, within the model's "
    "positions (input tokens: a source's or a prompt's pieces; an image has none)",
    "max_len_b": "B of --max-len-a",
    "min_length": "tokens before eos may end an output",
    "no_repeat_ngram_size": "never repeat an n-gram of N tokens (0 = off)",
    "repetition_penalty": "CTRL penalty on tokens already produced, > 1 discourages them (1 = off)",
    "sample": "sample instead of searching (--temperature, --top-k, --top-p, --seed shape the draws)",
    "temperature": "sampling temperature",
    "top_k": "sample among the K most probable tokens (0 = all)",
    "top_p": "sample from the nucleus of mass P (1 = all)",
    "seed": "seed of the sampler: the same seed gives the same samples",
}


@dataclass(frozen=True)
class SearchOptions:
    """Every option of a search, with the bounds :meth:`check` holds it to.

    beam: hypotheses kept per sentence (1 = greedy search); nbest: results per sentence (at most
    the beam, or samples drawn); length_penalty: GNMT alpha (0 = off); max_len_a, max_len_b: at
    most a * source tokens + b output tokens, eos included (a source-less model: b);
    min_length: tokens before eos may end a sequence; no_repeat_ngram_size, repetition_penalty:
    :class:`~.controls.Controls` (0 and 1 = off); sample: draw instead of searching, reshaped by
    temperature, top_k (0 = off) and top_p (1 = off), from a generator seeded with ``seed``.
    """

    beam: int = BEAM
    nbest: int = NBEST
    length_penalty: float = LENGTH_PENALTY
    max_len_a: float = MAX_LEN_A
    max_len_b: int = MAX_LEN_B
    min_length: int = 0
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    sample: bool = False
    temperature: float = TEMPERATURE
    top_k: int = TOP_K
    top_p: float = TOP_P
    seed: int = 0

    def __post_init__(self) -> None:
        self.check()

    @classmethod
    def of(cls, options: SearchOptions | None = None, **fields: Any) -> SearchOptions:
        """``options`` (or the defaults) with ``fields`` changed; an unknown field is a ConfigError."""
        known = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(fields) - known):
            choices = ", ".join(sorted(known))
            raise ConfigError(f"unknown search option(s) {', '.join(unknown)}: choose from {choices}")
        return dataclasses.replace(options or cls(), **fields)

    def check(self) -> None:
        """Each field within its declared bounds (:data:`BOUNDS`), else one ConfigError naming it
        (the command line exits 2 with it, the server answers 422)."""
        for name, bound in BOUNDS.items():
            value = getattr(self, name)
            if not bound.holds(value):
                raise ConfigError(f"{name} must be {bound.describe()}, got {value!r}")
        if self.max_len_a == 0 and self.max_len_b == 0:
            raise ConfigError("max_len_a, max_len_b are both 0: no token could be produced")
        if self.max_len_a == 0 and self.min_length >= self.max_len_b:  # a limit known before decoding
            raise ConfigError(
                f"min_length {self.min_length} is more than the length limit allows "
                f"(max_len_b {self.max_len_b}, eos included)"
            )
        if not isinstance(self.sample, bool):
            raise ConfigError(f"sample must be true or false, got {self.sample!r}")
        if not self.sample:
            check_nbest(self.beam, self.nbest, can_sample=True)
            changed = [f for f in ("temperature", "top_k", "top_p") if getattr(self, f) != _DEFAULTS[f]]
            if changed:
                raise ConfigError(f"{', '.join(changed)} shape sampling: ask for it with sample (--sample)")

    @property
    def controls(self) -> Controls | None:
        controls = Controls(self.no_repeat_ngram_size, self.repetition_penalty)
        return controls if controls.active else None

    @property
    def sampling(self) -> SamplingConfig | None:
        return SamplingConfig(self.temperature, self.top_k, self.top_p) if self.sample else None

    @property
    def greedy(self) -> bool:
        return not self.sample and self.beam == 1 and self.nbest == 1


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(SearchOptions)}  # name -> default, in order


def search(
    model: Seq2SeqModel,
    src: Tensor,
    options: SearchOptions,
    *,
    prefix: list[list[int]] | None = None,
    return_attention: bool = False,
    layout: Layout | None = None,
    generator: torch.Generator | None = None,
) -> list[list[Hypothesis]]:
    """Decode src (B, S) as ``options`` say: each sentence's ``nbest`` hypotheses (best first) or
    samples (in the order drawn). The one place that picks the strategy."""
    if options.sample:  # each sample its own row from the start
        if return_attention:
            raise ConfigError("attention maps come from a search, not from sampling")
        return sample_search(
            model,
            src,
            temperature=options.temperature,
            top_k=options.top_k,
            top_p=options.top_p,
            num_samples=options.nbest,
            generator=generator,
            seed=None if generator is not None else options.seed,
            max_len_a=options.max_len_a,
            max_len_b=options.max_len_b,
            min_len=options.min_length,
            controls=options.controls,
            prefix=prefix,
            layout=layout,
        )
    state, first, limits = start_from_source(model, src, options.max_len_a, options.max_len_b, layout=layout)
    return decode(model, state, first, limits, options, prefix=prefix, return_attention=return_attention)


def decode(
    model: IncrementalDecoder,
    state: DecoderState,
    last: Tensor,
    limits: Tensor,
    options: SearchOptions,
    *,
    prefix: list[list[int]] | None = None,
    return_attention: bool = False,
    generator: torch.Generator | None = None,
) -> list[list[Hypothesis]]:
    """Continue any decoder state from its newest tokens ``last`` (B, P) as ``options`` say; with
    sampling, each row is one sample (one list of one per row)."""
    common: dict[str, Any] = dict(min_len=options.min_length, controls=options.controls, prefix=prefix)
    if options.sample:
        assert options.sampling is not None
        if generator is None:
            generator = torch.Generator(device=last.device).manual_seed(options.seed)
        hyps = sample_decode(
            model, state, last, limits, sampling=options.sampling, generator=generator, **common
        )
        return [[h] for h in hyps]
    if options.greedy:
        return [
            [h]
            for h in greedy_decode(model, state, last, limits, return_attention=return_attention, **common)
        ]
    return beam_decode(
        model,
        state,
        last,
        limits,
        beam_size=options.beam,
        length_penalty=options.length_penalty,
        nbest=options.nbest,
        return_attention=return_attention,
        **common,
    )
