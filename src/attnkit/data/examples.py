"""From the experiment's data section to records, encoded training pairs and their tokenizer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
