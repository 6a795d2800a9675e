"""Compiled decoding: the model's own step over a fixed layout, through ``torch.compile``.

The searches are unchanged (:func:`~.search.run_search` with its strategies); only the decoder step
they call runs compiled. A state over a :class:`~attnkit.attention.FixedLayout` reads buffers of one
shape per bucket of rows, cache positions and source positions, and its position is a tensor, so
the model's ``step`` (its own layers, the same code as eager decoding) is one graph per bucket,
taken whole (``fullgraph=True``). On a GPU it compiles with ``mode="reduce-overhead"``, which
replays CUDA graphs where torch can capture the step (a small model's step is bound by kernel
launches there, not by math). The step writes its key/value buffers in place, and torch captures a
graph that writes its inputs only where their addresses are marked static: on CUDA the buffers come
from a :class:`~attnkit.attention.layout.BufferPool` kept across batches, marked so, and rows move in
place. Not yet measured on a GPU.

A CPU gains too little from it to be offered there (docs/BENCHMARKS.md, "Compiled decoding"):
:func:`refuse_on_cpu` says so in one line and names the fast CPU path, CTranslate2. The buffers'
rows move by copying the written positions into a second pair of buffers.

Every new bucket compiles once (seconds on a GPU, tens of seconds on a CPU); ``announce`` hears
when a compile starts and ends, with its time, so a first request's wait is never silent.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..attention import FixedLayout
from ..attention.layout import BufferPool
from ..errors import ConfigError
from ..model.fixed import check_fixed
from ..model.interface import DecoderOutput

GRAPHS_PER_STEP = 64  # graphs one compiled step holds (sizes of rows, lengths, sources); more decode eagerly


def refuse_on_cpu(device: torch.device, what: str = "--compile") -> None:
    """Compiled decoding is offered on a GPU only: on a CPU its steady state gains at most a fifth to
    a half at the measured batches, while each size of rows and lengths compiles for seconds, so a
    run of real sentences took several times as long as eager decoding (docs/BENCHMARKS.md)."""
    if device.type == "cpu":
        raise ConfigError(
            f"{what} pays on a GPU only (CUDA graphs): on a CPU compiling took longer than it saved on "
            "real sentences (docs/BENCHMARKS.md, Compiled decoding); for speed on a CPU use --engine "
            "ctranslate2"
        )


class CompiledDecoding:
    """A model's fixed-layout step through ``torch.compile``; call it with a length for a layout
    (what the searches take as ``layout=``).

    Args:
        model: a model with ``step`` (an incremental decoder), absolute positions.
        announce: hears "compiling ..." and "compiled ... in N s" for every new bucket.
        options: ``torch.compile``'s (``backend``, ``mode``, ``options``); by default CUDA graphs on
            a GPU (``mode="reduce-overhead"``) and Inductor's defaults elsewhere.
    """

    def __init__(
        self,
        model: Any,
        *,
        announce: Callable[[str], None] | None = None,
        static_buffers: bool | None = None,
        **options: Any,
    ):  # static_buffers: keep the buffers in a pool at fixed addresses (default: on CUDA)
        if not hasattr(model, "step"):
            raise ConfigError(f"compiled decoding needs a Transformer decoder, not {type(model).__name__}")
        check_fixed(model.config)
        if model.training:
            raise ConfigError("compiled decoding needs a model in eval mode")
        device = next(model.parameters()).device
        if device.type == "cuda" and "backend" not in options:
            options.setdefault("mode", "reduce-overhead")
        options = {"fullgraph": True, "dynamic": False, **options, **_graph_limits()}
        self.model, self.announce = model, announce
        self.compiled = torch.compile(model.step, **options)
        self.buckets: set[tuple] = set()  # the sizes compiled so far
        self.full = False  # GRAPHS_PER_STEP graphs held: new sizes decode eagerly
        if static_buffers is None:
            static_buffers = device.type == "cuda"  # CUDA graphs need their buffers' addresses fixed
        self.pool = BufferPool() if static_buffers else None

    def __call__(self, length: int) -> FixedLayout:
        return FixedLayout(length, step=self.step, pool=self.pool)

    def step(self, tokens: Tensor, state: Any, need_weights: bool = False) -> DecoderOutput:
        key = _bucket(tokens, state, need_weights)
        if key in self.buckets:
            return self._run(tokens, state, need_weights)
        if len(self.buckets) >= GRAPHS_PER_STEP:  # a long run met more sizes than the graphs it may hold
            if not self.full and self.announce is not None:
                self.announce(f"{GRAPHS_PER_STEP} sizes compiled: further sizes decode eagerly")
            self.full = True
            return self.model.step(tokens, state, need_weights)
        rows, length, source, _, _ = key
        if self.announce is not None:
            self.announce(
                f"compiling the decoding step for {rows} rows, {length} positions and {source} source "
                "positions (once per size) ..."
            )
        started = time.perf_counter()
        out = self._run(tokens, state, need_weights)
        if self.announce is not None:
            self.announce(f"compiled the decoding step in {time.perf_counter() - started:.1f} s")
        self.buckets.add(key)
        return out

    def _run(self, tokens: Tensor, state: Any, need_weights: bool) -> DecoderOutput:
        """The compiled step; a compiler's failure (no C++ compiler) as a one-line
        :class:`ConfigError` instead of a compiler's traceback."""
        from torch._dynamo.exc import FailOnRecompileLimitHit, TorchDynamoException

        try:
            return self.compiled(tokens, state, need_weights)
        except FailOnRecompileLimitHit:  # Dynamo's own count ran out first: this size eagerly
            self.buckets.discard(_bucket(tokens, state, need_weights))
            return self.model.step(tokens, state, need_weights)
        except TorchDynamoException as e:
            cause = getattr(e, "inner_exception", None) or e  # a backend's own error, where it raised one
            lines = str(cause).strip().splitlines()
            reason = f"{type(cause).__name__}: {lines[0]}" if lines else type(cause).__name__
            raise ConfigError(f"compiled decoding failed ({reason}); decode without --compile") from None


def _bucket(tokens: Tensor, state: Any, need_weights: bool) -> tuple:
    """(rows, cache positions, source positions, new positions, weights) of a step: one graph each."""
    S = state.src_mask.size(-1) if hasattr(state, "src_mask") else 0
    return (tokens.size(0), state.layout.length, S, tokens.size(1), need_weights)


def _graph_limits() -> dict[str, Any]:
    """``torch.compile`` arguments that let one compiled step hold a graph per bucket (Dynamo refuses
    more than ``recompile_limit`` graphs per function, 8 by default, an error with ``fullgraph``)."""
    if "recompile_limit" in inspect.signature(torch.compile).parameters:
        return {"recompile_limit": GRAPHS_PER_STEP, "isolate_recompiles": True}
    config = torch._dynamo.config  # older torch: one limit per process (``cache_size_limit`` before 2.7)
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), GRAPHS_PER_STEP))
    return {}
