"""WMT14 En-De: its files read in either direction, and downloads streamed, counted, atomic, failing clearly.

Downloads read a local fake Hugging Face dataset (``save_to_disk``) and a fake sacreBLEU test set;
nothing leaves the machine.
"""

from __future__ import annotations

import pytest
import sacrebleu

from attnkit.data import Wmt14Spec, load_corpus, load_wmt14, wmt14_paths
from attnkit.data.config import DataConfig
from attnkit.data.wmt14 import HF_CONFIG, HF_DATASET, SACREBLEU_TEST_SET
from attnkit.errors import ConfigError, DataError
from cli_helpers import assert_user_error, cli, write_config

datasets = pytest.importorskip("datasets")

TRAIN = [{"de": f"Der Hund {i} läuft.", "en": f"The dog {i} runs."} for i in range(4)]
TRAIN.append({"de": "Zwei\nZeilen\tund\r\nTab.", "en": "Two\nlines\tand\rtab."})  # one sentence each
VALIDATION = [{"de": "Guten Morgen.", "en": "Good morning."}, {"de": "Danke.", "en": "Thank you."}]
NEWSTEST = [{"de": "Ein Test.", "en": "A test."}, {"de": "Noch einer.", "en": "One more."}]
COUNTS = {"train": 5, "newstest2013": 2, "newstest2014": 2}  # the fakes' sizes
WMT14_SPLITS = {"train_split": "train", "valid_split": "newstest2013", "test_split": "newstest2014"}


@pytest.fixture
def fake_hf(tmp_path):
    """A ``DatasetDict`` like HF wmt14 de-en (a ``translation`` column), saved to a folder."""
    path = tmp_path / "fake_wmt14"
    splits = {"train": TRAIN, "validation": VALIDATION}
    datasets.DatasetDict(
        {name: datasets.Dataset.from_dict({"translation": rows}) for name, rows in splits.items()}
    ).save_to_disk(str(path))
    return str(path)


def fetch(split, data_dir, fake_hf, newstest=lambda: NEWSTEST, counts=COUNTS):
    return wmt14_paths(split, data_dir, hf_dataset=fake_hf, newstest2014=newstest, counts=counts)


def write_split(folder, split, pairs):
    """``<split>.de`` and ``<split>.en`` by hand, as a user without network would."""
    folder.mkdir(parents=True, exist_ok=True)
    for lang, column in (("de", 0), ("en", 1)):
        (folder / f"{split}.{lang}").write_text("".join(p[column] + "\n" for p in pairs), encoding="utf-8")


def one_line(info) -> str:
    message = str(info.value)
    assert "\n" not in message, message
    return message


def fail():
    raise AssertionError("the download ran again")


# --- downloads --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "split, rows", [("train", TRAIN), ("newstest2013", VALIDATION), ("newstest2014", NEWSTEST)]
)
def test_download_writes_one_sentence_a_line_and_is_cached(tmp_path, fake_hf, split, rows):
    data_dir = tmp_path / "data"
    paths = fetch(split, data_dir, fake_hf)
    folder = data_dir / "wmt14_de_en"
    assert paths == {lang: folder / f"{split}.{lang}" for lang in ("de", "en")}
    assert sorted(p.name for p in folder.iterdir()) == [f"{split}.de", f"{split}.en"]  # no temp files
    for lang in ("de", "en"):
        lines = paths[lang].read_text(encoding="utf-8").split("\n")
        assert len(lines) == len(rows) + 1 and lines[-1] == ""
        assert lines[:-1] == [" ".join(row[lang].split()) for row in rows]  # the fakes' breaks are single
    again = wmt14_paths(split, data_dir, hf_dataset=str(tmp_path / "gone"), newstest2014=fail, counts=COUNTS)
    assert again == paths  # already there: neither source is read again


def test_embedded_newlines_and_tabs_become_spaces(tmp_path, fake_hf):
    fetch("train", tmp_path, fake_hf)
    pairs = load_wmt14("train", "de", "en", data_dir=tmp_path, download=False)
    assert len(pairs) == 5
    assert pairs[-1] == ("Zwei Zeilen und Tab.", "Two lines and tab.")  # \r\n is one break


def test_hub_name_is_streamed_with_the_de_en_config(tmp_path, monkeypatch):
    calls = []

    def load_dataset(name, config, *, split, streaming):
        calls.append((name, config, split, streaming))
        return iter([{"translation": row} for row in VALIDATION])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    paths = wmt14_paths("newstest2013", tmp_path, counts=COUNTS)
    assert calls == [(HF_DATASET, HF_CONFIG, "validation", True)]
    assert paths["en"].read_text(encoding="utf-8") == "Good morning.\nThank you.\n"


class FakeSacrebleuTestSet:
    """What attnkit asks of ``sacrebleu.DATASETS['wmt14/full']``: local source and reference files."""

    def __init__(self, folder, exit_code=None):
        self.folder, self.exit_code, self.langpairs = folder, exit_code, []

    def get_source_file(self, langpair):
        self.langpairs.append(langpair)
        if self.exit_code is not None:
            raise SystemExit(self.exit_code)  # what sacreBLEU does on a bad MD5 or an SSL error
        path = self.folder / "src.en"
        path.write_text("".join(row["en"] + "\n" for row in NEWSTEST), encoding="utf-8")
        return str(path)

    def get_reference_files(self, langpair):
        path = self.folder / "ref.de"
        path.write_text("".join(row["de"] + "\n" for row in NEWSTEST), encoding="utf-8")
        return [str(path)]


def test_newstest2014_comes_from_sacrebleu_en_de(tmp_path, monkeypatch):
    fake = FakeSacrebleuTestSet(tmp_path)
    monkeypatch.setitem(sacrebleu.DATASETS, SACREBLEU_TEST_SET, fake)
    paths = wmt14_paths("newstest2014", tmp_path / "data", counts=COUNTS)
    assert fake.langpairs == ["en-de"]
    assert paths["en"].read_text(encoding="utf-8") == "A test.\nOne more.\n"
    assert paths["de"].read_text(encoding="utf-8") == "Ein Test.\nNoch einer.\n"


def test_sacrebleu_exiting_is_a_data_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sacrebleu.DATASETS, SACREBLEU_TEST_SET, FakeSacrebleuTestSet(tmp_path, exit_code=1))
    with pytest.raises(DataError) as info:
        wmt14_paths("newstest2014", tmp_path / "data", counts=COUNTS)
    assert "sacreBLEU stopped with exit code 1" in one_line(info)
    assert list((tmp_path / "data" / "wmt14_de_en").iterdir()) == []


@pytest.mark.parametrize("split, expected", [("train", 6), ("newstest2013", 3000), ("newstest2014", 1)])
def test_a_wrong_pair_count_saves_nothing(tmp_path, fake_hf, split, expected):
    with pytest.raises(DataError) as info:
        fetch(split, tmp_path, fake_hf, counts={**COUNTS, split: expected})
    assert f"expected {expected:,}; nothing was saved" in one_line(info)
    assert list((tmp_path / "wmt14_de_en").iterdir()) == []


@pytest.mark.parametrize("stop", [ConnectionError("reset by peer\nwhile reading"), KeyboardInterrupt])
def test_an_interrupted_download_leaves_no_file(tmp_path, fake_hf, stop):
    folder = tmp_path / "wmt14_de_en"

    def rows():
        yield NEWSTEST[0]
        assert not (folder / "newstest2014.de").exists()  # nothing final while rows still come
        assert len(list(folder.glob(".newstest2014.*.part"))) == 2
        raise stop

    raised = DataError if isinstance(stop, Exception) else KeyboardInterrupt
    with pytest.raises(raised) as info:
        fetch("newstest2014", tmp_path, fake_hf, newstest=rows)
    if raised is DataError:
        assert "failed (reset by peer while reading)" in one_line(info)
    assert list(folder.iterdir()) == []


def test_half_a_split_is_fetched_again(tmp_path, fake_hf):
    write_split(tmp_path / "wmt14_de_en", "newstest2013", [("alt", "old")])
    (tmp_path / "wmt14_de_en" / "newstest2013.en").unlink()  # a run killed between the two renames
    paths = fetch("newstest2013", tmp_path, fake_hf)
    assert paths["de"].read_text(encoding="utf-8") == "Guten Morgen.\nDanke.\n"


def test_offline_without_files_says_where_to_put_them(tmp_path):
    with pytest.raises(DataError) as info:
        wmt14_paths("train", tmp_path, download=False)
    message = one_line(info)
    assert f"no such file: {tmp_path / 'wmt14_de_en' / 'train.de'}" in message
    assert f"{tmp_path / 'wmt14_de_en'}/<split>.<lang>" in message
    assert "Hugging Face dataset wmt14 (de-en)" in message and "sacreBLEU wmt14/full en-de" in message
    assert "--data-dir" in message and "ATTNKIT_DATA" in message


def test_an_unreachable_source_says_where_to_put_the_files(tmp_path, monkeypatch):
    def load_dataset(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'wmt14' on the Hub\n(LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    with pytest.raises(DataError) as info:
        wmt14_paths("train", tmp_path)
    message = one_line(info)
    assert "Hugging Face dataset 'wmt14' (de-en, split 'train') failed (Couldn't reach" in message
    assert f"{tmp_path / 'wmt14_de_en'}/<split>.<lang>" in message
    assert list((tmp_path / "wmt14_de_en").iterdir()) == []


# --- specs, config and the command ------------------------------------------------------------


def test_spec_reads_both_directions_and_gives_its_files(tmp_path):
    pairs = [("Hallo Welt.", "Hello world."), ("Gute Nacht.", "Good night.")]
    write_split(tmp_path / "wmt14_de_en", "newstest2014", pairs)
    en_de = Wmt14Spec("newstest2014", "en", "de", data_dir=tmp_path, download=False)
    de_en = Wmt14Spec("newstest2014", "de", "en", data_dir=tmp_path, download=False)
    assert load_corpus(en_de) == [(en, de) for de, en in pairs]
    assert load_corpus(de_en) == pairs
    folder = tmp_path / "wmt14_de_en"
    assert en_de.paths() == (folder / "newstest2014.en", folder / "newstest2014.de")
    assert en_de.records == "pairs" and en_de.describe() == "WMT14 newstest2014 en-de"


@pytest.mark.parametrize(
    "split, src, tgt, message",
    [
        ("test", "en", "de", "unknown WMT14 split 'test'; choose one of train, newstest2013, newstest2014"),
        ("train", "en", "fr", "unknown WMT14 target language 'fr'; choose one of de, en"),
        ("train", "de", "de", "both 'de'"),
        ("", "en", "de", "needs split"),
    ],
)
def test_bad_split_or_language_is_a_data_error(tmp_path, split, src, tgt, message):
    with pytest.raises(DataError, match=message):
        Wmt14Spec(split, src, tgt, data_dir=tmp_path)


def test_data_config_gives_one_spec_per_split(tmp_path):
    data = DataConfig.from_dict({"corpus": "wmt14", "src_lang": "en", "tgt_lang": "de", **WMT14_SPLITS})
    assert data.spec("valid") == Wmt14Spec("newstest2013", "en", "de")
    assert data.spec("test") == Wmt14Spec("newstest2014", "en", "de") and data.records == "pairs"
    assert DataConfig.from_dict(data.to_dict()) == data
    write_split(tmp_path / "wmt14_de_en", "newstest2013", [("Ja.", "Yes.")])
    de_en = data.replace(data_dir=str(tmp_path), src_lang="de", tgt_lang="en").spec("valid")
    assert de_en == Wmt14Spec("newstest2013", "de", "en", str(tmp_path))
    assert load_corpus(de_en) == [("Ja.", "Yes.")]  # the files are there: nothing is downloaded


@pytest.mark.parametrize(
    "fields, message",
    [
        ({}, "data.valid_split: 'val' is not a WMT14 split (train, newstest2013, newstest2014)"),
        ({"valid_split": "newstest2013"}, "data.test_split: 'test_2016_flickr' is not a WMT14 split"),
        ({**WMT14_SPLITS, "tgt_lang": "fr"}, "unknown WMT14 target language 'fr'"),
        ({"lang": "en"}, "data.lang = 'en': not used by corpus 'wmt14'"),
    ],
)
def test_bad_wmt14_data_sections_are_config_errors(fields, message):
    with pytest.raises(ConfigError) as info:
        DataConfig.from_dict({"corpus": "wmt14", **fields})
    assert message in str(info.value)


def test_attnkit_train_on_a_wmt14_folder_made_by_hand(capsys, tmp_path):
    german = ["Hund", "Katze", "Haus", "Baum", "Mann", "Frau"]
    english = ["dog", "cat", "house", "tree", "man", "woman"]
    pairs = [
        (f"der {german[i % 6]} sieht {german[i // 6]}", f"the {english[i % 6]} sees {english[i // 6]}")
        for i in range(36)
    ]
    for split, part in (("train", pairs), ("newstest2013", pairs[:8]), ("newstest2014", pairs[8:16])):
        write_split(tmp_path / "wmt14_de_en", split, part)
    code, out, err = cli(
        capsys,
        "train",
        "--config",
        write_config(tmp_path),
        "--data-dir",
        tmp_path,
        "--output-dir",
        tmp_path / "run",
        "data.corpus=wmt14",
        "data.src_lang=en",
        "data.tgt_lang=de",
        *(f"data.{field}={split}" for field, split in WMT14_SPLITS.items()),
        "tokenizer.vocab_size=40",
        "train.max_steps=2",
        "valid.every=2",
    )
    assert code == 0, err
    assert f"best checkpoint: {tmp_path / 'run'}" in out


def test_attnkit_train_names_a_bad_wmt14_split(capsys, tmp_path):
    result = cli(
        capsys,
        "train",
        "--config",
        write_config(tmp_path),
        "--output-dir",
        tmp_path / "run",
        "data.corpus=wmt14",
        "data.valid_split=newstest2013",
        "data.test_split=newstest2015",
    )
    assert_user_error(*result[::2], "data.test_split: 'newstest2015' is not a WMT14 split", "newstest2014")
    assert not (tmp_path / "run").exists()
