"""Corpus specs: one typed, validated description of one split, and one loader for all of them.

A spec says where the records of one split come from and what they are:

=====================  =================================  ==========================
spec                   source                             records (``spec.records``)
=====================  =================================  ==========================
``Multi30kSpec``       Multi30k by split name, 2 langs    ``pairs``: (src, tgt)
``Multi30kTextSpec``   Multi30k by split name, 1 lang     ``text``: one str per line
``Multi30kLangIdSpec`` Multi30k captions, label = lang    ``labelled``: LabelledExample
``Wmt14Spec``          WMT14 En-De by split name          ``pairs``
``ParallelFilesSpec``  two aligned text files             ``pairs``
``TsvSpec``            one ``src<TAB>tgt`` file           ``pairs``
``HFTranslationSpec``  HF dataset, ``translation`` field  ``pairs``
``TextFileSpec``       one text file (plain or .gz)       ``text``
``HFTextSpec``         HF dataset, a text field           ``text``
``LabelledFileSpec``   ``label<TAB>text[<TAB>text_b]``    ``labelled``: LabelledExample
``HFLabelledSpec``     HF dataset, label + text fields    ``labelled``
=====================  =================================  ==========================

``load_corpus(spec)`` reads any of them. The experiment config builds them
(``DataConfig.spec("train")``); tests and scripts can build them directly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar

from attnkit.data import multi30k, readers, wmt14
from attnkit.data.readers import LabelledExample, Pair
from attnkit.errors import DataError

PathLike = str | os.PathLike


def _require(spec: object, *fields: str) -> None:
    missing = [field for field in fields if not getattr(spec, field)]
    if missing:
        raise DataError(f"a {type(spec).__name__} needs {', '.join(missing)}")


def _two_langs(src_lang: str, tgt_lang: str) -> None:
    if src_lang and src_lang == tgt_lang:
        raise DataError(f"source and target language are both {src_lang!r}; choose two different ones")


@dataclass(frozen=True)
class Multi30kSpec:
    """One Multi30k split as (source, target) pairs, read from ``<data_dir>/multi30k/``."""

    records: ClassVar[str] = "pairs"
    split: str
    src_lang: str
    tgt_lang: str
    data_dir: PathLike | None = None  # None: $ATTNKIT_DATA, else ~/.cache/attnkit
    download: bool = True

    def __post_init__(self) -> None:
        _require(self, "split", "src_lang", "tgt_lang")
        multi30k.check_split_langs(self.split, self.src_lang, self.tgt_lang)

    def load(self) -> list[Pair]:
        return multi30k.load_multi30k(self.split, self.src_lang, self.tgt_lang, self.data_dir, self.download)

    def describe(self) -> str:
        return f"Multi30k {self.split} {self.src_lang}-{self.tgt_lang}"


@dataclass(frozen=True)
class Multi30kTextSpec:
    """One Multi30k split in one language: a monolingual corpus."""

    records: ClassVar[str] = "text"
    split: str
    lang: str
    data_dir: PathLike | None = None
    download: bool = True

    def __post_init__(self) -> None:
        _require(self, "split", "lang")
        multi30k.check_split_lang(self.split, self.lang)

    def load(self) -> list[str]:
        return multi30k.load_multi30k_text(self.split, self.lang, self.data_dir, self.download)

    def describe(self) -> str:
        return f"Multi30k {self.split} {self.lang}"


@dataclass(frozen=True)
class Multi30kLangIdSpec:
    """Language identification on Multi30k: one split's captions in ``langs``, labelled by language."""

    records: ClassVar[str] = "labelled"
    split: str
    langs: tuple[str, ...] = multi30k.LANGS
    first_words: int = 0  # 0 = whole captions
    data_dir: PathLike | None = None
    labels: tuple[str, ...] = ()  # the training split's classes; () accepts any
    download: bool = True

    def __post_init__(self) -> None:
        _require(self, "split", "langs")
        multi30k.check_split_lang(self.split, self.langs[0])
        multi30k.check_langid_langs(self.langs)

    def load(self) -> list[LabelledExample]:
        return multi30k.load_multi30k_langid(
            self.split, self.langs, self.first_words, self.data_dir, self.download, self.labels
        )

    def describe(self) -> str:
        words = f", first {self.first_words} words" if self.first_words else ""
        return f"Multi30k {self.split} language id ({', '.join(self.langs)}{words})"


@dataclass(frozen=True)
class Wmt14Spec:
    """One WMT14 English-German split (the paper's corpus), read from ``<data_dir>/wmt14_de_en/``.

    Splits: ``train``, ``newstest2013`` (validation), ``newstest2014`` (test).
    """

    records: ClassVar[str] = "pairs"
    split: str
    src_lang: str
    tgt_lang: str
    data_dir: PathLike | None = None  # None: $ATTNKIT_DATA, else ~/.cache/attnkit
    download: bool = True

    def __post_init__(self) -> None:
        _require(self, "split", "src_lang", "tgt_lang")
        wmt14.check_split_langs(self.split, self.src_lang, self.tgt_lang)

    def load(self) -> list[Pair]:
        return wmt14.load_wmt14(self.split, self.src_lang, self.tgt_lang, self.data_dir, self.download)

    def paths(self) -> tuple[Path, Path]:
        """The (source, target) files, fetched first if missing: for code that streams them."""
        paths = wmt14.wmt14_paths(self.split, self.data_dir, self.download)
        return paths[self.src_lang], paths[self.tgt_lang]

    def describe(self) -> str:
        return f"WMT14 {self.split} {self.src_lang}-{self.tgt_lang}"


@dataclass(frozen=True)
class ParallelFilesSpec:
    """Two aligned files: line N of ``src`` translates line N of ``tgt``. Langs are labels only."""

    records: ClassVar[str] = "pairs"
    src: PathLike
    tgt: PathLike
    src_lang: str = ""
    tgt_lang: str = ""

    def __post_init__(self) -> None:
        _require(self, "src", "tgt")
        _two_langs(self.src_lang, self.tgt_lang)

    def load(self) -> list[Pair]:
        return readers.read_parallel(self.src, self.tgt)

    def describe(self) -> str:
        return f"{self.src} -> {self.tgt}"


@dataclass(frozen=True)
class TsvSpec:
    """One file with a ``source<TAB>target`` line per pair."""

    records: ClassVar[str] = "pairs"
    path: PathLike
    src_lang: str = ""
    tgt_lang: str = ""

    def __post_init__(self) -> None:
        _require(self, "path")
        _two_langs(self.src_lang, self.tgt_lang)

    def load(self) -> list[Pair]:
        return readers.read_tsv(self.path)

    def describe(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class HFTranslationSpec:
    """A Hugging Face dataset split whose ``translation`` column holds ``{lang: text}``."""

    records: ClassVar[str] = "pairs"
    dataset: str  # a hub name or a folder written by save_to_disk
    split: str
    src_lang: str
    tgt_lang: str

    def __post_init__(self) -> None:
        _require(self, "dataset", "split", "src_lang", "tgt_lang")
        _two_langs(self.src_lang, self.tgt_lang)

    def load(self) -> list[Pair]:
        return readers.read_hf_translation(self.dataset, self.split, self.src_lang, self.tgt_lang)

    def describe(self) -> str:
        return f"{self.dataset} {self.split} {self.src_lang}-{self.tgt_lang}"


@dataclass(frozen=True)
class TextFileSpec:
    """One text file, one sentence or document per line (plain, or gzipped if named ``*.gz``)."""

    records: ClassVar[str] = "text"
    path: PathLike

    def __post_init__(self) -> None:
        _require(self, "path")

    def load(self) -> list[str]:
        return readers.read_text(self.path)

    def describe(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class HFTextSpec:
    """A Hugging Face dataset split, one text per row in ``text_field``."""

    records: ClassVar[str] = "text"
    dataset: str
    split: str
    text_field: str

    def __post_init__(self) -> None:
        _require(self, "dataset", "split", "text_field")

    def load(self) -> list[str]:
        return readers.read_hf_text(self.dataset, self.split, self.text_field)

    def describe(self) -> str:
        return f"{self.dataset} {self.split}"


@dataclass(frozen=True)
class LabelledFileSpec:
    """A ``label<TAB>text`` (or ``label<TAB>text_a<TAB>text_b``) file with an optional header line.

    labels: the label set of the training split; empty accepts any label (the training split itself).
    """

    records: ClassVar[str] = "labelled"
    path: PathLike
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _require(self, "path")

    def load(self) -> list[LabelledExample]:
        return readers.read_labelled(self.path, self.labels or None)

    def describe(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class HFLabelledSpec:
    """A Hugging Face dataset split with a label field, a text field and optionally a second text."""

    records: ClassVar[str] = "labelled"
    dataset: str
    split: str
    label_field: str
    text_field: str
    text_b_field: str = ""
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _require(self, "dataset", "split", "label_field", "text_field")

    def load(self) -> list[LabelledExample]:
        return readers.read_hf_labelled(
            self.dataset,
            self.split,
            self.label_field,
            self.text_field,
            self.text_b_field,
            self.labels or None,
        )

    def describe(self) -> str:
        return f"{self.dataset} {self.split}"


CorpusSpec = (
    Multi30kSpec
    | Multi30kTextSpec
    | Multi30kLangIdSpec
    | Wmt14Spec
    | ParallelFilesSpec
    | TsvSpec
    | HFTranslationSpec
    | TextFileSpec
    | HFTextSpec
    | LabelledFileSpec
    | HFLabelledSpec
)


R = TypeVar("R")  # invariant: load() returns a list, which is invariant in R


class Loadable(Protocol[R]):
    """What every spec above is: ``records`` names the kind of record ``load()`` returns."""

    records: ClassVar[str]

    def load(self) -> list[R]: ...

    def describe(self) -> str: ...


def load_corpus(spec: Loadable[R]) -> list[R]:
    """Every record of ``spec``: pairs, texts or labelled examples, as ``spec.records`` says.

    Parallel pairs keep empty sides (see :func:`attnkit.data.readers.drop_empty`).
    """
    return spec.load()
