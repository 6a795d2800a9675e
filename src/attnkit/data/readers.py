"""Readers: text files, parallel files, TSV and Hugging Face datasets into plain Python records.

A leaf module: it imports nothing from attnkit but its errors, so every other data module (Multi30k,
the corpus specs) can build on it without an import cycle.

Parallel readers keep every line, empty ones included, so that line N of a source file still pairs
with line N of its target file and an error can name the line a user has to look at. Dropping empty
pairs is a separate, counted step (:func:`drop_empty`) so the trainer can report it. The labelled
reader is strict instead: a classifier example without text is an error naming file and line.
"""

from __future__ import annotations

import gzip
import itertools
import os
import zlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from attnkit.errors import DataError

Pair = tuple[str, str]  # (source sentence, target sentence)
PathLike = str | os.PathLike


@dataclass(frozen=True)
class LabelledExample:
    """One classification example: a label and one text, or two (``text_b``) for a sentence pair."""

    label: str
    text: str
    text_b: str | None = None


def read_lines(path: PathLike, *, check_cr: bool = True) -> list[str]:
    """Lines of a UTF-8 text file, gunzipped if the name ends in ``.gz``, without line endings.

    Lines are split on ``\\n`` only (a trailing ``\\r`` is removed): Unicode line separators such
    as U+2028 can occur inside a sentence and must not shift the alignment.
    """
    return list(iter_lines(path, check_cr=check_cr))


def iter_lines(path: PathLike, *, check_cr: bool = True) -> Iterator[str]:
    """The lines of :func:`read_lines`, one at a time: corpora of millions of lines stream through.

    ``check_cr``: a carriage return inside the first line is an error (:func:`check_line_end`); off
    for WMT14's web-crawled files, read as they were published."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"no such file: {path}")
    if not path.is_file():
        raise DataError(f"not a file: {path}")
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                yield _decode(raw, path, number, check_cr)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataError(f"{path}: corrupt gzip file ({exc})") from exc
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def iter_parallel(src_path: PathLike, tgt_path: PathLike, *, check_cr: bool = True) -> Iterator[Pair]:
    """The pairs of :func:`read_parallel`, one at a time; unequal line counts fail when found."""
    n = 0
    lines = iter_lines(src_path, check_cr=check_cr), iter_lines(tgt_path, check_cr=check_cr)
    for n, pair in enumerate(itertools.zip_longest(*lines), start=1):
        if pair[0] is None or pair[1] is None:
            short = src_path if pair[0] is None else tgt_path
            raise DataError(
                f"line counts differ: {short} ends after {n - 1} lines, the other file goes on; "
                "the files must be aligned line by line"
            )
        yield pair[0], pair[1]
    if n == 0:
        raise DataError(f"empty corpus: {src_path} and {tgt_path} have no lines")


def iter_tsv(path: PathLike) -> Iterator[Pair]:
    """The pairs of :func:`read_tsv`, one at a time."""
    n = 0
    for n, line in enumerate(iter_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataError(
                f"{path}:{n}: expected 2 tab-separated fields (source, target), found {len(fields)}"
            )
        yield fields[0], fields[1]
    if n == 0:
        raise DataError(f"empty corpus: {path} has no lines")


def _decode(raw: bytes, path: Path, number: int, check_cr: bool = True) -> str:
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
    if check_cr and number == 1:
        check_line_end(text, f"{path}:{number}")
    return text


def check_line_end(line: str, where: str) -> None:
    """A carriage return left inside the first line (its ``\n`` and one ``\r`` before it taken off)
    means CR-only line endings: many sentences would read as one. One line naming it, for every
    reader (files and standard input). Only the first line is looked at: CR-only text always shows
    one there, while a crawled corpus may hold a stray CR deep inside a line it means as one."""
    if "\r" in line:
        raise DataError(
            f"{where}: a carriage return (CR) inside the line, at column {line.index(chr(13)) + 1}: "
            "the text has CR-only (old Mac) line endings? convert them to LF, e.g. tr '\\r' '\\n'"
        )


def read_parallel(src_path: PathLike, tgt_path: PathLike, *, check_cr: bool = True) -> list[Pair]:
    """Pairs from two aligned files: line N of ``src_path`` translates line N of ``tgt_path``."""
    src, tgt = read_lines(src_path, check_cr=check_cr), read_lines(tgt_path, check_cr=check_cr)
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


def read_text(path: PathLike) -> list[str]:
    """The lines of a monolingual text file (one sentence or document per line), empty ones kept."""
    lines = read_lines(path)
    if not any(line.strip() for line in lines):
        raise DataError(f"empty corpus: {path} has no text")
    return lines


def read_labelled(path: PathLike, labels: Collection[str] | None = None) -> list[LabelledExample]:
    """Examples from ``label<TAB>text`` or ``label<TAB>text_a<TAB>text_b`` lines.

    A first line whose first field is ``label`` (any case) is a header and is skipped. Every line of
    a file has the same number of fields. ``labels``: the label set (from the training split); a
    label outside it is an error naming file and line. None accepts any label.
    """
    lines = read_lines(path)
    start = 1 if lines and lines[0].split("\t")[0].strip().lower() == "label" else 0
    examples: list[LabelledExample] = []
    n_fields = 0
    for number, line in enumerate(lines[start:], start=start + 1):
        where = f"{path}:{number}"
        fields = line.split("\t")
        if len(fields) == 1:
            raise DataError(f"{where}: no tab; expected label<TAB>text or label<TAB>text_a<TAB>text_b")
        if len(fields) > 3:
            raise DataError(f"{where}: {len(fields)} tab-separated fields; expected 2 or 3")
        if n_fields and len(fields) != n_fields:
            raise DataError(
                f"{where}: {len(fields)} fields, but the lines before have {n_fields}; "
                "a file holds either single texts or text pairs"
            )
        n_fields = len(fields)
        examples.append(
            _labelled(fields[0], fields[1], fields[2] if len(fields) == 3 else None, where, labels)
        )
    if not examples:
        raise DataError(f"empty corpus: {path} has no examples")
    return examples


def _labelled(
    label: str, text: str, text_b: str | None, where: str, labels: Collection[str] | None
) -> LabelledExample:
    label = label.strip()
    if not label:
        raise DataError(f"{where}: empty label")
    if not text.strip() or (text_b is not None and not text_b.strip()):
        raise DataError(f"{where}: empty text")
    if labels is not None and label not in labels:
        raise DataError(
            f"{where}: unknown label {label!r}, not in the training split "
            f"(labels: {', '.join(sorted(labels))})"
        )
    return LabelledExample(label, text, text_b)


def label_set(examples: list[LabelledExample]) -> list[str]:
    """The sorted distinct labels of ``examples``: the classes of a classifier trained on them."""
    return sorted({e.label for e in examples})


def _hf_split(name_or_path: str, split: str, columns: tuple[str, ...]):
    """One split of a Hugging Face dataset, checked to have ``columns``.

    ``name_or_path`` is a local directory written by ``save_to_disk`` (read offline; if it holds a
    single split rather than a ``DatasetDict``, ``split`` is not checked) or a hub name for
    ``datasets.load_dataset``.
    """
    try:
        import datasets  # optional: only these readers need it
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
    for column in columns:
        if column not in loaded.column_names:
            raise DataError(f"{name_or_path}: no {column!r} column; it has {', '.join(loaded.column_names)}")
    if len(loaded) == 0:
        raise DataError(f"empty corpus: {name_or_path} split {split!r} has no rows")
    return loaded


def read_hf_translation(name_or_path: str, split: str, src_lang: str, tgt_lang: str) -> list[Pair]:
    """Pairs from a Hugging Face dataset whose ``translation`` column holds ``{lang: text}``."""
    loaded = _hf_split(name_or_path, split, ("translation",))
    pairs = []
    for number, row in enumerate(loaded["translation"], start=1):
        missing = [lang for lang in (src_lang, tgt_lang) if lang not in row]
        if missing:
            raise DataError(
                f"{name_or_path}: row {number} has no {missing[0]!r} text; languages: {', '.join(row)}"
            )
        pairs.append((row[src_lang], row[tgt_lang]))
    return pairs


def read_hf_text(name_or_path: str, split: str, text_field: str) -> list[str]:
    """The ``text_field`` column of a Hugging Face dataset split: one text per row."""
    loaded = _hf_split(name_or_path, split, (text_field,))
    texts = []
    for number, text in enumerate(loaded[text_field], start=1):
        if not isinstance(text, str):
            raise DataError(f"{name_or_path}: row {number}: {text_field!r} is not text: {text!r}")
        texts.append(text)
    return texts


def read_hf_labelled(
    name_or_path: str,
    split: str,
    label_field: str,
    text_field: str,
    text_b_field: str = "",
    labels: Collection[str] | None = None,
) -> list[LabelledExample]:
    """Examples from a Hugging Face dataset split; a ``ClassLabel`` column gives its names."""
    columns = (label_field, text_field, *([text_b_field] if text_b_field else []))
    loaded = _hf_split(name_or_path, split, columns)
    names = getattr(loaded.features[label_field], "names", None)  # ClassLabel: int -> name
    text_b = loaded[text_b_field] if text_b_field else [None] * len(loaded)
    examples = []
    for number, (label, text, second) in enumerate(
        zip(loaded[label_field], loaded[text_field], text_b, strict=True), start=1
    ):
        where = f"{name_or_path} split {split!r} row {number}"
        if not isinstance(text, str) or (second is not None and not isinstance(second, str)):
            raise DataError(f"{where}: the text is not a string")
        label = names[label] if names is not None and isinstance(label, int) and label >= 0 else str(label)
        examples.append(_labelled(label, text, second, where, labels))
    return examples


def drop_empty(pairs: list[Pair]) -> tuple[list[Pair], int]:
    """Pairs with text on both sides, and how many were dropped (an empty side trains nothing)."""
    kept = [(src, tgt) for src, tgt in pairs if src.strip() and tgt.strip()]
    return kept, len(pairs) - len(kept)
