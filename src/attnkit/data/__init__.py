"""Data: reading parallel corpora and fetching Multi30k."""

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

__all__ = [
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
