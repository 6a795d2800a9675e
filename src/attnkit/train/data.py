"""From the experiment's data section to encoded training examples and validation text."""

from __future__ import annotations

from dataclasses import dataclass

from ..data.config import DataConfig
from ..data.corpus import load_corpus
from ..data.readers import Pair, drop_empty
from ..data.tokenizer import SubwordTokenizer
from ..errors import ConfigError, DataError
from .config import TokenizerConfig


def load_pairs(data: DataConfig, which: str) -> list[Pair]:
    """Raw (source, target) sentence pairs of the ``train``, ``valid`` or ``test`` split."""
    spec = data.spec(which)
    if spec.records != "pairs":
        raise ConfigError(
            f"data.corpus = {data.corpus!r} gives {spec.records} records, not translation pairs: "
            "this task needs a parallel corpus (multi30k with src_lang/tgt_lang, files, tsv, hf translation)"
        )
    return load_corpus(spec)


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
