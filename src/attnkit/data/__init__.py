"""Data: parallel corpora, Multi30k, SentencePiece subwords and token-budget batches."""

from attnkit.data.batching import Batch, TokenBatchSampler, collate
from attnkit.data.corpus import (
    CorpusSpec,
    drop_empty,
    load_corpus,
    read_hf_translation,
    read_lines,
    read_parallel,
    read_tsv,
)
from attnkit.data.multi30k import load_multi30k, multi30k_path, resolve_data_dir
from attnkit.data.tokenizer import SubwordTokenizer

__all__ = [
    "Batch",
    "SubwordTokenizer",
    "TokenBatchSampler",
    "collate",
    "CorpusSpec",
    "drop_empty",
    "load_corpus",
    "load_multi30k",
    "multi30k_path",
    "read_hf_translation",
    "read_lines",
    "read_parallel",
    "read_tsv",
    "resolve_data_dir",
]
