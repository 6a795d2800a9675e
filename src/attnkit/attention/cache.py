"""The key/value caches of decoding, in one place: each step's self-attention keys and values, kept
for the steps after it.

- :class:`KVCache`, the plain one (what the paper's decoder needs): each step appends along time,
  a beam search moves rows (``select``).
- :class:`DeferredKVCache`, what the searches use: a row move is only recorded, and the next
  ``append`` copies the kept rows straight into the grown cache: one copy of the cache a step
  instead of two (a reorder, then a concatenation); at large batches, streaming these caches through
  memory is a large share of a decoding step. Reading or writing ``k`` or ``v`` carries out a
  recorded move first, so callers always see the rows in their current order. The searches ask the
  model for these caches (``init_state(..., cache=DeferredKVCache)``); tests check both give the same.
- :class:`SlotCache`, buffers of a :class:`~.layout.FixedLayout` written in place (a compiled step).

Legend: B rows, H heads, Tk positions so far, T new ones, Dh head size; R, Tb a layout's rows and
positions.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import Tensor


class Slots(Protocol):
    """What a :class:`SlotCache` reads of its :class:`~.layout.FixedLayout` (which makes the caches)."""

    t: int  # positions written so far
    pool: Any  # fixed buffer addresses (a captured graph), or None

    def position(self, device: torch.device) -> Tensor: ...

    def buffers(self, layer: int, rows: int, like: Tensor) -> tuple[Tensor, Tensor]: ...


class KVCache:
    """Self-attention keys and values of the positions decoded so far, kept by the caller.

    Each decoding step appends its new keys/values along the time axis; a beam search moves rows
    (``select``). :class:`DeferredKVCache` does the same with fewer copies.
    """

    fixed = False  # buffers of a fixed length (SlotCache)

    def __init__(self) -> None:
        self.k: Tensor | None = None  # (B, H, Tk, Dh)
        self.v: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.size(2)

    def select(self, rows: Tensor) -> None:
        """Keep (and reorder) the batch rows ``rows`` (B',): beam search moves hypotheses."""
        if self.k is not None and self.v is not None:
            rows = rows.to(self.k.device)
            self.k, self.v = self.k.index_select(0, rows), self.v.index_select(0, rows)

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add the new positions k, v (B, H, T, Dh); returns the whole cache (B, H, Tk + T, Dh)."""
        if self.k is None or self.v is None:
            self.k, self.v = k, v
        else:
            self.k, self.v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        return self.k, self.v


class _Settled:
    """A tensor of :class:`DeferredKVCache`, read and written only after a recorded move is carried out."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, cache: DeferredKVCache | None, owner: type | None = None):
        if cache is None:
            return self
        cache._settle()
        return getattr(cache, self.slot)

    def __set__(self, cache: DeferredKVCache, value: Tensor | None) -> None:
        cache._settle()
        setattr(cache, self.slot, value)


class DeferredKVCache(KVCache):
    """:class:`~attnkit.attention.KVCache` with row moves recorded and carried out in the next copy."""

    k = _Settled()  # (B, H, Tk, Dh), rows in their current order
    v = _Settled()

    def __init__(self) -> None:  # the base's attributes are descriptors here
        self._k: Tensor | None = None  # (B, H, Tk, Dh) each, in the order of the last copy
        self._v: Tensor | None = None
        self._rows: Tensor | None = None  # (B',) recorded move: current row i is stored row _rows[i]

    def __len__(self) -> int:
        return 0 if self._k is None else self._k.size(2)

    def _settle(self) -> None:
        if self._rows is not None:
            assert self._k is not None and self._v is not None
            self._k, self._v = self._k.index_select(0, self._rows), self._v.index_select(0, self._rows)
            self._rows = None

    def select(self, rows: Tensor) -> None:
        """Keep (and reorder) the batch rows ``rows`` (B',), recorded until the next copy."""
        if self._k is None:
            return
        rows = rows.to(self._k.device)  # kept until the move is carried out: not to be changed in place
        self._rows = rows if self._rows is None else self._rows.index_select(0, rows)

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        if self._k is None or self._v is None:
            self._k, self._v = k, v
        else:
            self._k, self._v = _grow(self._k, k, self._rows), _grow(self._v, v, self._rows)
            self._rows = None
        return self._k, self._v


def _grow(old: Tensor, new: Tensor, rows: Tensor | None) -> Tensor:
    """old (B, H, t, Dh) with its rows ``rows`` (B',) picked (all when None), then new (B', H, T, Dh)
    after them in time: (B', H, t + T, Dh), the picked rows copied once, straight into place."""
    if rows is None:
        return torch.cat([old, new], dim=2)
    if new.size(0) != rows.numel():
        raise ValueError(f"{new.size(0)} new rows for a cache of {rows.numel()} rows")
    # out= has no gradient, and torch.compile does not trace out= into a slice
    needs_grad = torch.is_grad_enabled() and (old.requires_grad or new.requires_grad)
    if needs_grad or torch.compiler.is_compiling():
        return torch.cat([old.index_select(0, rows), new], dim=2)
    t = old.size(2)
    out = old.new_empty(rows.numel(), old.size(1), t + new.size(2), old.size(3))  # (B', H, t + T, Dh)
    torch.index_select(old, 0, rows, out=out[:, :, :t])
    out[:, :, t:] = new
    return out


class SlotCache(KVCache):
    """Self-attention keys and values in buffers (R, H, Tb, Dh) of a fixed layout: ``append``
    writes the new positions in place at the layout's position and returns the whole buffers (the
    decoder's mask hides the positions not yet written, so no look-ahead mask is derived here)."""

    fixed = True

    def __init__(self, layout: Slots, layer: int = 0):
        super().__init__()
        self.layout, self.layer = layout, layer
        self._spare: tuple[Tensor, Tensor] | None = None  # (R, H, Tb, Dh) x 2: where select copies to

    def __len__(self) -> int:
        return self.layout.t

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write k, v (R, H, T, Dh) at the layout's position; the whole buffers (R, H, Tb, Dh), which
        the decoder allocated before the step (never inside a compiled one)."""
        assert self.k is not None and self.v is not None, "a fixed layout's buffers come before its step"
        at = self.layout.position(k.device) + torch.arange(k.size(2), device=k.device)  # (T,)
        self.k.index_copy_(2, at, k)
        self.v.index_copy_(2, at, v)
        return self.k, self.v

    def select(self, rows: Tensor) -> None:
        """Buffer row i takes row ``rows[i]`` (R',); only the positions written so far move. They are
        copied once into a second pair of buffers that then takes the first's place (a beam search
        moves rows at every step: the cache's largest cost at large batches); with a pool's fixed
        addresses, in place while the size stays."""
        if self.k is None or self.v is None:
            return
        rows, t, same_size = rows.to(self.k.device), self.layout.t, rows.numel() == self.k.size(0)
        if self.layout.pool is not None and same_size:  # a captured graph keeps these addresses
            self.k[:, :, :t] = self.k[:, :, :t].index_select(0, rows)
            self.v[:, :, :t] = self.v[:, :, :t].index_select(0, rows)
            return
        if self._spare is None or not same_size:
            self._spare = self.layout.buffers(self.layer, rows.numel(), self.k)
        k, v = self._spare
        torch.index_select(self.k[:, :, :t], 0, rows, out=k[:, :, :t])
        torch.index_select(self.v[:, :, :t], 0, rows, out=v[:, :, :t])
        keep = self.layout.pool is None and same_size  # the old pair is the next spare
        self._spare = (self.k, self.v) if keep else None
        self.k, self.v = k, v
