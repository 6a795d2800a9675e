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
    - Resuming: ``state_dict()`` is ``{"epoch", "position"}`` where position counts the batches this
      rank has handed out in the epoch; after ``load_state_dict`` iteration continues with the next
      one. Finishing an epoch advances to the next epoch, so ``set_epoch`` is optional. With
      ``DataLoader(num_workers>0)`` the loader draws batches ahead of the training loop; save the
      number of batches actually trained on instead of this position then.
    """

    def __init__(
        self,
        lengths: Sequence[tuple[int, int]],
        max_tokens: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        max_sentences: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        epoch_size: Callable[[int], int] | None = None,
    ):
        if max_tokens <= 0:
            raise ConfigError(f"max_tokens must be positive, got {max_tokens}")
        if max_sentences is not None and max_sentences <= 0:
            raise ConfigError(f"max_sentences must be positive or None, got {max_sentences}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        if len(lengths) == 0:
            raise DataError("cannot batch an empty dataset")
        lens = np.asarray(lengths, dtype=np.int64)  # (N, 2): src_len, tgt_len
        if lens.ndim != 2 or lens.shape[1] != 2:
            raise ValueError(f"lengths must be (src_len, tgt_len) pairs, got an array of shape {lens.shape}")
        if (lens < 0).any():
            raise DataError(f"negative sequence length at example {int(np.argwhere(lens < 0)[0, 0])}")
        self._src = lens[:, 0]
        self._tgt = lens[:, 1] + 1  # positions in tgt_in / tgt_out
        self._width = np.maximum(self._src, self._tgt)  # padded width each example needs
        self.max_tokens, self.max_sentences = max_tokens, max_sentences
        self.shuffle, self.seed = shuffle, seed
        self.rank, self.world_size = rank, world_size
        self.epoch_size = epoch_size
        self.n_oversized = int((self._width > max_tokens).sum())
        self.epoch, self.position = 0, 0
        self._cache: tuple[int, list[list[int]]] | None = None  # (epoch, this rank's batches)

    # --- batch construction -----------------------------------------------------------------------
    def _pack(self, order: np.ndarray) -> list[list[int]]:
        """Greedily cut ``order`` (length-sorted indices) into batches under the budget."""
        batches: list[list[int]] = []
        cur: list[int] = []
        cur_width = 0
        for i, w in zip(order.tolist(), self._width[order].tolist(), strict=True):
            width = max(cur_width, w)
            full = self.max_sentences is not None and len(cur) >= self.max_sentences
            if cur and (full or (len(cur) + 1) * width > self.max_tokens):
                batches.append(cur)
                cur, width = [], w
            cur.append(i)
            cur_width = width
        batches.append(cur)
        return batches

    def _rank_batches(self, epoch: int) -> list[list[int]]:
        if not self.shuffle and self.epoch_size is None:
            epoch = 0  # the order does not depend on the epoch: keep one cache entry
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        g = torch.Generator().manual_seed(self.seed + epoch)
        n = len(self._width) if self.epoch_size is None else self.epoch_size(epoch)
        if not 0 < n <= len(self._width):
            raise ValueError(f"epoch_size({epoch}) = {n}: must be in [1, {len(self._width)}]")
        # Random tie-breaking among equal lengths varies the batches between epochs at no padding cost.
        perm = torch.randperm(n, generator=g).numpy() if self.shuffle else np.arange(n)
        # lexsort: last key is primary; stable, so ties keep the order of perm.
        order = perm[np.lexsort((self._tgt[perm], self._src[perm], self._width[perm]))]
        batches = self._pack(order)
        if self.shuffle:
            batches = [batches[j] for j in torch.randperm(len(batches), generator=g).tolist()]
        short = -len(batches) % self.world_size
        batches = batches + [batches[j % len(batches)] for j in range(short)]
        mine = batches[self.rank :: self.world_size]
        self._cache = (epoch, mine)
        return mine

    # --- iteration and state ----------------------------------------------------------------------
    def __len__(self) -> int:
        """Batches in the current epoch on this rank (the same on every rank)."""
        return self.n_batches(self.epoch)

    def n_batches(self, epoch: int) -> int:
        """Batches in ``epoch`` on this rank: the same every epoch unless ``epoch_size`` varies."""
        return len(self._rank_batches(epoch))

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._rank_batches(self.epoch)
        for p in range(self.position, len(batches)):
            self.position = p + 1
            if self.position == len(batches):  # the last one is out: the next batch opens epoch + 1
                self.epoch, self.position = self.epoch + 1, 0
            yield batches[p]

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its first batch; a no-op if already in it (keeps a resumed position)."""
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        epoch, position = int(state["epoch"]), int(state["position"])
        n_batches = len(self._rank_batches(epoch))
        if not 0 <= position <= n_batches:
            raise ConfigError(
                f"sampler position {position} is outside epoch {epoch}'s {n_batches} batches: "
                "were the data, max_tokens or world_size changed?"
            )
        if position == n_batches:  # saved right after the epoch's last batch
            epoch, position = epoch + 1, 0
        self.epoch, self.position = epoch, position
