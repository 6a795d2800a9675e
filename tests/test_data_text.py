"""Monolingual and labelled corpora (for the language model and the classifier): readers and specs.

Every bad input is one DataError naming the file and line (or dataset row).
"""

import gzip

import pytest

from attnkit.data import (
    HFLabelledSpec,
    HFTextSpec,
    LabelledExample,
    LabelledFileSpec,
    TextFileSpec,
    label_set,
    load_corpus,
    read_labelled,
    read_text,
)
from attnkit.errors import DataError


def write(path, data):
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_text_file_one_record_per_line(tmp_path, gz):
    text = "Ein Satz.\n\nEin ganzes Dokument, in einer Zeile.\n"
    path = tmp_path / ("lm.txt.gz" if gz else "lm.txt")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    lines = load_corpus(TextFileSpec(path))
    assert lines == text.split("\n")[:-1]
    assert TextFileSpec(path).records == "text"


def test_text_file_without_text_or_with_bad_bytes(tmp_path):
    blank = write(tmp_path / "blank.txt", "\n  \n")
    with pytest.raises(DataError, match=f"empty corpus: {blank}"):
        read_text(blank)
    bad = write(tmp_path / "bad.txt", b"gut\n\xfcbel\n")
    with pytest.raises(DataError, match=f"{bad}:2: not valid UTF-8"):
        read_text(bad)


def test_labelled_single_texts_and_pairs_with_optional_header(tmp_path):
    single = write(tmp_path / "s.tsv", "pos\tgreat film\nneg\tdull\n")
    assert read_labelled(single) == [LabelledExample("pos", "great film"), LabelledExample("neg", "dull")]
    header = write(tmp_path / "h.tsv", "Label\ttext_a\ttext_b\nyes\tA dog runs.\tAn animal moves.\n")
    (example,) = read_labelled(header)
    assert example == LabelledExample("yes", "A dog runs.", "An animal moves.")
    assert label_set(read_labelled(single)) == ["neg", "pos"]


@pytest.mark.parametrize(
    "content, line, message",
    [
        ("pos\tgood\nno tab here\n", 2, "no tab"),
        ("pos\t \n", 1, "empty text"),
        ("pos\tgood\tother\nneg\tbad\n", 2, "2 fields, but the lines before have 3"),
        ("\tgood\n", 1, "empty label"),
        ("a\tb\tc\td\n", 1, "4 tab-separated fields"),
        ("pos\tgood\n\n", 2, "no tab"),
        (b"pos\tgut\nneg\t\xff\n", 2, "not valid UTF-8"),
        ("label\ttext\npos\ta\tb\n", 2, None),  # after a header, pairs are fine on their own
    ],
    ids=[
        "no-tab",
        "empty-text",
        "mixed-fields",
        "empty-label",
        "too-many",
        "blank-line",
        "not-utf8",
        "header",
    ],
)
def test_labelled_bad_lines_name_file_and_line(tmp_path, content, line, message):
    path = write(tmp_path / "train.tsv", content)
    if message is None:
        assert read_labelled(path) == [LabelledExample("pos", "a", "b")]
        return
    with pytest.raises(DataError, match=f"{path}:{line}: {message}"):
        read_labelled(path)


def test_labelled_unknown_label_outside_the_training_split(tmp_path):
    train = write(tmp_path / "train.tsv", "pos\tgood\nneg\tbad\n")
    valid = write(tmp_path / "valid.tsv", "label\ttext\npos\tfine\nneutral\tmeh\n")
    labels = tuple(label_set(load_corpus(LabelledFileSpec(train))))
    with pytest.raises(DataError, match=rf"{valid}:3: unknown label 'neutral'.*labels: neg, pos"):
        load_corpus(LabelledFileSpec(valid, labels))
    assert len(load_corpus(LabelledFileSpec(valid))) == 2  # no label set given: any label


def test_labelled_empty_file(tmp_path):
    with pytest.raises(DataError, match="empty corpus"):
        read_labelled(write(tmp_path / "e.tsv", "label\ttext\n"))


def test_hf_text_and_labelled(tmp_path):
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])}
    )
    train = datasets.Dataset.from_dict({"sentence": ["great", "awful"], "label": [1, 0]}, features=features)
    valid = datasets.Dataset.from_dict({"sentence": ["fine", ""], "label": ["pos", "neg"]})
    datasets.DatasetDict({"train": train, "validation": valid}).save_to_disk(str(tmp_path / "ds"))
    ds = str(tmp_path / "ds")

    assert load_corpus(HFTextSpec(ds, "train", "sentence")) == ["great", "awful"]
    examples = load_corpus(HFLabelledSpec(ds, "train", "label", "sentence"))
    assert examples == [LabelledExample("pos", "great"), LabelledExample("neg", "awful")]  # ClassLabel names
    with pytest.raises(DataError, match="split 'validation' row 2: empty text"):
        load_corpus(HFLabelledSpec(ds, "validation", "label", "sentence", labels=("neg", "pos")))
    with pytest.raises(DataError, match="split 'validation' row 1: unknown label 'pos'"):
        load_corpus(HFLabelledSpec(ds, "validation", "label", "sentence", labels=("neg",)))
    with pytest.raises(DataError, match="no 'text' column; it has sentence, label"):
        load_corpus(HFTextSpec(ds, "train", "text"))
    with pytest.raises(DataError, match="HFLabelledSpec needs text_field"):
        HFLabelledSpec(ds, "train", "label", "")
