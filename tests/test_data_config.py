"""The data section: each corpus kind gives one typed spec per split, and rejects fields it does not read.

Also the test suite's own data fixture: a missing data folder skips, except in CI where it fails.
"""

from pathlib import Path

import pytest

from attnkit.data import (
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
)
from attnkit.data.config import DataConfig, upgrade
from attnkit.errors import ConfigError
from attnkit.train.config import ExperimentConfig
from conftest import find_data_dir, require_multi30k


@pytest.mark.parametrize(
    "fields, spec_type, records",
    [
        ({}, Multi30kSpec, "pairs"),
        ({"lang": "fr"}, Multi30kTextSpec, "text"),
        ({"corpus": "hf", "dataset": "d", "valid_split": "validation"}, HFTranslationSpec, "pairs"),
        ({"corpus": "hf", "dataset": "d", "text_field": "t"}, HFTextSpec, "text"),
        ({"corpus": "hf", "dataset": "d", "text_field": "t", "label_field": "l"}, HFLabelledSpec, "labelled"),
        (
            {"corpus": "files", "train_files": ["a.de", "a.en"], "valid_files": ["b.de", "b.en"]},
            ParallelFilesSpec,
            "pairs",
        ),
        ({"corpus": "tsv", "train_files": ["a.tsv"], "valid_files": "b.tsv"}, TsvSpec, "pairs"),
        ({"corpus": "text", "train_files": ["a.txt.gz"], "valid_files": ["b.txt"]}, TextFileSpec, "text"),
        (
            {"corpus": "labelled", "train_files": ["a.tsv"], "valid_files": ["b.tsv"]},
            LabelledFileSpec,
            "labelled",
        ),
        ({"corpus": "langid", "langs": ["de", "en"], "first_words": 3}, Multi30kLangIdSpec, "labelled"),
    ],
)
def test_each_corpus_kind_gives_one_typed_spec_per_split(fields, spec_type, records):
    data = DataConfig.from_dict(fields)
    train, valid = data.spec("train"), data.spec("valid")
    assert type(train) is type(valid) is spec_type
    assert data.records == records == train.records
    assert train != valid  # each split reads its own split name or files
    assert DataConfig.from_dict(data.to_dict()) == data  # what a checkpoint stores rebuilds the same


def test_a_tsv_file_is_labelled_for_a_reader_that_asks():
    data = DataConfig.from_dict({"corpus": "tsv", "train_files": ["a.tsv"], "valid_files": ["b.tsv"]})
    assert type(data.spec("train")) is TsvSpec
    assert data.spec("valid", labels=["x", "y"], records="labelled") == LabelledFileSpec("b.tsv", ("x", "y"))


def test_spec_carries_the_training_labels_and_the_data_dir():
    data = DataConfig.from_dict({"corpus": "labelled", "train_files": ["a.tsv"], "valid_files": ["b.tsv"]})
    assert data.spec("valid", labels=["neg", "pos"]).labels == ("neg", "pos")
    assert DataConfig(data_dir="/d").spec("test") == Multi30kSpec("test_2016_flickr", "de", "en", "/d")


def test_a_file_corpus_without_test_files_has_no_test_split():
    data = DataConfig.from_dict({"corpus": "text", "train_files": ["a.txt"], "valid_files": ["b.txt"]})
    assert not data.has_split("test") and DataConfig().has_split("test")
    with pytest.raises(ConfigError, match="data.test_files is empty: corpus 'text' has no test split"):
        data.spec("test")


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"corpus": "wmt"},
            "data.corpus = 'wmt': must be one of multi30k, langid, hf, files, tsv, text, labelled",
        ),
        ({"corpus": "langid", "langs": ["de", "xx"]}, "unknown Multi30k language 'xx'"),
        ({"corpus": "langid", "langs": ["de"]}, "2 or more different languages"),
        ({"corpus": "langid", "first_words": -1}, "data.first_words = -1: must be >= 0"),
        ({"corpus": "langid", "lang": "de"}, "data.lang = 'de': not used by corpus 'langid'"),
        ({"valid": "val"}, "data.valid is no longer a key: use data.valid_split"),
        (
            {"corpus": "text", "train_files": ["a"], "valid_files": ["b"], "data_dir": "/d"},
            "data.data_dir = '/d': not used by corpus 'text'",
        ),
        (
            {"corpus": "hf", "dataset": "d", "text_field": "t", "tgt_lang": "fr"},
            "data.tgt_lang = 'fr': not used with data.text_field",
        ),
        (
            {"corpus": "hf", "dataset": "d", "label_field": "l"},
            "data.label_field = 'l': needs data.text_field",
        ),
        ({"corpus": "files", "train_files": ["a", "b", "c"], "valid_files": ["a", "b"]}, "[SOURCE, TARGET]"),
        (
            {"corpus": "text", "train_files": ["a"], "valid_files": ["b"], "test_files": ["c", "d"]},
            "data.test_files = ['c', 'd']: corpus 'text' needs [PATH]",
        ),
        ({"train_split": "train", "src_lang": "de", "tgt_lang": "de"}, "both 'de'"),
        ({"lang": "xx"}, "unknown Multi30k language 'xx'"),
        ({"valid_files": [""]}, "data.valid_files must be a list of file paths"),
    ],
)
def test_bad_data_sections_name_the_key(fields, message):
    with pytest.raises(ConfigError) as info:
        DataConfig.from_dict(fields)
    assert message in str(info.value)


def test_older_data_sections_are_translated_when_read_from_a_checkpoint():
    old = {
        "corpus": "files",
        "dataset": "",
        "src_lang": "de",
        "tgt_lang": "en",
        "data_dir": "/d",
        "train": "a.de, a.en",
        "valid": "b.de,b.en",
        "test": "",
        "max_len": 64,
    }
    data = DataConfig.from_saved(old)
    assert data.spec("train") == ParallelFilesSpec("a.de", "a.en")
    assert data.valid_files == ["b.de", "b.en"] and not data.has_split("test") and data.max_len == 64
    tsv = upgrade({"corpus": "tsv", "train": "t.tsv", "valid": "v.tsv", "test": "x.tsv"})
    assert tsv["test_files"] == ["x.tsv"]
    current = DataConfig(lang="en").to_dict()
    assert upgrade(current) == current
    experiment = ExperimentConfig.from_saved(
        {"data": {"corpus": "multi30k", "train": "train", "valid": "val", "test": "val"}}
    )
    assert experiment.data.spec("test") == Multi30kSpec("val", "de", "en")
    with pytest.raises(ConfigError, match="no experiment config"):
        ExperimentConfig.from_saved({})


def test_data_fixture_skips_without_data_but_fails_in_ci(tmp_path, monkeypatch):
    with pytest.raises(pytest.skip.Exception, match=str(tmp_path)):
        require_multi30k(tmp_path, ci=False)
    with pytest.raises(pytest.fail.Exception, match=rf"{tmp_path}.*CI=true"):
        require_multi30k(tmp_path, ci=True)
    (tmp_path / "multi30k").mkdir()
    (tmp_path / "multi30k" / "train.de.gz").write_bytes(b"")
    assert require_multi30k(tmp_path, ci=True) == tmp_path
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path))
    assert find_data_dir() == tmp_path
    monkeypatch.delenv("ATTNKIT_DATA")
    assert find_data_dir() == Path(__file__).resolve().parents[2] / "shared" / "data"
