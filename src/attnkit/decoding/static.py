"""Greedy and beam search over one fixed layout: a decoding step a compiler can take whole.

An opt-in layer at the edge, as :mod:`attnkit.fast`: the model files stay as they are, and this
drives their own modules (embedding, decoder layers, output projection) over buffers of fixed
shape, so that ``torch.compile(step, fullgraph=True)`` traces one graph per shape and reuses it for
every position and every sentence of the same buckets (gpt-fast's static KV cache):

- self-attention keys and values live in preallocated buffers (R, H, Tb, Dh) per decoder layer,
  written in place at the step's position (:class:`SlotCache`); attention reads the whole buffer
  through a mask of the positions written so far;
- R rows is the live rows rounded up to a power of two (:func:`row_bucket`), Tb the longest length
  limit (in :mod:`.static_pool`, the longest live hypothesis) and Sb the source length rounded up to
  a multiple of 32 (:func:`length_bucket`);
- cross-attention keys and values are projected once per sentence and copied to each of its rows;
- a language model (:class:`~attnkit.model.lm.TransformerLM`) runs its prompts eagerly, as the
  generator does, and continues from their keys and values copied into the buffers; the step counts
  new tokens from a position offset (a tensor, so prompts of any length share a graph);
- beam search ranks its extensions and moves its beams inside the step
  (:class:`~.beam_step.BeamStep`), so a compiled beam step is one graph; around a CUDA graph the
  moves are index operations on the buffers (:class:`StaticState`): ``select`` only forgets rows
  (they keep decoding, unread), ``reorder`` copies rows in place, ``expand`` too;
- the step also applies :func:`~.common.step_log_probs`' rules (no pad or bos, eos not before
  ``min_len``, only eos at a row's length limit) with ``torch.where``, never a Python branch on data.

Greedy search is today's strategy (:class:`~.search.Greedy`) over this state, beam search
:class:`~.beam_step.BeamStep` (or :class:`~.beam.BeamSearch` around a CUDA graph); sentences join
and leave a running beam search over these buffers in :mod:`.static_pool` (continuous batching);
tests/test_decoding_static.py checks they give today's tokens and scores. Absolute positions
only (sinusoidal, learned): relative and rotary self-attention count positions from the cache's
length. No controls, forced prefixes or attention outputs.

Legend: B sentences, K beam, N live rows, R buffer rows, L layers, H heads, Dh head size, Tb cache
positions, S/Sb source length (bucketed), V vocabulary.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor

from ..model.interface import Seq2SeqModel
from ..model.lm import TransformerLM
from ..model.transformer import Transformer, TransformerState
from .beam import BeamSearch
from .beam_step import BeamStep, Moves, run_beam_step
from .common import Hypothesis, start_from_source
from .fixed_layout import (
    LENGTH_MULTIPLE,
    MAX_ROW_BUCKET,
    SlotCache,
    StaticCaches,
    StaticState,
    StaticStep,
    length_bucket,
    row_bucket,
)
from .search import Greedy, Strategy

__all__ = [
    "LENGTH_MULTIPLE",
    "MAX_ROW_BUCKET",
    "SlotCache",
    "StaticCaches",
    "StaticDecoder",
    "StaticState",
    "StaticStep",
    "beam_search_static",
    "greedy_search_static",
    "length_bucket",
    "row_bucket",
    "run_static",
    "start_static",
    "start_static_lm",
]


GRAPHS_PER_STEP = 256  # graphs one compiled step may hold: row buckets x length and source buckets


def start_static(
    model: Transformer,
    src: Tensor,
    *,
    spacing: int,
    max_len_a: float,
    max_len_b: int,
    place: Callable[[StaticCaches], StaticCaches] | None = None,
) -> tuple[StaticState, Tensor, Tensor]:
    """Encode src (B, S) as today's searches do; the state over buffers of this batch's buckets,
    the first tokens (B, 1) (bos) and the length limits (B,). ``place`` may move the new caches
    into buffers it keeps (:meth:`~.graphs.GraphedStep.adopt`)."""
    state, first, limits = start_from_source(cast(Seq2SeqModel, model), src, max_len_a, max_len_b)
    assert isinstance(state, TransformerState)
    B, S = src.shape
    R, Tb, Sb = row_bucket(B * spacing), length_bucket(int(limits.max())), length_bucket(S)
    # Each buffer row's sentence; rows beyond the batch copy the last one (real keys: no NaN).
    sentence = (torch.arange(R, device=src.device) // spacing).clamp(max=B - 1)  # (R,)
    cross_k = [F.pad(k, (0, 0, 0, Sb - S)).index_select(0, sentence) for k, _ in state.cross_kv]
    cross_v = [F.pad(v, (0, 0, 0, Sb - S)).index_select(0, sentence) for _, v in state.cross_kv]
    H, Dh = cross_k[0].size(1), cross_k[0].size(3)
    n_layers = len(state.cross_kv)
    self_k = [cross_k[0].new_zeros(R, H, Tb, Dh) for _ in range(n_layers)]
    self_v = [cross_k[0].new_zeros(R, H, Tb, Dh) for _ in range(n_layers)]
    src_mask = F.pad(state.src_mask, (0, Sb - S), value=False).index_select(0, sentence)  # (R, 1, 1, Sb)
    caches = StaticCaches(
        self_k, self_v, cross_k, cross_v, src_mask, limits.index_select(0, sentence), src.new_zeros(1)
    )
    return StaticState(place(caches) if place else caches, B, spacing), first, limits


def start_static_lm(
    lm: TransformerLM,
    prompt: Tensor,
    limit: int,
    *,
    spacing: int,
    place: Callable[[StaticCaches], StaticCaches] | None = None,
) -> tuple[StaticState, Tensor, Tensor]:
    """Prompts (B, P) of one length through the LM as the generator's ``start_from_prompt`` does (bos
    and all but the last piece, eagerly), their keys and values copied into buffers of this batch's
    buckets; the state at position P, bos + prompt (B, P + 1), and the limits (B,)."""
    cfg = lm.config
    B, P = prompt.shape
    bos = torch.full((B, 1), cfg.bos_id, dtype=torch.long, device=prompt.device)
    state = lm.init_state(B)
    if P:
        lm.decode(torch.cat([bos, prompt[:, :-1]], dim=1), state)  # (B, P) positions cached
    R, Tb = row_bucket(B * spacing), length_bucket(P + limit)
    sentence = (torch.arange(R, device=prompt.device) // spacing).clamp(max=B - 1)  # (R,)
    H, Dh = cfg.n_heads, cfg.d_model // cfg.n_heads
    self_k = [prompt.new_zeros(R, H, Tb, Dh, dtype=lm.output_proj.weight.dtype) for _ in lm.layers]
    self_v = [torch.zeros_like(k) for k in self_k]
    for kv, k, v in zip(state.self_kv, self_k, self_v):
        if kv.k is not None and kv.v is not None:
            k[:, :, :P] = kv.k.index_select(0, sentence)  # (R, H, P, Dh)
            v[:, :, :P] = kv.v.index_select(0, sentence)
    limits = torch.full((B,), limit, dtype=torch.long, device=prompt.device)
    offset = torch.full((1,), P, dtype=torch.long, device=prompt.device)
    caches = StaticCaches(self_k, self_v, [], [], None, limits.index_select(0, sentence), offset)
    return (
        StaticState(place(caches) if place else caches, B, spacing, pos=P),
        torch.cat([bos, prompt], 1),
        limits,
    )


def run_static(run: Callable[[Tensor, Tensor, StaticCaches], Tensor], state: StaticState, strategy: Strategy):
    """:func:`~.search.run_search`'s loop over the static step: results in tag order 0..B-1."""
    results: dict[Hashable, Any] = {}
    while len(strategy):
        logp = state.step(run, strategy.last_tokens()[:, -1])
        results.update(strategy.advance(logp, None, state))
    return [results[i] for i in range(len(results))]


class StaticDecoder:
    """Greedy and beam search of ``model`` through one :class:`StaticStep`, kept so that a compiled
    step serves every batch of the same buckets.

    Args:
        model: the Transformer (``greedy``, ``beam``) or the TransformerLM (``continue_greedy``,
            ``continue_beam``), in eval mode with absolute positions.
        min_len: eos is banned before this many new tokens (fixed for the decoder's step).
    """

    def __init__(self, model: Seq2SeqModel | TransformerLM, *, min_len: int = 0):
        self.model = model
        self.step = StaticStep(_static_model(model), min_len=min_len)
        self.run: Callable[[Tensor, Tensor, StaticCaches], Tensor] = self.step
        self.beam_step = BeamStep(self.step)
        self.run_beam: Callable[..., Moves] | None = self.beam_step  # None: beams through ``run``
        self.place: Callable[[StaticCaches], StaticCaches] | None = None  # where a batch's caches live

    def compile(self, **options: Any) -> StaticDecoder:
        """Run the step through ``torch.compile(step, fullgraph=True, dynamic=False, **options)`` from
        now on: one graph of fixed shapes per bucket (Dynamo would otherwise trace a graph of symbolic
        sizes once a second bucket comes, and guard on them).

        Each bucket of rows and lengths is one graph of the same ``forward``, and Dynamo refuses
        more than ``recompile_limit`` graphs per function (8 by default; with ``fullgraph`` an
        error): this decoder's steps may hold :data:`GRAPHS_PER_STEP` each, kept apart from other
        decoders' (``isolate_recompiles``; torch versions without them raise the process's limit).
        """
        options = {"dynamic": False, **options, **_graph_limits()}
        self.run = cast(
            Callable[[Tensor, Tensor, StaticCaches], Tensor],
            torch.compile(self.step, fullgraph=True, **options),
        )
        self.run_beam = cast(Callable[..., Moves], torch.compile(self.beam_step, fullgraph=True, **options))
        return self

    def cuda_graphs(self, *, capture: bool = True) -> StaticDecoder:
        """Replay the step from one CUDA graph per bucket from now on (``capture=False``: the same
        kept buffers, the step called eagerly; what the CPU tests run)."""
        from .graphs import GraphedStep

        graphed = GraphedStep(self.step, capture=capture)
        self.run, self.place = graphed, graphed.adopt
        self.run_beam = None  # the graph replays the decoder; the beams rank around it (BeamSearch)
        return self

    @torch.no_grad()
    def greedy(self, src: Tensor, *, max_len_a: float = 1.5, max_len_b: int = 10) -> list[Hypothesis]:
        """As :func:`~.greedy.greedy_search`: one hypothesis per sentence of src (B, S), in order."""
        state, first, limits = start_static(
            self.seq2seq(), src, spacing=1, max_len_a=max_len_a, max_len_b=max_len_b, place=self.place
        )
        return run_static(self.run, state, Greedy(self.model.config.eos_id, first, limits))

    @torch.no_grad()
    def beam(
        self,
        src: Tensor,
        *,
        beam_size: int = 4,
        length_penalty_alpha: float = 0.6,
        nbest: int = 1,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
    ) -> list[list[Hypothesis]]:
        """As :func:`~.beam.beam_search`: each sentence's ``nbest`` hypotheses, best first."""
        state, first, limits = start_static(
            self.seq2seq(),
            src,
            spacing=beam_size,
            max_len_a=max_len_a,
            max_len_b=max_len_b,
            place=self.place,
        )
        return self._beams(state, first, limits, beam_size, length_penalty_alpha, nbest)

    @torch.no_grad()
    def continue_greedy(self, prompt: Tensor, limit: int) -> list[Hypothesis]:
        """A language model's greedy continuations of prompts (B, P) of one length, at most ``limit``
        new tokens each (eos included), as :func:`~.greedy.greedy_decode` after ``start_from_prompt``."""
        state, last, limits = start_static_lm(self._lm(), prompt, limit, spacing=1, place=self.place)
        return run_static(self.run, state, Greedy(self.model.config.eos_id, last, limits))

    @torch.no_grad()
    def continue_beam(
        self,
        prompt: Tensor,
        limit: int,
        *,
        beam_size: int = 4,
        length_penalty_alpha: float = 0.6,
        nbest: int = 1,
    ) -> list[list[Hypothesis]]:
        """As :meth:`continue_greedy` with :func:`~.beam.beam_decode`: each prompt's ``nbest``, best first."""
        state, last, limits = start_static_lm(self._lm(), prompt, limit, spacing=beam_size, place=self.place)
        return self._beams(state, last[:, -1:], limits, beam_size, length_penalty_alpha, nbest)

    def _beams(
        self, state: StaticState, last: Tensor, limits: Tensor, K: int, alpha: float, nbest: int
    ) -> list[list[Hypothesis]]:
        """Beam search from the newest tokens ``last`` (B, 1): ranked inside the step
        (:class:`~.beam_step.BeamStep`), or by :class:`~.beam.BeamSearch` around a replayed graph."""
        if self.run_beam is not None:
            return run_beam_step(
                self.run_beam,
                state.caches,
                last[:, 0],
                limits,
                beam_size=K,
                length_penalty_alpha=alpha,
                nbest=nbest,
                pos=state.pos,
            )
        search = BeamSearch(self.model.config.eos_id, beam_size=K, length_penalty_alpha=alpha, nbest=nbest)
        search.add(last, limits, list(range(last.size(0))), rows=1)
        return run_static(self.run, state, search)

    def seq2seq(self) -> Transformer:
        """The model, which translates (a TypeError for a language model)."""
        if not isinstance(self.model, Transformer):
            raise TypeError(
                "greedy and beam translate with a Transformer; a language model continues prompts"
            )
        return self.model

    def _lm(self) -> TransformerLM:
        if not isinstance(self.model, TransformerLM):
            raise TypeError("continue_greedy and continue_beam continue a language model's prompts")
        return self.model


def _graph_limits() -> dict[str, Any]:
    """``torch.compile`` arguments that let one compiled step hold a graph per bucket."""
    if "recompile_limit" in inspect.signature(torch.compile).parameters:
        return {"recompile_limit": GRAPHS_PER_STEP, "isolate_recompiles": True}
    config = torch._dynamo.config  # older torch: one limit per process (``cache_size_limit`` before 2.7)
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), GRAPHS_PER_STEP))
    return {}


def _static_model(model: object) -> Transformer | TransformerLM:
    if not isinstance(model, Transformer | TransformerLM):
        raise TypeError(f"static decoding serves the Transformer and the LM, not {type(model).__name__}")
    return model


def greedy_search_static(
    model: Seq2SeqModel, src: Tensor, *, max_len_a: float = 1.5, max_len_b: int = 10, min_len: int = 0
) -> list[Hypothesis]:
    """:func:`~.greedy.greedy_search` over the static step (eager; :class:`StaticDecoder` compiles)."""
    return StaticDecoder(model, min_len=min_len).greedy(src, max_len_a=max_len_a, max_len_b=max_len_b)


def beam_search_static(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    beam_size: int = 4,
    length_penalty_alpha: float = 0.6,
    nbest: int = 1,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    min_len: int = 0,
) -> list[list[Hypothesis]]:
    """:func:`~.beam.beam_search` over the static step (eager; :class:`StaticDecoder` compiles)."""
    return StaticDecoder(model, min_len=min_len).beam(
        src,
        beam_size=beam_size,
        length_penalty_alpha=length_penalty_alpha,
        nbest=nbest,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
    )
