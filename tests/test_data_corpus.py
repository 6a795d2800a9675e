"""Corpus readers and specs: alignment kept, and every bad input named by file (and line)."""

import gzip

import pytest

from attnkit.data import (
    HFTranslationSpec,
    Multi30kSpec,
    ParallelFilesSpec,
    TsvSpec,
    drop_empty,
    load_corpus,
    read_hf_translation,
    read_lines,
    read_parallel,
    read_tsv,
)
from attnkit.errors import DataError


def write(path, text, *, gz=False):
    data = text.encode("utf-8") if isinstance(text, str) else text
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("name, gz", [("a.txt", False), ("a.txt.gz", True)])
def test_read_lines_round_trip_plain_and_gzip(tmp_path, name, gz):
    text = "Zwei Männer.\r\nein\u2028Satz\n\nletzte Zeile ohne Umbruch"
    path = write(tmp_path / name, text, gz=gz)
    # \r\n is one line ending; U+2028 is text, not a line break; the empty line stays.
    assert read_lines(path) == ["Zwei Männer.", "ein\u2028Satz", "", "letzte Zeile ohne Umbruch"]


def test_read_lines_keeps_empty_lines_and_trailing_newline_adds_none(tmp_path):
    path = write(tmp_path / "a.txt", "a\n\n\nb\n")
    assert read_lines(path) == ["a", "", "", "b"]
    assert read_lines(write(tmp_path / "empty.txt", "")) == []


def test_missing_file(tmp_path):
    path = tmp_path / "nope.de"
    with pytest.raises(DataError, match=f"no such file: {path}"):
        read_lines(path)


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = write(tmp_path / "bad.de.gz", b"gut\nauch gut\nschl\xffecht\n", gz=True)
    with pytest.raises(DataError, match=rf"{path}:3: not valid UTF-8 \(byte 0xff at column 5\)"):
        read_lines(path)


def test_corrupt_gzip(tmp_path):
    good = gzip.compress(b"eine Zeile\n" * 100)
    truncated = write(tmp_path / "cut.gz", good[: len(good) // 2])
    not_gzip = write(tmp_path / "plain.gz", "plain text\n")
    for path in (truncated, not_gzip):
        with pytest.raises(DataError, match=f"{path}: corrupt gzip"):
            read_lines(path)


def test_read_parallel_pairs_line_by_line(tmp_path):
    src = write(tmp_path / "x.de", "eins\n\ndrei\n")
    tgt = write(tmp_path / "x.en.gz", "one\ntwo\n\n", gz=True)
    pairs = read_parallel(src, tgt)
    assert pairs == [("eins", "one"), ("", "two"), ("drei", "")]


def test_drop_empty_counts_pairs_with_an_empty_side(tmp_path):
    pairs = [("a", "b"), ("", "two"), ("drei", "  "), ("\t", ""), ("c", "d")]
    kept, dropped = drop_empty(pairs)
    assert kept == [("a", "b"), ("c", "d")]
    assert dropped == 3
    assert drop_empty([("a", "b")]) == ([("a", "b")], 0)


def test_mismatched_line_counts_name_both_files_and_counts(tmp_path):
    src = write(tmp_path / "train.de", "a\nb\nc\n")
    tgt = write(tmp_path / "train.en", "a\nb\n")
    with pytest.raises(DataError) as info:
        read_parallel(src, tgt)
    message = str(info.value)
    assert f"{src} has 3 lines" in message
    assert f"{tgt} has 2" in message


def test_empty_corpus(tmp_path):
    src = write(tmp_path / "e.de", "")
    tgt = write(tmp_path / "e.en", "")
    with pytest.raises(DataError, match="empty corpus"):
        read_parallel(src, tgt)
    with pytest.raises(DataError, match="empty corpus"):
        read_tsv(write(tmp_path / "e.tsv", ""))


def test_read_tsv(tmp_path):
    path = write(tmp_path / "p.tsv", "Hallo\tHello\n\t\nja\tyes\n")
    assert read_tsv(path) == [("Hallo", "Hello"), ("", ""), ("ja", "yes")]


@pytest.mark.parametrize("bad_line, fields", [("nur eine Spalte", 1), ("a\tb\tc", 3)])
def test_tsv_malformed_line_names_file_and_line(tmp_path, bad_line, fields):
    path = write(tmp_path / "p.tsv", f"Hallo\tHello\n{bad_line}\n")
    with pytest.raises(DataError, match=rf"{path}:2: expected 2 tab-separated fields.*found {fields}"):
        read_tsv(path)


def test_hf_translation_from_saved_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [{"de": "Hallo", "en": "Hello"}, {"de": "ja", "en": "yes"}]
    single = tmp_path / "single"
    datasets.Dataset.from_dict({"translation": rows}).save_to_disk(str(single))
    assert read_hf_translation(str(single), "train", "de", "en") == [("Hallo", "Hello"), ("ja", "yes")]
    assert read_hf_translation(str(single), "train", "en", "de")[0] == ("Hello", "Hallo")

    split_dict = tmp_path / "dict"
    datasets.DatasetDict({"validation": datasets.Dataset.from_dict({"translation": rows[:1]})}).save_to_disk(
        str(split_dict)
    )
    spec = HFTranslationSpec(str(split_dict), "validation", "de", "en")
    assert load_corpus(spec) == [("Hallo", "Hello")]
    with pytest.raises(DataError, match="no split 'test'; it has validation"):
        read_hf_translation(str(split_dict), "test", "de", "en")
    with pytest.raises(DataError, match="row 1 has no 'fr' text"):
        read_hf_translation(str(single), "train", "de", "fr")


def test_hf_without_datasets_package_says_how_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(DataError, match=r"pip install attnkit\[hf\]"):
        read_hf_translation("some/dataset", "train", "de", "en")


def test_load_corpus_from_files_and_tsv(tmp_path):
    src = write(tmp_path / "x.de", "eins\nzwei\n")
    tgt = write(tmp_path / "x.en", "one\ntwo\n")
    tsv = write(tmp_path / "x.tsv", "eins\tone\nzwei\ttwo\n")
    expected = [("eins", "one"), ("zwei", "two")]
    assert load_corpus(ParallelFilesSpec(src, tgt)) == expected
    assert load_corpus(TsvSpec(tsv)) == expected


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ParallelFilesSpec("a.de", ""), "ParallelFilesSpec needs tgt"),
        (lambda: TsvSpec(""), "TsvSpec needs path"),
        (lambda: Multi30kSpec("train", "de", ""), "Multi30kSpec needs tgt_lang"),
        (lambda: Multi30kSpec("dev", "de", "en"), "train, val, test_2016"),
        (lambda: Multi30kSpec("train", "es", "en"), "de, en, fr, cs"),
        (lambda: Multi30kSpec("train", "de", "de"), "both 'de'"),
        (lambda: HFTranslationSpec("x", "train", "en", "en"), "both 'en'"),
        (lambda: HFTranslationSpec("", "train", "de", "en"), "HFTranslationSpec needs dataset"),
    ],
)
def test_corpus_spec_is_validated(make, message):
    with pytest.raises(DataError, match=message):
        make()
