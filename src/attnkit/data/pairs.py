"""Sentence pairs -> encoded arrays, and the filters that decide which pairs train.

One code path for both ways of training: ``attnkit prepare`` runs :func:`encode_chunk` in worker
processes and writes the arrays to disk; a run without prepared data runs it here, in memory.
Filters on text (an empty side, ``data.drop_identical``) run while encoding; filters on lengths
(``data.max_len``, ``data.max_len_ratio``) run when a run starts (:func:`select`), vectorised, so
changing them needs no new preparation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import DataError
from .store import PairStore, Side, concat, id_dtype, offsets_of
from .tokenizer import SubwordTokenizer


@dataclass
class Chunk:
    """A run of encoded pairs: flat ids and lengths per side, and what the text filters dropped."""

    src_ids: np.ndarray  # (Ls,)
    src_len: np.ndarray  # (n,) int32
    tgt_ids: np.ndarray  # (Lt,)
    tgt_len: np.ndarray  # (n,) int32
    n_read: int = 0
    n_empty: int = 0
    n_identical: int = 0


def encode_chunk(
    tokenizer: SubwordTokenizer,
    pairs: Sequence[tuple[str, str]],
    *,
    tag_id: int | None = None,
    drop_identical: bool = False,
    threads: int | None = None,
) -> Chunk:
    """Encode ``pairs``; drop those with an empty side (and, if asked, those whose sides are equal).

    ``tag_id``: a token put before every source sentence (``data.mix`` tags). ``threads``: SentencePiece's
    threads (1 in a worker process of ``attnkit prepare``, whose parallelism is the processes).
    """
    kept, n_empty, n_identical = text_filter(pairs, drop_identical)
    dtype = id_dtype(max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size))
    src = tokenizer.encode_batch([s for s, _ in kept], side="src", threads=threads)
    if tag_id is not None:
        src = [[tag_id, *ids] for ids in src]
    tgt = tokenizer.encode_batch([t for _, t in kept], side="tgt", threads=threads)
    s, t = Side.from_lists(src, dtype), Side.from_lists(tgt, dtype)
    return Chunk(s.ids, s.lengths, t.ids, t.lengths, len(pairs), n_empty, n_identical)


def text_filter(
    pairs: Sequence[tuple[str, str]], drop_identical: bool = False
) -> tuple[list[tuple[str, str]], int, int]:
    """The pairs with text on both sides (and, if asked, different sides); how many of each were dropped."""
    kept = [(s, t) for s, t in pairs if s.strip() and t.strip()]
    n_empty = len(pairs) - len(kept)
    if not drop_identical:
        return kept, n_empty, 0
    different = [(s, t) for s, t in kept if s.strip() != t.strip()]
    return different, n_empty, len(kept) - len(different)


@dataclass
class Counts:
    """What a split's filters dropped, for the log and the manifest."""

    read: int = 0
    empty: int = 0
    identical: int = 0

    def add(self, chunk: Chunk) -> None:
        self.read += chunk.n_read
        self.empty += chunk.n_empty
        self.identical += chunk.n_identical


@dataclass
class StoreBuilder:
    """Collects chunks in order into one in-memory :class:`PairStore`."""

    dtype: np.dtype
    parts: dict[str, list[np.ndarray]] = field(
        default_factory=lambda: {k: [] for k in ("s", "sl", "t", "tl", "c")}
    )
    counts: Counts = field(default_factory=Counts)

    def add(self, chunk: Chunk, corpus: int = 0) -> None:
        p = self.parts
        p["s"].append(chunk.src_ids)
        p["sl"].append(chunk.src_len)
        p["t"].append(chunk.tgt_ids)
        p["tl"].append(chunk.tgt_len)
        p["c"].append(np.full(len(chunk.src_len), corpus, dtype=np.uint8))
        self.counts.add(chunk)

    def store(self) -> PairStore:
        p = self.parts
        src = Side(concat(p["s"], self.dtype), offsets_of(concat(p["sl"], np.dtype(np.int64))))
        tgt = Side(concat(p["t"], self.dtype), offsets_of(concat(p["tl"], np.dtype(np.int64))))
        return PairStore(src, tgt, concat(p["c"], np.dtype(np.uint8)))


def encode_pairs(
    tokenizer: SubwordTokenizer,
    corpora: Sequence[Sequence[tuple[str, str]]],
    *,
    tags: Sequence[int | None] = (),
    drop_identical: bool = False,
) -> tuple[PairStore, Counts]:
    """Encode one or more corpora (the main one first, then ``data.mix``) into one in-memory store."""
    builder = StoreBuilder(id_dtype(max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)))
    for k, pairs in enumerate(corpora):
        tag = tags[k] if k < len(tags) else None
        builder.add(encode_chunk(tokenizer, pairs, tag_id=tag, drop_identical=drop_identical), corpus=k)
    return builder.store(), builder.counts


@dataclass
class Selection:
    """The pairs that train: their indices into the store and how many each length filter dropped."""

    index: np.ndarray  # (M,) int32 (int64 past 2**31 pairs), ascending
    too_long: int
    bad_ratio: int


def select(
    lengths: np.ndarray, max_len: int, max_len_ratio: float = 0.0, *, split: str = "train"
) -> Selection:
    """Pairs with 1..max_len subwords on each side and, if ``max_len_ratio``, sides of similar length.

    lengths: (N, 2) source and target lengths.
    """
    if not len(lengths):
        raise DataError(
            f"the {split} split has no sentence pair left after the text filters "
            "(empty sides, data.drop_identical)"
        )
    src, tgt = lengths[:, 0], lengths[:, 1]
    fits = (src > 0) & (tgt > 0) & (src <= max_len) & (tgt <= max_len)  # (N,)
    keep = fits
    if max_len_ratio:
        longer, shorter = np.maximum(src, tgt), np.minimum(src, tgt)
        keep = fits & (longer <= max_len_ratio * shorter)
    index = np.flatnonzero(keep)
    if len(lengths) < 2**31:  # half the memory of int64 on large corpora
        index = index.astype(np.int32)
    if not len(index):
        raise DataError(
            f"every {split} pair is filtered out (data.max_len={max_len}, max_len_ratio={max_len_ratio})"
        )
    n_fit = int(fits.sum())
    return Selection(index, len(lengths) - n_fit, n_fit - len(index))


def dropped_note(split: str, counts: Counts, sel: Selection, max_len: int, max_len_ratio: float) -> str:
    """One sentence for the log: every filter and what it dropped (empty if nothing was)."""
    parts = []
    if counts.empty or sel.too_long:
        parts.append(
            f"{counts.empty} {split} pair(s) with an empty side and {sel.too_long} longer than {max_len} "
            "subwords (data.max_len, model.max_len)"
        )
    if counts.identical:
        parts.append(f"{counts.identical} whose source equals the target (data.drop_identical)")
    if sel.bad_ratio:
        parts.append(
            f"{sel.bad_ratio} whose sides' lengths differ by more than {max_len_ratio}x (data.max_len_ratio)"
        )
    return "skipped " + "; ".join(parts) if parts else ""


def tokenizer_sample(n: int, max_pairs: int, seed: int) -> np.ndarray | None:
    """Which of ``n`` pairs train the tokenizer: None = all of them, else a seeded sorted sample."""
    if n <= max_pairs:
        return None
    return np.sort(np.random.default_rng([seed, n]).choice(n, size=max_pairs, replace=False))
