"""Reading parallel corpora into (source, target) sentence pairs.

Readers keep every line, empty ones included, so that line N of a source file still pairs with
line N of its target file and an error can name the line a user has to look at. Dropping empty
pairs is a separate, counted step (:func:`drop_empty`) so the trainer can report it.
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from attnkit.data import multi30k
from attnkit.errors import DataError

Pair = tuple[str, str]
PathLike = str | os.PathLike


def read_lines(path: PathLike) -> list[str]:
    """Lines of a UTF-8 text file, gunzipped if the name ends in ``.gz``, without line endings.

    Lines are split on ``\\n`` only (a trailing ``\\r`` is removed): Unicode line separators such
    as U+2028 can occur inside a sentence and must not shift the alignment.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"no such file: {path}")
    if not path.is_file():
        raise DataError(f"not a file: {path}")
    opener = gzip.open if path.name.endswith(".gz") else open
    lines = []
    try:
        with opener(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                lines.append(_decode(raw, path, number))
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataError(f"{path}: corrupt gzip file ({exc})") from exc
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    return lines


def _decode(raw: bytes, path: Path, number: int) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path}:{number}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        ) from None
    if text.endswith("\n"):
        text = text[:-1]
    if text.endswith("\r"):
        text = text[:-1]
    if number == 1 and text.startswith("\ufeff"):  # a byte-order mark is not part of the sentence
        text = text[1:]
    return text


def read_parallel(src_path: PathLike, tgt_path: PathLike) -> list[Pair]:
    """Pairs from two aligned files: line N of ``src_path`` translates line N of ``tgt_path``."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(
            f"line counts differ: {src_path} has {len(src)} lines, {tgt_path} has {len(tgt)}; "
            "the files must be aligned line by line"
        )
    if not src:
        raise DataError(f"empty corpus: {src_path} and {tgt_path} have no lines")
    return list(zip(src, tgt, strict=True))


def read_tsv(path: PathLike) -> list[Pair]:
    """Pairs from one file with a ``source<TAB>target`` line per pair."""
    pairs = []
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataError(
                f"{path}:{number}: expected 2 tab-separated fields (source, target), found {len(fields)}"
            )
        pairs.append((fields[0], fields[1]))
    if not pairs:
        raise DataError(f"empty corpus: {path} has no lines")
    return pairs


def read_hf_translation(name_or_path: str, split: str, src_lang: str, tgt_lang: str) -> list[Pair]:
    """Pairs from a Hugging Face dataset whose ``translation`` column holds ``{lang: text}``.

    ``name_or_path`` is a local directory written by ``save_to_disk`` (read offline; if it holds a
    single split rather than a ``DatasetDict``, ``split`` is not checked) or a hub name for
    ``datasets.load_dataset``.
    """
    try:
        import datasets  # optional: only this reader needs it
    except ImportError as exc:
        raise DataError(
            f"reading Hugging Face dataset {name_or_path!r} needs the 'datasets' package: "
            "pip install attnkit[hf]"
        ) from exc
    try:
        if Path(name_or_path).is_dir():
            loaded = datasets.load_from_disk(name_or_path)
        else:
            loaded = datasets.load_dataset(name_or_path, split=split)
    except (OSError, ValueError) as exc:  # not found, no network, unknown split, bad files
        raise DataError(f"cannot load Hugging Face dataset {name_or_path!r} ({exc})") from exc
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise DataError(f"{name_or_path}: no split {split!r}; it has {', '.join(loaded)}")
        loaded = loaded[split]
    if "translation" not in loaded.column_names:
        raise DataError(f"{name_or_path}: no 'translation' column; it has {', '.join(loaded.column_names)}")
    pairs = []
    for number, row in enumerate(loaded["translation"], start=1):
        missing = [lang for lang in (src_lang, tgt_lang) if lang not in row]
        if missing:
            raise DataError(
                f"{name_or_path}: row {number} has no {missing[0]!r} text; languages: {', '.join(row)}"
            )
        pairs.append((row[src_lang], row[tgt_lang]))
    if not pairs:
        raise DataError(f"empty corpus: {name_or_path} split {split!r} has no rows")
    return pairs


def drop_empty(pairs: list[Pair]) -> tuple[list[Pair], int]:
    """Pairs with text on both sides, and how many were dropped (an empty side trains nothing)."""
    kept = [(src, tgt) for src, tgt in pairs if src.strip() and tgt.strip()]
    return kept, len(pairs) - len(kept)


@dataclass
class CorpusSpec:
    """One split of a corpus, from exactly one source.

    - Multi30k: ``name="multi30k"`` with ``split``, ``src_lang``, ``tgt_lang`` (and ``data_dir``,
      ``download``);
    - two aligned files: ``src`` and ``tgt``;
    - one tab-separated file: ``tsv``;
    - a Hugging Face dataset: ``hf`` with ``split``, ``src_lang``, ``tgt_lang``.
    """

    name: str | None = None
    split: str | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    data_dir: PathLike | None = None
    download: bool = True
    src: PathLike | None = None
    tgt: PathLike | None = None
    tsv: PathLike | None = None
    hf: str | None = None

    def __post_init__(self) -> None:
        given = [
            kind
            for kind, value in (
                ("name", self.name),
                ("src/tgt", self.src or self.tgt),
                ("tsv", self.tsv),
                ("hf", self.hf),
            )
            if value
        ]
        if len(given) != 1:
            raise DataError(
                "a corpus needs exactly one of name (multi30k), src and tgt, tsv, hf; "
                f"got {', '.join(given) if given else 'none'}"
            )
        if self.src_lang is not None and self.src_lang == self.tgt_lang:
            raise DataError(
                f"source and target language are both {self.src_lang!r}; choose two different ones"
            )
        if self.name:
            if self.name != "multi30k":
                raise DataError(f"unknown corpus name {self.name!r}; known: multi30k")
            self._require("split", "src_lang", "tgt_lang", kind="multi30k")
            multi30k.check_split_langs(self.split, self.src_lang, self.tgt_lang)
        elif self.hf:
            self._require("split", "src_lang", "tgt_lang", kind="hf")
        elif self.src or self.tgt:
            self._require("src", "tgt", kind="parallel files")

    def _require(self, *fields: str, kind: str) -> None:
        missing = [field for field in fields if not getattr(self, field)]
        if missing:
            raise DataError(f"a {kind} corpus needs {', '.join(missing)}")


def load_corpus(spec: CorpusSpec) -> list[Pair]:
    """All (source, target) pairs of ``spec``, empty ones included (see :func:`drop_empty`)."""
    if spec.name:
        return multi30k.load_multi30k(spec.split, spec.src_lang, spec.tgt_lang, spec.data_dir, spec.download)
    if spec.hf:
        return read_hf_translation(spec.hf, spec.split, spec.src_lang, spec.tgt_lang)
    if spec.tsv:
        return read_tsv(spec.tsv)
    return read_parallel(spec.src, spec.tgt)
