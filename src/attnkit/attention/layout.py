"""The fixed layout: key/value caches of one shape per bucket, written in place, for a decoding step
that a compiler takes whole (gpt-fast's static cache, kept inside the model).

A growing :class:`~.cache.KVCache` concatenates every step's keys and values, so each step has
new shapes and a compiler would trace a new graph per position. A :class:`SlotCache` holds buffers
(R, H, Tb, Dh) allocated once: R rows is the decoder's rows rounded up to a bucket
(:func:`row_bucket`), Tb the longest position the state will decode, rounded up
(:func:`length_bucket`). A step writes its keys and values at ``pos`` in place and attends over the
whole buffer through a mask of the positions written so far (:meth:`FixedLayout.visible`); ``pos``
is a tensor, so every position shares one graph. Rows past the live ones decode too, unread.

A decoder state takes this layout through ``init_state(..., cache=FixedLayout(...))`` and keeps the
same three moves (``expand``/``reorder``/``select``): rows are kept or reordered by index into
buffers of the bucket's size, in place while the bucket stays the same.

Legend: N live rows, R buffer rows, H heads, T new positions, Tb buffer positions, Dh head size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from .cache import SlotCache

MAX_ROW_BUCKET = 256  # rows beyond it round up to a multiple of it
LENGTH_MULTIPLE = 32


def row_bucket(n: int) -> int:
    """Buffer rows for ``n`` rows: 1, 2, 4, ..., 256, then multiples of 256."""
    if n <= MAX_ROW_BUCKET:
        return 1 << max(n - 1, 0).bit_length()
    return -(-n // MAX_ROW_BUCKET) * MAX_ROW_BUCKET


def length_bucket(n: int, multiple: int = LENGTH_MULTIPLE) -> int:
    """Buffer positions for ``n`` positions: ``n`` rounded up to a multiple of ``multiple``."""
    return max(-(-n // multiple), 1) * multiple


def padded_rows(rows: Tensor, capacity: int) -> Tensor:
    """rows (n,) then copies of its last one up to ``capacity`` (buffer rows past the live ones hold a
    real row's keys, so they compute no NaN)."""
    n = rows.numel()
    if n >= capacity:
        return rows
    fill = rows[-1:] if n else rows.new_zeros(1)
    return torch.cat([rows, fill.expand(capacity - n)])


class BufferPool:
    """Key/value buffers kept from batch to batch, one pair per layer and shape, at fixed addresses:
    what a captured CUDA graph needs, since it replays reading and writing the same memory (torch
    captures a graph that writes its inputs only where their addresses are marked static). Rows
    then move in place. One decoder state at a time may use a pool."""

    def __init__(self, *, static: bool = True):
        self.static = static
        self.buffers: dict[tuple, tuple[Tensor, Tensor]] = {}

    def get(self, layer: int, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device):
        """The (k, v) buffers of ``layer`` of this shape, made (zeros) the first time."""
        key = (layer, shape, dtype, str(device))
        if key not in self.buffers:
            k, v = (torch.zeros(shape, dtype=dtype, device=device) for _ in range(2))
            if self.static:
                torch._dynamo.mark_static_address(k)
                torch._dynamo.mark_static_address(v)
            self.buffers[key] = (k, v)
        return self.buffers[key]


class FixedLayout:
    """What the caches of one decoder state share: their length and the position of the next step.

    Args:
        length: positions the state will decode at most (rounded up to :func:`length_bucket`).
        step: the function that runs the model's layers over the buffers (the model's own, or the
            same compiled: :mod:`attnkit.decoding.compiled`); None: the model's own, eagerly.
        pool: where the buffers come from (kept across batches); None: new buffers per state.
    """

    def __init__(
        self, length: int, *, step: Callable[..., Any] | None = None, pool: BufferPool | None = None
    ):
        self.length = length_bucket(length)
        self.step, self.pool = step, pool
        self.t = 0  # positions written, on the host
        self.pos: Tensor | None = None  # (1,) the same on the caches' device: the step reads it
        self.layers = 0  # caches made so far: each its layer's index

    def cache(self) -> SlotCache:
        self.layers += 1
        return SlotCache(self, self.layers - 1)

    def buffers(self, layer: int, rows: int, like: Tensor) -> tuple[Tensor, Tensor]:
        """(k, v) of ``rows`` rows, shaped as ``like`` (R, H, Tb, Dh) otherwise: from the pool,
        or new."""
        shape = (rows, *like.shape[1:])
        if self.pool is not None:
            return self.pool.get(layer, shape, like.dtype, like.device)
        return like.new_zeros(shape), like.new_zeros(shape)

    def capacity(self, n: int) -> int:
        """Buffer rows for ``n`` live rows (or sentences)."""
        return row_bucket(n)

    def position(self, device: torch.device) -> Tensor:
        """(1,) the next position, a tensor of the caches' device (one graph for every position)."""
        if self.pos is None:
            self.pos = torch.full((1,), self.t, dtype=torch.long, device=device)
        return self.pos

    def visible(self, T: int, device: torch.device) -> Tensor:
        """(1, 1, T, Tb) True where new position i may attend: the positions written up to its own."""
        pos = self.position(device)
        keys = torch.arange(self.length, device=device)  # (Tb,)
        queries = pos + torch.arange(T, device=device)  # (T,)
        return (keys[None, :] <= queries[:, None])[None, None]

    def check(self, T: int) -> None:
        if self.t + T > self.length:
            raise ValueError(
                f"positions {self.t}..{self.t + T - 1} are beyond the fixed layout's {self.length}"
            )

    def advance(self, T: int) -> None:
        """After a step of T positions (in place: a captured graph keeps reading the same tensor)."""
        self.t += T
        if self.pos is not None:
            self.pos.add_(T)
