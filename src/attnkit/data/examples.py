"""From the experiment's data section to records, encoded training pairs and their tokenizer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from ..errors import ConfigError, DataError
from .config import DataConfig
from .corpus import load_corpus
from .pairs import tokenizer_sample
from .readers import drop_empty
from .tokenizer import SubwordTokenizer

if TYPE_CHECKING:
    from .tokenizer_config import TokenizerConfig

Pair = tuple[list[int], list[int]]  # (source ids, target ids) of one training example

# What each kind of record needs in the data section, for the error that names the fix.
NEEDS = {
    "pairs": "a parallel corpus (multi30k with src_lang/tgt_lang, files, tsv, hf with src_lang/tgt_lang)",
    "text": "a text corpus (multi30k with data.lang, text, hf with data.text_field)",
    "labelled": "a labelled corpus (tsv or labelled: label<TAB>text lines, langid, hf with data.label_field)",
}


def load_records(data: DataConfig, which: str, records: str, *, labels: Sequence[str] = ()) -> list:
    """The raw records of the ``train``, ``valid`` or ``test`` split, of the kind a task reads.

    records: "pairs" (translation), "text" (a language model) or "labelled" (a classifier; ``labels``
    is the training split's label set, so an unknown label elsewhere is an error naming its line).
    The first ``data.max_train_pairs`` / ``max_valid_pairs`` records are kept (0 = all).
    """
    spec = data.spec(which, labels=labels, records=records)
    if spec.records != records:
        raise ConfigError(
            f"data.corpus = {data.corpus!r} gives {spec.records} records here; "
            f"this model needs {NEEDS[records]}"
        )
    limit = {"train": data.max_train_pairs, "valid": data.max_valid_pairs}.get(which, 0)
    loaded: list[Any] = load_corpus(spec)  # pairs, texts or labelled examples, as records says
    return loaded[: limit or None]


@dataclass
class EncodedCorpus:
    """Training pairs kept for subword sampling: their best segmentation and their text, in one order."""

    examples: Sequence[Pair]  # (source ids, target ids), no bos/eos
    n_empty: int  # pairs dropped because a side was empty
    n_too_long: int  # pairs dropped by the length filters
    pairs: list[tuple[str, str]]  # the kept examples' text, in the same order


class SampledPairs(Sequence[Pair]):
    """``corpus.examples`` as one epoch's subword sampling draws them, each example when it is read.

    Example ``i``'s draw depends on (seed, i) alone (the trainer passes the run's seed and the epoch),
    never on the batch it is read in, the process, the DDP rank or the threads: a resumed run reads
    what the uninterrupted one read, and each rank segments only its own batches.
    A pair whose draw is longer than ``max_len`` on either side keeps its best segmentation.
    """

    def __init__(
        self,
        corpus: EncodedCorpus,
        tokenizer: SubwordTokenizer,
        max_len: int,
        *,
        nbest: int,
        alpha: float,
        seed,
    ):
        self.corpus, self.tokenizer, self.max_len = corpus, tokenizer, max_len
        self.nbest, self.alpha = nbest, alpha
        self.u = np.random.default_rng(seed).random((len(corpus.examples), 2))  # (N, source/target)

    def __len__(self) -> int:
        return len(self.corpus.examples)

    @overload
    def __getitem__(self, i: int) -> Pair: ...
    @overload
    def __getitem__(self, i: slice) -> list[Pair]: ...
    def __getitem__(self, i: int | slice) -> Pair | list[Pair]:
        if isinstance(i, slice):  # Sequence's contract; training reads one example at a time
            return [self[j] for j in range(*i.indices(len(self)))]
        s_text, t_text = self.corpus.pairs[i]
        (s,) = self.tokenizer.sample_batch(
            [s_text], "src", nbest=self.nbest, alpha=self.alpha, u=self.u[i, :1]
        )
        (t,) = self.tokenizer.sample_batch(
            [t_text], "tgt", nbest=self.nbest, alpha=self.alpha, u=self.u[i, 1:]
        )
        return (s, t) if len(s) <= self.max_len and len(t) <= self.max_len else self.corpus.examples[i]


class BidirectionalPairs(Sequence[Pair]):
    """``pairs`` followed by each pair reversed: example ``N + i`` is ``(pairs[i][1], pairs[i][0])``.

    Bidirectional training (Ding et al., 2021) reads target -> source as well as source -> target;
    with one joint vocabulary a reversed pair is an ordinary example. The reversed half is a view,
    so a subword-sampled epoch reverses the same draw.
    """

    def __init__(self, pairs: Sequence[Pair]):
        self.pairs = pairs

    def __len__(self) -> int:
        return 2 * len(self.pairs)

    @overload
    def __getitem__(self, i: int) -> Pair: ...
    @overload
    def __getitem__(self, i: slice) -> list[Pair]: ...
    def __getitem__(self, i: int | slice) -> Pair | list[Pair]:
        if isinstance(i, slice):  # Sequence's contract; training reads one example at a time
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self.pairs)
        if not -2 * n <= i < 2 * n:
            raise IndexError(i)
        i %= 2 * n
        s, t = self.pairs[i % n]
        return (s, t) if i < n else (t, s)


def train_tokenizer(
    pairs: list[tuple[str, str]], cfg: TokenizerConfig, seed: int, *, user_symbols: Sequence[str] = ()
) -> SubwordTokenizer:
    """SentencePiece on both sides of the training pairs (one model when ``cfg.joint``), or the
    existing ``cfg.model``. A corpus larger than ``cfg.max_sentences`` sentences trains it on a
    seeded sample of its pairs (:func:`attnkit.data.pairs.tokenizer_sample`)."""
    if cfg.model:
        return SubwordTokenizer.from_files(cfg.model)
    pairs, _ = drop_empty(pairs)
    pick = tokenizer_sample(len(pairs), cfg.max_sentences // (2 if cfg.joint else 1), seed)
    if pick is not None:
        pairs = [pairs[i] for i in pick.tolist()]
    return train_pair_tokenizer(pairs, cfg, seed, user_symbols)


def train_pair_tokenizer(
    pairs: Sequence[tuple[str, str]], cfg: TokenizerConfig, seed: int, user_symbols: Sequence[str] = ()
) -> SubwordTokenizer:
    """SentencePiece on exactly these (non-empty) pairs."""
    return SubwordTokenizer.train(
        [s for s, _ in pairs],
        [t for _, t in pairs],
        vocab_size=cfg.vocab_size,
        model_type=cfg.model_type,
        joint=cfg.joint,
        character_coverage=cfg.character_coverage,
        seed=seed,
        user_symbols=user_symbols,
    )


def train_text_tokenizer(texts: Sequence[str], cfg: TokenizerConfig, seed: int) -> SubwordTokenizer:
    """SentencePiece on texts of one kind (a language model's, a classifier's): one joint model,
    or the existing ``cfg.model``."""
    if cfg.model:
        return SubwordTokenizer.from_files(cfg.model)
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise DataError("cannot train a tokenizer: the training text is empty")
    pick = tokenizer_sample(len(texts), cfg.max_sentences, seed)
    if pick is not None:
        texts = [texts[i] for i in pick.tolist()]
    return SubwordTokenizer.train(
        texts,
        texts,
        vocab_size=cfg.vocab_size,
        model_type=cfg.model_type,
        character_coverage=cfg.character_coverage,
        seed=seed,
    )
