"""Subword sampling (Kudo, 2018), ``tokenizer.sample_nbest`` and ``tokenizer.sample_alpha``: each epoch
draws every training sentence's segmentation from its n best under a unigram model. This module is its
one home: what it needs (a task that re-segments its examples, a unigram tokenizer, text rather than
prepared token ids, no ``data.mix``), the text it keeps, each epoch's draw, and the run header's line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError
from . import bidirectional
from .encoded import Encoded
from .pairs import text_filter
from .store import Pairs
from .tokenizer import SubwordTokenizer

if TYPE_CHECKING:
    from ..experiment import Experiment

Pair = tuple[list[int], list[int]]  # (source ids, target ids) of one training example
NOT_PREPARED = "tokenizer.sample_nbest re-segments the text each epoch; prepared data holds token ids"


@dataclass
class EncodedCorpus:
    """Training pairs kept for subword sampling: their best segmentation and their text, in one order."""

    examples: Sequence[Pair]  # (source ids, target ids), no bos/eos
    n_empty: int  # pairs dropped because a side was empty
    n_too_long: int  # pairs dropped by the length filters
    pairs: list[tuple[str, str]]  # the kept examples' text, in the same order


class SampledPairs(Pairs):
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

    def pair(self, i: int) -> Pair:
        s_text, t_text = self.corpus.pairs[i]
        (s,) = self.tokenizer.sample_batch(
            [s_text], "src", nbest=self.nbest, alpha=self.alpha, u=self.u[i, :1]
        )
        (t,) = self.tokenizer.sample_batch(
            [t_text], "tgt", nbest=self.nbest, alpha=self.alpha, u=self.u[i, 1:]
        )
        return (s, t) if len(s) <= self.max_len and len(t) <= self.max_len else self.corpus.examples[i]


def check(cfg: Experiment, resegments: bool, arch: str) -> None:
    """Before any data is read: what the config and the task rule out."""
    if not cfg.tokenizer.sample_nbest:
        return
    if not resegments:
        raise ConfigError(
            f"tokenizer.sample_nbest: subword sampling is for translation models; model.arch {arch!r} "
            "trains without it (set tokenizer.sample_nbest=0)"
        )
    if cfg.data.mix:
        raise ConfigError("data.mix with tokenizer.sample_nbest: subword sampling would drop the tags")
    if cfg.data.prepared:
        raise ConfigError(
            f"{NOT_PREPARED}: train from the corpus (data.prepared='') or set tokenizer.sample_nbest=0"
        )


def check_prepare(cfg: Experiment) -> None:
    """``attnkit prepare`` writes token ids: nothing to re-segment."""
    if cfg.tokenizer.sample_nbest:
        raise ConfigError(NOT_PREPARED)


def check_tokenizer(cfg: Experiment, tokenizer: SubwordTokenizer) -> None:
    """With the run's tokenizer (a checkpoint's may be BPE): only unigram models give n-best lists."""
    if cfg.tokenizer.sample_nbest and not tokenizer.can_sample():
        raise ConfigError(
            "tokenizer.sample_nbest: this run's SentencePiece model gives no n-best segmentations "
            "(only unigram models do); set tokenizer.sample_nbest=0"
        )


def keep_text(
    cfg: Experiment, encoded: Encoded, records: list, drop_identical: bool, n_empty: int, max_len: int
) -> None:
    """Keep the text of ``encoded``'s pairs (``records``: the training pairs it was encoded from), so
    each epoch can re-segment it within ``max_len``."""
    if not cfg.tokenizer.sample_nbest:
        return
    text = text_filter(records, drop_identical)[0]  # the pairs the store holds, in its order
    pairs = bidirectional.forward(encoded.examples)  # the reversed half is a view of the same pairs
    rows = pairs.rows.tolist()  # type: ignore[attr-defined]  # a Subset of the store
    kept = [text[i] for i in rows]
    encoded.corpus = (EncodedCorpus(pairs, n_empty, len(text) - len(kept), kept), max_len)


def draw(cfg: Experiment, encoded: Encoded, tokenizer: SubwordTokenizer, epoch: int) -> Sequence[Pair]:
    """``epoch``'s examples: the kept pairs as that epoch's draw segments them (from the run's seed, the
    epoch and the example's index: see :class:`SampledPairs`), reversed as ``encoded`` is."""
    tk, (corpus, max_len) = cfg.tokenizer, encoded.corpus
    seed = (cfg.train.seed % 2**64, epoch)  # SeedSequence takes non-negative integers
    drawn = SampledPairs(corpus, tokenizer, max_len, nbest=tk.sample_nbest, alpha=tk.sample_alpha, seed=seed)
    return bidirectional.like(encoded, drawn)


def note(cfg: Experiment) -> str | None:
    """The run header's line."""
    if not cfg.tokenizer.sample_nbest:
        return None
    return (
        f"subword sampling: each epoch draws every training sentence's segmentation from its "
        f"{cfg.tokenizer.sample_nbest} best (alpha {cfg.tokenizer.sample_alpha})"
    )
