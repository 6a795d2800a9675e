"""Encoded sentence pairs as flat arrays: one array of token ids per side and one of offsets.

A Python list of lists costs ~30 bytes a token and lives in every DDP rank; here a token costs 2 bytes
(4 past 65,535 pieces) and the arrays can be memory-mapped files that every rank shares through the
OS page cache (:mod:`attnkit.data.prepared`). Training reads one pair at a time, as a list of ints.

Dimensions: ``N`` pairs, ``L`` tokens of one side in total.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

Pair = tuple[list[int], list[int]]  # (source ids, target ids), no bos/eos


def id_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned type that holds every id of a vocabulary this large."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)


@dataclass
class Side:
    """One side of N sequences: ``ids[offsets[i] : offsets[i + 1]]`` is sequence ``i``."""

    ids: np.ndarray  # (L,) token ids, uint16 or uint32
    offsets: np.ndarray  # (N + 1,) int64, offsets[0] = 0, offsets[-1] = L

    @classmethod
    def from_lists(cls, seqs: Sequence[Sequence[int]], dtype: np.dtype) -> Side:
        lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))  # (N,)
        flat = np.fromiter(itertools.chain.from_iterable(seqs), dtype=dtype, count=int(lengths.sum()))  # (L,)
        return cls(flat, offsets_of(lengths))

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets).astype(np.int32)  # (N,)

    def __getitem__(self, i: int) -> list[int]:
        return self.ids[self.offsets[i] : self.offsets[i + 1]].tolist()


def offsets_of(lengths: np.ndarray) -> np.ndarray:
    """(N,) lengths -> (N + 1,) int64 start offsets with the total at the end."""
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def concat(parts: Iterable[np.ndarray], dtype: np.dtype) -> np.ndarray:
    chunks = list(parts)
    return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype=dtype)


class Pairs(Sequence[Pair]):
    """Pairs read one at a time: a subclass gives ``__len__`` and ``pair(i)`` for 0 <= i < len;
    indexing (negative indices, slices, IndexError) is this class's, Sequence's contract."""

    def pair(self, i: int) -> Pair:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> Pair: ...
    @overload
    def __getitem__(self, i: slice) -> list[Pair]: ...
    def __getitem__(self, i: int | slice) -> Pair | list[Pair]:
        n = len(self)
        if isinstance(i, slice):  # training reads one example at a time
            return [self.pair(j) for j in range(*i.indices(n))]
        if not -n <= i < n:
            raise IndexError(i)
        return self.pair(i % n)


class PairStore(Pairs):
    """N encoded pairs, each read as ``(source ids, target ids)``; ``corpus[i]`` says which of the
    run's training corpora pair ``i`` came from (0 = the main one, k = ``data.mix`` entry k)."""

    def __init__(
        self, src: Side, tgt: Side, corpus: np.ndarray | None = None, lengths: np.ndarray | None = None
    ):
        if len(src.offsets) != len(tgt.offsets):
            raise ValueError(f"{len(src.offsets) - 1} source but {len(tgt.offsets) - 1} target sequences")
        self.src, self.tgt = src, tgt
        n = len(src.offsets) - 1
        self.corpus = np.zeros(n, dtype=np.uint8) if corpus is None else corpus  # (N,)
        self._lengths = lengths  # (N, 2) int32 when stored beside the ids (a prepared folder)

    def __len__(self) -> int:
        return len(self.src.offsets) - 1

    def fingerprint_parts(self) -> list[np.ndarray]:
        """The arrays that say what these pairs are (:mod:`attnkit.data.fingerprint`)."""
        return [self.src.ids, self.src.offsets, self.tgt.ids, self.tgt.offsets, self.corpus]

    def pair(self, i: int) -> Pair:
        return self.src[i], self.tgt[i]

    def lengths(self) -> np.ndarray:
        """(N, 2) int32: source and target length of every pair."""
        if self._lengths is not None:
            return self._lengths
        return np.stack([self.src.lengths, self.tgt.lengths], axis=1)


class Subset(Pairs):
    """The pairs of ``store`` at ``rows`` (e.g. those under ``data.max_len``), without copying them."""

    def __init__(self, store: Sequence[Pair], rows: np.ndarray):
        self.store, self.rows = store, rows  # rows: (M,) int64, the store's pairs in this order

    def __len__(self) -> int:
        return len(self.rows)

    def pair(self, i: int) -> Pair:
        return self.store[int(self.rows[i])]

    def fingerprint_parts(self) -> list[np.ndarray] | None:
        """The arrays that say what these pairs are (:mod:`attnkit.data.fingerprint`), or None."""
        parts = getattr(self.store, "fingerprint_parts", lambda: None)()
        return None if parts is None else [np.asarray(self.rows), *parts]
