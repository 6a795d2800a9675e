"""From the experiment's data section to encoded training examples and validation text."""

from __future__ import annotations

from dataclasses import dataclass

from ..data.corpus import drop_empty, read_hf_translation, read_parallel, read_tsv
from ..data.multi30k import load_multi30k
from ..data.tokenizer import SubwordTokenizer
from ..errors import ConfigError, DataError
from .config import DataConfig, TokenizerConfig


def load_pairs(data: DataConfig, which: str) -> list[tuple[str, str]]:
    """Raw (source, target) sentence pairs of the ``train``, ``valid`` or ``test`` part."""
    spec = getattr(data, which)
    if data.corpus == "multi30k":
        return load_multi30k(spec, data.src_lang, data.tgt_lang, data_dir=data.data_dir or None)
    if data.corpus == "files":
        paths = [p.strip() for p in spec.split(",")]
        if len(paths) != 2 or not all(paths):
            raise ConfigError(f"data.{which} = {spec!r}: for corpus 'files' give 'SOURCE_PATH,TARGET_PATH'")
        return read_parallel(*paths)
    if data.corpus == "hf":
        return read_hf_translation(data.dataset, spec, data.src_lang, data.tgt_lang)
    return read_tsv(spec)


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
