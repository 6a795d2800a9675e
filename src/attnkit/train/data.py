"""From the experiment's data section to encoded training examples and validation text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..data.config import DataConfig
from ..data.corpus import load_corpus
from ..data.readers import drop_empty
from ..data.tokenizer import SubwordTokenizer
from ..errors import ConfigError, DataError
from .config import TokenizerConfig


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
            f"data.corpus = {data.corpus!r} gives {spec.records} records here; this model needs {NEEDS[records]}"
        )
    limit = {"train": data.max_train_pairs, "valid": data.max_valid_pairs}.get(which, 0)
    return load_corpus(spec)[: limit or None]


@dataclass
class EncodedCorpus:
    examples: list[tuple[list[int], list[int]]]  # (source ids, target ids), no bos/eos
    n_empty: int  # pairs dropped because a side was empty
    n_too_long: int  # pairs dropped because a side had more than data.max_len subwords


def encode_training_pairs(
    pairs: list[tuple[str, str]], tokenizer: SubwordTokenizer, max_len: int, *, split: str = "train"
) -> EncodedCorpus:
    pairs, n_empty = drop_empty(pairs)
    if not pairs:
        raise DataError(f"the {split} corpus has no non-empty sentence pairs")
    src = tokenizer.encode_batch([s for s, _ in pairs], side="src")
    tgt = tokenizer.encode_batch([t for _, t in pairs], side="tgt")
    examples = [(s, t) for s, t in zip(src, tgt) if 0 < len(s) <= max_len and 0 < len(t) <= max_len]
    if not examples:
        raise DataError(f"every {split} pair is longer than data.max_len={max_len} subword tokens")
    return EncodedCorpus(examples, n_empty, len(pairs) - len(examples))


def train_tokenizer(pairs: list[tuple[str, str]], cfg: TokenizerConfig, seed: int) -> SubwordTokenizer:
    pairs, _ = drop_empty(pairs)
    return SubwordTokenizer.train(
        [s for s, _ in pairs],
        [t for _, t in pairs],
        vocab_size=cfg.vocab_size,
        model_type=cfg.model_type,
        joint=cfg.joint,
        character_coverage=cfg.character_coverage,
        seed=seed,
    )
