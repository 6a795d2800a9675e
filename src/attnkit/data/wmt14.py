"""WMT14 English-German, the corpus of "Attention Is All You Need" (Sec. 5.1): files and fetching.

Files are plain text, one sentence a line, ``<data_dir>/wmt14_de_en/<split>.<lang>`` for the splits
``train`` (4,508,785 pairs), ``newstest2013`` (3,000: the paper's development set) and
``newstest2014`` (3,003: the paper's test set), and the languages ``de`` and ``en``. A copy made by
hand and a downloaded one look the same.

A missing split is fetched once: ``train`` and ``newstest2013`` stream from the Hugging Face dataset
``wmt14`` (config ``de-en``, splits ``train`` and ``validation``), ``newstest2014`` comes from
sacreBLEU's ``wmt14/full`` en-de test set, the source and reference that sacreBLEU scores against,
so BLEU on it is comparable with published figures. Each split is written line by line to temporary
files beside the final ones and renamed only once its pair count is the published one: an
interrupted or short download never leaves a file that a later run would take for a good copy.
A newline, carriage return or tab inside a sentence is written as a space (one sentence a line).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from attnkit.data.multi30k import resolve_data_dir
from attnkit.data.readers import Pair, read_parallel
from attnkit.errors import DataError

FOLDER = "wmt14_de_en"
LANGS = ("de", "en")
SPLITS = ("train", "newstest2013", "newstest2014")
COUNTS = {"train": 4_508_785, "newstest2013": 3_000, "newstest2014": 3_003}  # pairs per split
HF_DATASET = "wmt14"
HF_CONFIG = "de-en"
HF_SPLITS = {"train": "train", "newstest2013": "validation"}
SACREBLEU_TEST_SET = "wmt14/full"

Rows = Iterable[Mapping[str, str]]  # one {"de": ..., "en": ...} per pair


def check_split_langs(split: str, src_lang: str, tgt_lang: str) -> None:
    """Reject a split or language pair WMT14 En-De does not have, listing the valid ones."""
    check_split(split)
    for side, lang in (("source", src_lang), ("target", tgt_lang)):
        if lang not in LANGS:
            raise DataError(f"unknown WMT14 {side} language {lang!r}; choose one of {', '.join(LANGS)}")
    if src_lang == tgt_lang:
        raise DataError(f"source and target language are both {src_lang!r}; choose two different ones")


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise DataError(f"unknown WMT14 split {split!r}; choose one of {', '.join(SPLITS)}")


def sacrebleu_newstest2014() -> Iterator[dict[str, str]]:
    """newstest2014 as sacreBLEU holds it (``wmt14/full``, en-de), downloaded into ``$SACREBLEU``."""
    import sacrebleu

    try:
        test_set = sacrebleu.DATASETS[SACREBLEU_TEST_SET]
        source = test_set.get_source_file("en-de")
        (reference,) = test_set.get_reference_files("en-de")
    except SystemExit as exc:  # sacreBLEU exits on an SSL error or a bad MD5 of its tarball
        raise DataError(f"sacreBLEU stopped with exit code {exc.code}; its log says why") from None
    with open(source, encoding="utf-8") as en, open(reference, encoding="utf-8") as de:
        for en_line, de_line in zip(en, de, strict=True):
            yield {"en": en_line.rstrip("\n"), "de": de_line.rstrip("\n")}


def wmt14_paths(
    split: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    *,
    hf_dataset: str = HF_DATASET,
    newstest2014: Callable[[], Rows] = sacrebleu_newstest2014,
    counts: Mapping[str, int] = COUNTS,
) -> dict[str, Path]:
    """The local ``<split>.de`` and ``<split>.en`` (lang -> path), fetched first if either is missing.

    Args:
        hf_dataset: where ``train`` and ``newstest2013`` come from: a hub name (read with
            ``streaming=True``) or a folder written by ``DatasetDict.save_to_disk`` (tests).
        newstest2014: returns the newstest2014 rows, ``{"de": ..., "en": ...}`` each.
        counts: split -> the pair count a download must have; tests pass small ones.
    """
    check_split(split)
    root = resolve_data_dir(data_dir)
    paths = {lang: root / FOLDER / f"{split}.{lang}" for lang in LANGS}
    if all(path.is_file() for path in paths.values()):
        return paths
    if not download:
        missing = next(path for path in paths.values() if not path.is_file())
        raise DataError(f"no such file: {missing}. {_where_to_put(root, hf_dataset)}")
    if split in HF_SPLITS:
        source = f"Hugging Face dataset {hf_dataset!r} ({HF_CONFIG}, split {HF_SPLITS[split]!r})"
        rows = _hf_rows(hf_dataset, HF_SPLITS[split])
    else:
        source = f"sacreBLEU {SACREBLEU_TEST_SET} en-de"
        rows = _lazy(newstest2014)
    _write_split(rows, paths, counts[split], source, _where_to_put(root, hf_dataset))
    return paths


def load_wmt14(
    split: str,
    src_lang: str,
    tgt_lang: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
) -> list[Pair]:
    """Aligned (source, target) pairs of one split, e.g. ``("train", "en", "de")`` as in the paper.

    ``train`` is 4.5M pairs in memory; code that can stream reads :func:`wmt14_paths` instead.
    """
    check_split_langs(split, src_lang, tgt_lang)
    paths = wmt14_paths(split, data_dir, download)
    return read_parallel(paths[src_lang], paths[tgt_lang], check_cr=False)  # crawled text: stray CRs


def _lazy(make_rows: Callable[[], Rows]) -> Iterator[Mapping[str, str]]:
    """Call ``make_rows`` when iteration starts, so its errors surface where downloads are caught."""
    yield from make_rows()


def _hf_rows(name_or_path: str, split: str) -> Iterator[Mapping[str, str]]:
    """The ``translation`` column of one split, row by row: never the whole split in memory."""
    try:
        import datasets  # optional: only the download needs it
    except ImportError:
        raise DataError("the 'datasets' package is needed: pip install attnkit[hf]") from None
    if Path(name_or_path).is_dir():  # a local copy (save_to_disk), memory-mapped
        loaded = datasets.load_from_disk(name_or_path)
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise DataError(f"{name_or_path}: no split {split!r}; it has {', '.join(loaded)}")
            loaded = loaded[split]
    else:
        loaded = datasets.load_dataset(name_or_path, HF_CONFIG, split=split, streaming=True)
    for row in loaded:
        yield row["translation"]


def _write_split(rows: Rows, paths: dict[str, Path], expected: int, source: str, where: str) -> None:
    """Write ``rows`` to temp files beside ``paths``; rename them only once ``expected`` pairs arrived.

    Both renames happen after the count check. A run killed between them leaves one file of the
    pair, and a split counts as present only when both are: the next run fetches it again.
    """
    folder = paths["de"].parent
    temps: dict[str, Path] = {}
    try:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for lang, path in paths.items():
                fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=folder)
                os.close(fd)
                temps[lang] = Path(name)
        except OSError as exc:
            raise DataError(f"cannot write to {folder} ({exc.strerror or exc}). {where}") from exc
        n = 0
        try:
            with (
                open(temps["de"], "w", encoding="utf-8", newline="\n") as de,
                open(temps["en"], "w", encoding="utf-8", newline="\n") as en,
            ):
                for n, row in enumerate(rows, start=1):
                    de.write(_one_line(row, "de", n) + "\n")
                    en.write(_one_line(row, "en", n) + "\n")
        # Downloads fail in many ways (network, hub, file system, a library's own errors); each is
        # the same to the user: nothing was saved, and here is where to put the files by hand.
        except Exception as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise DataError(f"download of WMT14 from {source} failed ({reason}). {where}") from exc
        if n != expected:
            raise DataError(
                f"download of WMT14 from {source} gave {n:,} pairs, expected {expected:,}; "
                f"nothing was saved. {where}"
            )
        for lang, path in paths.items():
            os.replace(temps[lang], path)
    finally:
        for temp in temps.values():
            temp.unlink(missing_ok=True)


def _one_line(row: Mapping[str, str], lang: str, number: int) -> str:
    text = row.get(lang) if isinstance(row, Mapping) else None
    if not isinstance(text, str):
        raise DataError(f"pair {number} has no {lang!r} text: {row!r}")
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("\t", " ")


def _where_to_put(root: Path, hf_dataset: str) -> str:
    return (
        f"Put the WMT14 files at {root / FOLDER}/<split>.<lang> (splits: {', '.join(SPLITS)}; "
        f"languages: {', '.join(LANGS)}; train and newstest2013 from the Hugging Face dataset "
        f"{hf_dataset} ({HF_CONFIG}), newstest2014 from sacreBLEU {SACREBLEU_TEST_SET} en-de: "
        f"sacrebleu -t {SACREBLEU_TEST_SET} -l en-de --echo src), or choose another directory with "
        "--data-dir or the ATTNKIT_DATA environment variable."
    )
