"""Data: corpus readers and specs, Multi30k and WMT14, SentencePiece subwords and token-budget batches.

Layers, each importing only the ones before it: ``readers`` (files and datasets into records) ->
``multi30k``, ``wmt14`` (where their files live, downloads) -> ``corpus`` (typed specs, ``load_corpus``).
"""

from attnkit.data.batching import Batch, TokenBatchSampler, collate
from attnkit.data.corpus import (
    CorpusSpec,
    HFLabelledSpec,
    HFTextSpec,
    HFTranslationSpec,
    LabelledFileSpec,
    Multi30kLangIdSpec,
    Multi30kSpec,
    Multi30kTextSpec,
    ParallelFilesSpec,
    TextFileSpec,
    TsvSpec,
    Wmt14Spec,
    load_corpus,
)
from attnkit.data.multi30k import (
    load_multi30k,
    load_multi30k_langid,
    load_multi30k_text,
    multi30k_path,
    resolve_data_dir,
)
from attnkit.data.readers import (
    LabelledExample,
    drop_empty,
    label_set,
    read_hf_labelled,
    read_hf_text,
    read_hf_translation,
    read_labelled,
    read_lines,
    read_parallel,
    read_text,
    read_tsv,
)
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.data.wmt14 import load_wmt14, wmt14_paths

__all__ = [
    "Batch",
    "SubwordTokenizer",
    "TokenBatchSampler",
    "collate",
    "CorpusSpec",
    "HFLabelledSpec",
    "HFTextSpec",
    "HFTranslationSpec",
    "LabelledExample",
    "LabelledFileSpec",
    "Multi30kLangIdSpec",
    "Multi30kSpec",
    "Multi30kTextSpec",
    "ParallelFilesSpec",
    "TextFileSpec",
    "TsvSpec",
    "Wmt14Spec",
    "drop_empty",
    "label_set",
    "load_corpus",
    "load_multi30k",
    "load_multi30k_langid",
    "load_multi30k_text",
    "load_wmt14",
    "multi30k_path",
    "read_hf_labelled",
    "read_hf_text",
    "read_hf_translation",
    "read_labelled",
    "read_lines",
    "read_parallel",
    "read_text",
    "read_tsv",
    "resolve_data_dir",
    "wmt14_paths",
]
