"""The static decoding step replayed from CUDA graphs: one captured graph per bucket.

On a GPU a small model's decoding step is bound by kernel launches (~120 per step), not by math. A
CUDA graph records the step's kernels once and replays them with one launch. A graph reads and
writes fixed addresses, so :class:`GraphedStep` keeps, per bucket (R rows, Tb cache positions, Sb
source positions), one set of :class:`~.static.StaticCaches` and one token and position tensor:
each batch's caches are copied into its bucket's (:meth:`GraphedStep.adopt`), and each step copies
its tokens and position in and replays.

``capture=False`` keeps the same buffers and calls the step instead of replaying it: the CPU tests
check the buffer reuse with it, and a GPU run adds only the capture (torch.cuda.graph).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from .fixed_layout import StaticCaches, StaticStep


@dataclass
class _Bucket:
    caches: StaticCaches  # this bucket's buffers: every batch's caches are copied into them
    tokens: Tensor  # (R,) long
    pos: Tensor  # (1,) long
    graph: torch.cuda.CUDAGraph | None = None
    out: Tensor | None = None  # (R, V): the captured step's output, rewritten by each replay


def _bucket_key(caches: StaticCaches) -> tuple:
    """Every shape and dtype a step's graph depends on."""
    return tuple((t.shape, t.dtype) for f in fields(caches) for t in _tensors(getattr(caches, f.name)))


def _tensors(value: Tensor | list[Tensor] | None) -> list[Tensor]:
    return value if isinstance(value, list) else [] if value is None else [value]


class GraphedStep:
    """Call as a :class:`~.static.StaticStep` (tokens (R,), pos (1,), caches) -> (R, V) log-probs, with
    caches from :meth:`adopt`. The output is the graph's own buffer: read it before the next call.

    Args:
        step: the eager step (its model in eval mode, on the GPU when capturing).
        capture: record a CUDA graph per bucket (on a CUDA device), else call ``step`` on the buffers.
    """

    def __init__(self, step: StaticStep, *, capture: bool):
        self.step, self.capture = step, capture
        self.buckets: dict[tuple, _Bucket] = {}
        self.pool = torch.cuda.graph_pool_handle() if capture else None  # one memory pool for all graphs

    def adopt(self, caches: StaticCaches) -> StaticCaches:
        """The persistent buffers of ``caches``' bucket, holding a copy of ``caches``."""
        key = _bucket_key(caches)
        if key not in self.buckets:
            c = caches
            clone = lambda ts: [t.clone() for t in ts]  # noqa: E731
            kept = replace(
                c,
                self_k=clone(c.self_k),
                self_v=clone(c.self_v),
                cross_k=clone(c.cross_k),
                cross_v=clone(c.cross_v),
                src_mask=None if c.src_mask is None else c.src_mask.clone(),
                limits=c.limits.clone(),
                offset=c.offset.clone(),
            )
            R = caches.limits.size(0)
            self.buckets[key] = _Bucket(kept, caches.limits.new_zeros(R), caches.limits.new_zeros(1))
            return kept
        kept = self.buckets[key].caches
        for f in fields(caches):
            for dst, src in zip(_tensors(getattr(kept, f.name)), _tensors(getattr(caches, f.name))):
                dst.copy_(src)
        return kept

    def __call__(self, tokens: Tensor, pos: Tensor, caches: StaticCaches) -> Tensor:
        bucket = self.buckets.get(_bucket_key(caches))
        if bucket is None or bucket.caches is not caches:
            raise ValueError("a graphed step runs on caches from its adopt()")
        bucket.tokens.copy_(tokens)
        bucket.pos.copy_(pos)
        if not self.capture:
            return self.step(bucket.tokens, bucket.pos, bucket.caches)
        if bucket.graph is None:
            bucket.graph, bucket.out = self._record(bucket)
        bucket.graph.replay()
        assert bucket.out is not None
        return bucket.out

    def _record(self, bucket: _Bucket) -> tuple[torch.cuda.CUDAGraph, Tensor]:
        """Capture one step on ``bucket``'s buffers. The warm-up and the capture write the keys and
        values of the current position, as the replay that follows does: the same values."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with _uncached_autocast(), torch.cuda.stream(side):  # workspaces are chosen outside the capture
            self.step(bucket.tokens, bucket.pos, bucket.caches)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with _uncached_autocast(), torch.cuda.graph(graph, pool=self.pool):
            out = self.step(bucket.tokens, bucket.pos, bucket.caches)
        return graph, out


def _uncached_autocast() -> contextlib.AbstractContextManager:
    """The caller's autocast without its cache of cast weights: that cache is freed when the caller's
    autocast exits, and a graph that read it would replay on freed memory. The casts are captured."""
    if not torch.is_autocast_enabled("cuda"):
        return contextlib.nullcontext()
    return torch.autocast("cuda", dtype=torch.get_autocast_dtype("cuda"), cache_enabled=False)
