"""A key/value cache that moves its rows lazily: the searches' speed layer over the plain cache.

A beam search moves rows after every step (``select``). :class:`attnkit.attention.KVCache` copies
the cache at once; :class:`DeferredKVCache` only records the move, and the next ``append`` copies the
kept rows straight into the grown cache: one copy of the cache a step instead of two (a reorder,
then a concatenation): at large batches, streaming these caches through memory is a large share of
a decoding step. Reading or writing ``k`` or ``v`` carries out
a recorded move first, so callers always see the rows in their current order. The searches ask the
model for these caches (``init_state(..., cache=DeferredKVCache)``); tests check both give the same.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..attention import KVCache


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
