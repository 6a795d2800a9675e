"""Token-budget batches: reproducible, resumable and shardable across DDP ranks.

The paper (Section 5.1) batches "sentence pairs by approximate sequence length", each batch holding
about 25000 source and 25000 target tokens. ``TokenBatchSampler`` does the same: it sorts examples
by length so a batch pads little, packs batches under a budget on the *padded* size, and shuffles
only the order of batches, with a generator seeded by ``seed + epoch``.

Dimensions: ``B`` sentences in a batch, ``S`` source length, ``T`` target length (+1 for bos/eos).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from attnkit.errors import ConfigError, DataError


@dataclass
class Batch:
    """A padded batch for teacher forcing: the decoder reads ``tgt_in`` and predicts ``tgt_out``."""

    src: Tensor  # (B, S) long, right-padded
    tgt_in: Tensor  # (B, T) long: bos + tgt, right-padded
    tgt_out: Tensor  # (B, T) long: tgt + eos, right-padded
    n_src_tokens: int  # non-pad tokens in src
    n_tgt_tokens: int  # non-pad tokens in tgt_out: the number of predictions the loss averages over

    def __len__(self) -> int:
        return self.src.size(0)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        def move(t: Tensor) -> Tensor:
            return t.to(device, non_blocking=non_blocking)

        return replace(self, src=move(self.src), tgt_in=move(self.tgt_in), tgt_out=move(self.tgt_out))

    def pin_memory(self) -> Batch:
        """Called by ``DataLoader(pin_memory=True)``."""
        return replace(
            self,
            src=self.src.pin_memory(),
            tgt_in=self.tgt_in.pin_memory(),
            tgt_out=self.tgt_out.pin_memory(),
        )


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """Token id lists as one right-padded (B, longest) long tensor: every batch in attnkit is made here."""
    if len(seqs) == 0:
        raise DataError("cannot collate an empty list of examples")
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=torch.long)  # (B, T)
    for row, seq in enumerate(seqs):
        out[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out


def collate(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]], *, pad_id: int, bos_id: int, eos_id: int
) -> Batch:
    """Pad (src ids, tgt ids) pairs into a ``Batch``; src is kept as is, tgt gets bos/eos.

    The ids have no defaults: they come from the tokenizer (``tokenizer.vocabulary``), in one place.
    """
    src = pad_sequences([s for s, _ in pairs], pad_id)  # (B, S)
    tgt_in, tgt_out = collate_lm([t for _, t in pairs], pad_id=pad_id, bos_id=bos_id, eos_id=eos_id)  # (B, T)
    n_src = sum(len(s) for s, _ in pairs)
    n_tgt = sum(len(t) + 1 for _, t in pairs)  # eos included
    return Batch(src, tgt_in, tgt_out, n_src, n_tgt)


def collate_lm(
    seqs: Sequence[Sequence[int]], *, pad_id: int, bos_id: int, eos_id: int
) -> tuple[Tensor, Tensor]:
    """Inputs ``bos s`` and targets ``s eos`` of each sequence, both (B, T = longest + 1), right-padded:
    a language model's batch, and a translation batch's target side."""
    tokens = pad_sequences([[bos_id, *s] for s in seqs], pad_id)  # (B, T)
    targets = pad_sequences([[*s, eos_id] for s in seqs], pad_id)  # (B, T)
    return tokens, targets


class TokenBatchSampler:
    """Batches of example indices whose padded size stays within ``max_tokens``.

    Padded size of a batch = ``n_sentences * max(longest src, longest tgt + 1)``: the +1 is the bos
    (``tgt_in``) or eos (``tgt_out``) that ``collate`` adds. Use it as ``DataLoader(batch_sampler=...)``.

    - ``lengths``: (src_len, tgt_len) per example, a list of pairs or an (N, 2) integer array (a
      read-only ``np.memmap`` too, never copied into Python objects). The sampler keeps three (N,)
      int32 arrays and an epoch's batches as numpy arrays, not lists, so a corpus of millions fits
      every DDP rank: 4.5M pairs keep under 100 MB and plan an epoch in 1-2 s (``bench/sampler_scale.py``).
    - An example whose own padded size exceeds ``max_tokens`` gets a batch of its own (never dropped);
      ``n_oversized`` counts them so a trainer can warn. Filter long sentences upstream to avoid them.
    - Batch *composition* is fixed by the length sort (ties broken at random per epoch when
      shuffling); the *order* of batches is a permutation drawn from ``seed + epoch``.
    - Sharding: the epoch's ordered batches are padded by repeating its first batches until their
      count is a multiple of ``world_size``, so every rank gets ``len(self)`` batches and no example
      is lost; rank ``r`` takes batches ``r, r + world_size, ...``. Global step ``k`` is the union of
      batches ``k * world_size ... k * world_size + world_size - 1``.
    - ``epoch_size(epoch)``, if given, says how many of the leading examples ``epoch`` batches (the
      rest sit out that epoch): a run whose data changes between epochs (bidirectional training
      appends the reversed pairs and drops them later) keeps one sampler and one resumable position.
    - ``epoch_indices(epoch)``, if given instead, is the (n,) integer array of example indices that
      ``epoch`` batches, repeats allowed, in any order: weighted mixing of corpora (a corpus of
      weight 2 listed twice, of weight 0.5 a seeded half of it). Batches hold these indices, so a
      repeated example appears as often as listed (twice in one batch, at times: its copies tie on
      length). It must return the same indices whenever asked for the same epoch (seed any draw
      from the epoch): resuming re-derives them.
      ``epoch_size=f`` batches what ``epoch_indices=lambda e: np.arange(f(e))`` batches.
    - Resuming: ``state_dict()`` is ``{"epoch", "position"}`` where position counts the batches this
      rank has handed out in the epoch; after ``load_state_dict`` iteration continues with the next
      one. Finishing an epoch advances to the next epoch, so ``set_epoch`` is optional. With
      ``DataLoader(num_workers>0)`` the loader draws batches ahead of the training loop; save the
      number of batches actually trained on instead of this position then.
    """

    def __init__(
        self,
        lengths: Sequence[tuple[int, int]] | np.ndarray,
        max_tokens: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        max_sentences: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        epoch_size: Callable[[int], int] | None = None,
        epoch_indices: Callable[[int], np.ndarray] | None = None,
    ):
        if max_tokens <= 0:
            raise ConfigError(f"max_tokens must be positive, got {max_tokens}")
        if max_sentences is not None and max_sentences <= 0:
            raise ConfigError(f"max_sentences must be positive or None, got {max_sentences}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        if epoch_size is not None and epoch_indices is not None:
            raise ValueError("give epoch_size or epoch_indices, not both")
        if len(lengths) == 0:
            raise DataError("cannot batch an empty dataset")
        if isinstance(lengths, np.ndarray):  # used as it is: a memmap stays on disk
            lens = lengths
            if not np.issubdtype(lens.dtype, np.integer):
                raise ValueError(f"lengths must be integers, got an array of dtype {lens.dtype}")
        else:
            lens = np.asarray(lengths, dtype=np.int64)  # (N, 2): src_len, tgt_len
        if lens.ndim != 2 or lens.shape[1] != 2:
            raise ValueError(f"lengths must be (src_len, tgt_len) pairs, got an array of shape {lens.shape}")
        if lens.min() < 0:
            raise DataError(f"negative sequence length at example {int(np.argwhere(lens < 0)[0, 0])}")
        dtype = np.int32 if int(lens.max()) < np.iinfo(np.int32).max else np.int64
        self._src = lens[:, 0].astype(dtype)  # (N,)
        self._tgt = lens[:, 1].astype(dtype) + 1  # (N,) positions in tgt_in / tgt_out
        self._width = np.maximum(self._src, self._tgt)  # (N,) padded width each example needs
        self._index_dtype = np.int32 if len(lens) < 2**31 else np.int64
        self.max_tokens, self.max_sentences = max_tokens, max_sentences
        self.shuffle, self.seed = shuffle, seed
        self.rank, self.world_size = rank, world_size
        self.epoch_size, self.epoch_indices = epoch_size, epoch_indices
        self.n_oversized = int(np.count_nonzero(self._width > max_tokens))
        self.epoch, self.position = 0, 0
        self._cache: tuple[int, _Plan] | None = None  # (epoch, its plan)

    # --- batch construction -----------------------------------------------------------------------
    def _epoch_examples(self, epoch: int) -> tuple[int, np.ndarray | None]:
        """How many examples ``epoch`` batches, and their indices (None: the first n, in order)."""
        n_all = len(self._width)
        if self.epoch_indices is None:
            n = n_all if self.epoch_size is None else self.epoch_size(epoch)
            if not 0 < n <= n_all:
                raise ValueError(f"epoch_size({epoch}) = {n}: must be in [1, {n_all}]")
            return n, None
        idx = np.asarray(self.epoch_indices(epoch))
        if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
            raise DataError(
                f"epoch_indices({epoch}) must be a non-empty 1-D integer array, "
                f"got shape {idx.shape} and dtype {idx.dtype}"
            )
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= n_all:
            raise DataError(f"epoch_indices({epoch}) holds {lo if lo < 0 else hi}: must be in [0, {n_all})")
        return len(idx), idx

    def _length_order(self, examples: np.ndarray) -> np.ndarray:
        """Stable sort of ``examples`` (n,) by (width, src, tgt): the positions, (n,) int64.

        The three lengths make one integer key whose 16-bit digits numpy radix-sorts in linear time
        (4.5M examples on a 2-core host: 0.5 s, ``np.lexsort`` 4 s); lengths of two million tokens
        and more overflow the key and take ``np.lexsort``. Both are stable: ties keep the order given.
        """
        base = int(self._width.max()) + 1  # every length is below it: the key's digits don't mix
        if base**3 > np.iinfo(np.int64).max:
            return np.lexsort((self._tgt[examples], self._src[examples], self._width[examples]))
        kind = np.int32 if base**3 <= np.iinfo(np.int32).max else np.int64  # half the memory when it fits
        key = self._width[examples].astype(kind) * kind(base**2)  # (n,)
        key += self._src[examples].astype(kind) * kind(base)
        key += self._tgt[examples]
        return _stable_argsort(key, n_bits=(base**3 - 1).bit_length())

    def _plan(self, epoch: int) -> _Plan:
        if not self.shuffle and self.epoch_size is None and self.epoch_indices is None:
            epoch = 0  # the order does not depend on the epoch: keep one cache entry
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        g = torch.Generator().manual_seed(self.seed + epoch)
        n, idx = self._epoch_examples(epoch)
        # Random tie-breaking among equal lengths varies the batches between epochs at no padding cost.
        perm = torch.randperm(n, generator=g).numpy() if self.shuffle else np.arange(n)  # (n,)
        perm = perm.astype(
            self._index_dtype
        )  # int32 below 2**31 examples: a large epoch plans in less memory
        examples = perm if idx is None else idx[perm]  # (n,) example indices, in tie-breaking order
        order = examples[self._length_order(examples)].astype(self._index_dtype)  # (n,) width ascending
        bounds = _pack(self._width[order], self.max_tokens, self.max_sentences)  # (n_batches + 1,)
        n_batches = len(bounds) - 1
        ids = torch.randperm(n_batches, generator=g).numpy() if self.shuffle else np.arange(n_batches)
        short = -n_batches % self.world_size
        ids = np.concatenate([ids, ids[np.arange(short) % n_batches]])  # (n_batches + short,)
        plan = _Plan(order, bounds, ids[self.rank :: self.world_size].copy())
        self._cache = (epoch, plan)
        return plan

    def _rank_batches(self, epoch: int) -> list[list[int]]:
        """This rank's batches of ``epoch`` as lists: for tests and small data (iteration builds one
        batch at a time)."""
        plan = self._plan(epoch)
        return [plan.batch(p) for p in range(len(plan.mine))]

    # --- iteration and state ----------------------------------------------------------------------
    def __len__(self) -> int:
        """Batches in the current epoch on this rank (the same on every rank)."""
        return self.n_batches(self.epoch)

    def n_batches(self, epoch: int) -> int:
        """Batches in ``epoch`` on this rank: the same every epoch unless ``epoch_size`` or
        ``epoch_indices`` varies."""
        return len(self._plan(epoch).mine)

    def __iter__(self) -> Iterator[list[int]]:
        plan = self._plan(self.epoch)
        for p in range(self.position, len(plan.mine)):
            self.position = p + 1
            if self.position == len(plan.mine):  # the last one is out: the next batch opens epoch + 1
                self.epoch, self.position = self.epoch + 1, 0
            yield plan.batch(p)

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its first batch; a no-op if already in it (keeps a resumed position)."""
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        epoch, position = int(state["epoch"]), int(state["position"])
        n_batches = self.n_batches(epoch)
        if not 0 <= position <= n_batches:
            raise ConfigError(
                f"sampler position {position} is outside epoch {epoch}'s {n_batches} batches: "
                "were the data, max_tokens or world_size changed?"
            )
        if position == n_batches:  # saved right after the epoch's last batch
            epoch, position = epoch + 1, 0
        self.epoch, self.position = epoch, position


class _Plan(NamedTuple):
    """One epoch's batches on one rank, as arrays: batch ``b`` is ``order[bounds[b] : bounds[b + 1]]``."""

    order: np.ndarray  # (n,) int32 (int64 from 2**31 examples) example indices, sorted by width
    bounds: np.ndarray  # (n_batches + 1,) int64 batch starts in order, then n
    mine: np.ndarray  # (n_rank,) int64 the batch ids this rank hands out, in turn

    def batch(self, p: int) -> list[int]:
        """The example indices of this rank's ``p``-th batch."""
        b = self.mine[p]
        return self.order[self.bounds[b] : self.bounds[b + 1]].tolist()


def _pack(width: np.ndarray, max_tokens: int, max_sentences: int | None) -> np.ndarray:
    """Greedy batches over examples sorted by ``width`` (n,), ascending: each batch takes the next
    example while ``n_sentences * widest <= max_tokens`` and ``n_sentences <= max_sentences``.

    With widths ascending, the widest of a batch from ``s`` to ``e`` is ``width[e]`` and the padded
    size ``(e - s + 1) * width[e]`` grows with ``e``: the batch ends at the last ``e`` that fits, one
    ``searchsorted`` over the ``max_tokens // width[s]`` examples that could fit, so the Python loop
    runs once per batch, not per example. An example with ``2 * width > max_tokens`` (an oversized
    one too) fits with no other: those, at the end, are one batch each without a loop.

    Returns the (n_batches + 1,) int64 bounds: batch ``b`` is positions ``bounds[b] : bounds[b + 1]``.
    """
    n = len(width)
    cap = n if max_sentences is None else max_sentences
    alone = 0 if cap == 1 else int(np.count_nonzero(width <= max_tokens // 2))  # positions >= alone: solo
    starts: list[int] = []
    if alone:
        counts = np.arange(1, min(max_tokens // int(width[0]), cap, alone) + 1, dtype=np.int64)  # (K,)
        s = 0
        while s < alone:
            k = min(max_tokens // int(width[s]), cap, alone - s)  # no batch from s holds more
            padded = counts[:k] * width[s : s + k]  # (k,) padded size if the batch ends at s + j
            starts.append(s)
            s += int(np.searchsorted(padded, max_tokens, side="right"))
    return np.concatenate([np.array(starts, dtype=np.int64), np.arange(alone, n + 1, dtype=np.int64)])


def _stable_argsort(key: np.ndarray, *, n_bits: int) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` of non-negative ``key`` (n,) below ``2**n_bits``: stable
    passes over its 16-bit digits, lowest first (numpy radix-sorts 16-bit keys, not wider ones)."""
    small = np.int32 if len(key) < 2**31 else np.int64  # positions: int32 halves the passes' memory
    order = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable").astype(small)  # (n,)
    for shift in range(16, n_bits, 16):
        digit = ((key[order] >> shift) & 0xFFFF).astype(np.uint16)  # (n,) this pass's digit, in order
        order = order[np.argsort(digit, kind="stable")]
    return order
