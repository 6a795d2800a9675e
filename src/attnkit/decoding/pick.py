"""The one place that picks a search's strategy (greedy, beam or sampling) from its
:class:`~.options.SearchOptions`, for a source batch (:func:`search`) or any decoder state
(:func:`decode`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..errors import ConfigError
from ..model.interface import DecoderState, IncrementalDecoder, Seq2SeqModel
from .beam import beam_decode
from .common import Hypothesis, Layout, start_from_source
from .greedy import greedy_decode
from .options import SearchOptions
from .sampling import sample_decode, sample_search


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
