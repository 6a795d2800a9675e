"""The ``data:`` section of an experiment: which corpus, and one typed spec per split.

Every corpus kind reads a fixed set of fields; a field it does not read must be left out (at its
default), so a setting can never be silently ignored:

==========  ========================================================  ================
corpus      fields it reads                                           records
==========  ========================================================  ================
multi30k    src_lang, tgt_lang, data_dir, {train,valid,test}_split    pairs
multi30k    lang (instead of src_lang/tgt_lang), data_dir, splits     text (one lang)
langid      langs, first_words, data_dir, splits (Multi30k)           labelled (label = lang)
wmt14       src_lang, tgt_lang, data_dir, {train,valid,test}_split    pairs
hf          dataset, splits, src_lang, tgt_lang                       pairs
hf          dataset, splits, text_field                               text
hf          dataset, splits, label_field, text_field [, text_b_field] labelled
files       {train,valid,test}_files: [SOURCE, TARGET] each           pairs
tsv         {train,valid,test}_files: [PATH] (src<TAB>tgt lines)       pairs
tsv         the same, read by a classifier (label<TAB>text[<TAB>b])   labelled
text        {train,valid,test}_files: [PATH] (one text per line)      text
labelled    {train,valid,test}_files: [PATH] (label<TAB>text lines)   labelled
==========  ========================================================  ================

``wmt14`` (WMT14 English-German, the paper's corpus) has the splits ``train``, ``newstest2013`` and
``newstest2014``; the split defaults are Multi30k's names, so a wmt14 config sets all three.

A ``tsv`` file is read as its reader asks: a translation task reads ``source<TAB>target`` pairs, a
classifier ``label<TAB>text`` examples (``spec(which, records="labelled")``), as ``labelled`` does.

``max_train_pairs``, ``max_valid_pairs`` (first N records, 0 = all) and ``max_len`` apply to all.
A test split is optional for file corpora (``test_files: []``).

Translation corpora also read: ``prepared`` (a folder written by ``attnkit prepare``: training reads
its memory-mapped shards instead of the corpus), the filters ``max_len_ratio`` and ``drop_identical``,
and ``mix``, more training corpora each with a ``weight`` (times per epoch) and an optional ``tag``
token put before its source sentences (see :mod:`attnkit.data.mix`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnkit.config import ConfigBase
from attnkit.data import corpus as c
from attnkit.data.multi30k import resolve_data_dir
from attnkit.errors import ConfigError, DataError

WHICH = ("train", "valid", "test")
SPLIT_FIELDS = tuple(f"{which}_split" for which in WHICH)
FILE_FIELDS = tuple(f"{which}_files" for which in WHICH)
COMMON_FIELDS = (
    "corpus",
    "max_train_pairs",
    "max_valid_pairs",
    "max_len",
    "prepared",
    "max_len_ratio",
    "drop_identical",
    "mix",
)
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "multi30k": ("src_lang", "tgt_lang", "lang", "data_dir", *SPLIT_FIELDS),
    "langid": ("langs", "first_words", "data_dir", *SPLIT_FIELDS),
    "hf": ("dataset", *SPLIT_FIELDS, "src_lang", "tgt_lang", "text_field", "text_b_field", "label_field"),
    "files": FILE_FIELDS,
    "tsv": FILE_FIELDS,
    "text": FILE_FIELDS,
    "labelled": FILE_FIELDS,
    "wmt14": ("src_lang", "tgt_lang", "data_dir", *SPLIT_FIELDS),
}
PATHS_PER_SPLIT = {"files": 2, "tsv": 1, "text": 1, "labelled": 1}
OLD_KEYS = ("train", "valid", "test")  # before the per-split fields: a split name, "SRC,TGT" or a path


@dataclasses.dataclass
class DataConfig(ConfigBase):
    """Which corpus the experiment reads; see the module docstring for the fields of each kind."""

    corpus: str = "multi30k"  # multi30k | langid | wmt14 | hf | files | tsv | text | labelled
    src_lang: str = "de"
    tgt_lang: str = "en"
    lang: str = ""  # multi30k: one language, a monolingual (text) corpus
    data_dir: str = ""  # multi30k, langid, wmt14: "" = --data-dir / $ATTNKIT_DATA / ~/.cache/attnkit
    langs: list[str] = dataclasses.field(default_factory=list)  # langid: the classes; [] = de, en, fr, cs
    first_words: int = 0  # langid: 0 = whole captions; N = each caption's first N words (harder)
    dataset: str = ""  # hf: a hub name or a folder written by save_to_disk
    text_field: str = ""  # hf: the text column (a text corpus, or the classifier's input)
    text_b_field: str = ""  # hf: the second text of a sentence-pair classification
    label_field: str = ""  # hf: the label column (a labelled corpus)
    train_split: str = "train"  # multi30k, hf: split names
    valid_split: str = "val"
    test_split: str = "test_2016_flickr"
    train_files: list[str] = dataclasses.field(default_factory=list)  # files, tsv, text, labelled
    valid_files: list[str] = dataclasses.field(default_factory=list)
    test_files: list[str] = dataclasses.field(default_factory=list)
    max_train_pairs: int = 0  # 0 = all; else the first N records (quick experiments, tests)
    max_valid_pairs: int = 0
    max_len: int = 128  # training records with more subword tokens (on either side) are skipped
    prepared: str = ""  # a folder written by `attnkit prepare`; "" = read and tokenize the corpus at start
    max_len_ratio: float = 0.0  # skip training pairs whose longer side has > this x the shorter's subwords
    drop_identical: bool = False  # skip training pairs whose source equals their target (untranslated copies)
    # more training corpora: [{files: [SOURCE, TARGET] | tsv: PATH, weight: W, tag: TAG}, ...]
    mix: list[dict] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        for name in FILE_FIELDS:
            setattr(self, name, _paths(name, getattr(self, name)))
        if isinstance(self.langs, str):  # "de,en" on the command line
            self.langs = [x.strip() for x in self.langs.split(",") if x.strip()]
        super().__post_init__()

    @classmethod
    def _name(cls) -> str:
        return "data"

    def validate(self) -> None:
        self._choice("corpus", tuple(KIND_FIELDS))
        used = {*COMMON_FIELDS, *KIND_FIELDS[self.corpus]}
        for f in dataclasses.fields(self):
            if f.name not in used and getattr(self, f.name) != _default(f):
                self._check(False, f.name, f"not used by corpus {self.corpus!r} ({self._reads()})")
        if self.lang or self.text_field or self.label_field:  # one text per record: no language pair
            for name in ("src_lang", "tgt_lang"):
                if getattr(self, name) != _default(name):
                    other = "lang" if self.lang else "label_field" if self.label_field else "text_field"
                    self._check(False, name, f"not used with data.{other} (records without a language pair)")
        self._check(not self.text_b_field or bool(self.label_field), "text_b_field", "needs data.label_field")
        self._check(not self.label_field or bool(self.text_field), "label_field", "needs data.text_field")
        self._check(
            self.corpus != "hf" or bool(self.dataset), "dataset", "corpus 'hf' needs a dataset name or path"
        )
        self._check(
            isinstance(self.langs, list) and all(isinstance(x, str) and x for x in self.langs),
            "langs",
            "must be a list of language codes, e.g. [de, en, fr, cs]",
        )
        self._check(self.first_words >= 0, "first_words", "must be >= 0 (0 = whole captions)")
        self._check(self.max_train_pairs >= 0, "max_train_pairs", "must be >= 0")
        self._check(self.max_valid_pairs >= 0, "max_valid_pairs", "must be >= 0")
        self._positive("max_len")
        self._check(
            self.max_len_ratio == 0 or self.max_len_ratio >= 1,
            "max_len_ratio",
            "must be 0 (off) or >= 1 (e.g. 2.5)",
        )
        if not isinstance(self.mix, list):
            self._check(False, "mix", "must be a list of corpora: [{files: [SOURCE, TARGET], weight: 1}]")
        self._check(len(self.mix) < 255, "mix", "at most 254 corpora besides the main one")
        for entry in self.mix:
            check_mix_entry(entry)
        if self.corpus in PATHS_PER_SPLIT:
            n = PATHS_PER_SPLIT[self.corpus]
            what = "[SOURCE, TARGET]" if n == 2 else "[PATH]"
            for name in FILE_FIELDS:
                given = len(getattr(self, name))
                optional = name == "test_files" and given == 0
                self._check(optional or given == n, name, f"corpus {self.corpus!r} needs {what} here")
        for which in WHICH:  # build the specs now: bad split names or languages fail before training
            if which != "test" or self.has_split("test"):
                try:
                    self.spec(which)
                except DataError as e:
                    raise ConfigError(f"data: {e}") from None

    def _reads(self) -> str:
        return f"it reads {', '.join(KIND_FIELDS[self.corpus])}"

    def found_here(self) -> tuple[DataConfig, str | None]:
        """This section on this machine: a ``data_dir`` that is not a folder here (a checkpoint moved,
        or trained in another directory) gives way to the default place (``$ATTNKIT_DATA``, else the
        cache), with the line that says so; else this section and None."""
        if not self.data_dir or Path(self.data_dir).expanduser().is_dir():
            return self, None
        moved = self.replace(data_dir="")
        return (
            moved,
            f"data.data_dir {self.data_dir} is not a folder here: reading {resolve_data_dir()} instead",
        )

    def has_split(self, which: str) -> bool:
        return self.corpus not in PATHS_PER_SPLIT or bool(getattr(self, f"{which}_files"))

    @property
    def records(self) -> str:
        """What the corpus holds: "pairs" (translation), "text" or "labelled"."""
        return self.spec("train").records

    def spec(self, which: str, *, labels: Sequence[str] = (), records: str = "") -> c.CorpusSpec:
        """The typed spec of the ``train``, ``valid`` or ``test`` split.

        labels: for a labelled corpus, the label set of the training split (an unknown label in this
        split is then an error naming file and line); empty accepts any label.
        records: what the reader wants, where the corpus can give either ("labelled": a tsv file of
        ``label<TAB>text`` lines); "" = the corpus' own kind.
        """
        if which not in WHICH:
            raise ValueError(f"which must be one of {WHICH}, got {which!r}")
        split, files = getattr(self, f"{which}_split"), getattr(self, f"{which}_files")
        if not self.has_split(which):
            raise ConfigError(
                f"data.{which}_files is empty: corpus {self.corpus!r} has no {which} split here"
            )
        data_dir = self.data_dir or None
        if self.corpus == "multi30k" and self.lang:
            return c.Multi30kTextSpec(split, self.lang, data_dir)
        if self.corpus == "multi30k":
            return c.Multi30kSpec(split, self.src_lang, self.tgt_lang, data_dir)
        if self.corpus == "wmt14":
            if split not in c.wmt14.SPLITS:
                raise ConfigError(
                    f"data.{which}_split: {split!r} is not a WMT14 split ({', '.join(c.wmt14.SPLITS)}); "
                    "corpus wmt14 needs train_split: train, valid_split: newstest2013, "
                    "test_split: newstest2014"
                )
            return c.Wmt14Spec(split, self.src_lang, self.tgt_lang, data_dir)
        if self.corpus == "hf" and self.label_field:
            return c.HFLabelledSpec(
                self.dataset, split, self.label_field, self.text_field, self.text_b_field, tuple(labels)
            )
        if self.corpus == "hf" and self.text_field:
            return c.HFTextSpec(self.dataset, split, self.text_field)
        if self.corpus == "hf":
            return c.HFTranslationSpec(self.dataset, split, self.src_lang, self.tgt_lang)
        if self.corpus == "files":
            return c.ParallelFilesSpec(files[0], files[1])
        if self.corpus == "langid":
            langs = tuple(self.langs) or c.multi30k.LANGS
            return c.Multi30kLangIdSpec(split, langs, self.first_words, data_dir, tuple(labels))
        if self.corpus == "tsv" and records != "labelled":
            return c.TsvSpec(files[0])
        if self.corpus == "text":
            return c.TextFileSpec(files[0])
        return c.LabelledFileSpec(files[0], tuple(labels))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> DataConfig:
        old = [key for key in OLD_KEYS if key in values]
        if old:
            key = old[0]
            raise ConfigError(
                f"data.{key} is no longer a key: use data.{key}_split (multi30k, hf) "
                f"or data.{key}_files (files, tsv, text, labelled)"
            )
        return super().from_dict(values)

    @classmethod
    def from_saved(cls, values: dict[str, Any]) -> DataConfig:
        """Rebuild a checkpoint's data section, translating the keys of older attnkit versions."""
        return cls.from_dict(upgrade(values))


def upgrade(values: dict[str, Any]) -> dict[str, Any]:
    """An old data section (``train``/``valid``/``test`` holding a split name, "SRC,TGT" or a path)
    in today's fields; a current one is returned unchanged."""
    if not any(key in values for key in OLD_KEYS):
        return values
    values = dict(values)
    kind = values.get("corpus", "multi30k")
    for which in OLD_KEYS:
        if which not in values:
            continue
        old = values.pop(which)
        if kind in ("multi30k", "hf"):
            values[f"{which}_split"] = old
        elif kind == "files":
            values[f"{which}_files"] = [p.strip() for p in str(old).split(",")] if old else []
        else:
            values[f"{which}_files"] = [old] if old else []
    if kind in ("files", "tsv"):  # these kinds never read the languages
        values.pop("src_lang", None)
        values.pop("tgt_lang", None)
    if kind != "hf":
        values.pop("dataset", None)
    if kind != "multi30k":
        values.pop("data_dir", None)
    return values


MIX_KEYS = ("files", "tsv", "weight", "tag")


def check_mix_entry(entry: Any) -> None:
    """One ``data.mix`` corpus: ``files: [SOURCE, TARGET]`` or ``tsv: PATH``, a ``weight`` > 0, a ``tag``."""
    if not isinstance(entry, dict):
        raise ConfigError(
            f"data.mix: each entry must be a mapping like {{files: [SRC, TGT], weight: 1}}, got {entry!r}"
        )
    unknown = sorted(set(entry) - set(MIX_KEYS))
    if unknown:
        raise ConfigError(f"data.mix: unknown key(s) {', '.join(unknown)} (valid: {', '.join(MIX_KEYS)})")
    files, tsv = entry.get("files"), entry.get("tsv")
    if (files is None) == (tsv is None):
        raise ConfigError(f"data.mix: {entry!r} needs exactly one of files: [SOURCE, TARGET] or tsv: PATH")
    if files is not None and (
        not isinstance(files, list) or len(files) != 2 or not all(isinstance(p, str) and p for p in files)
    ):
        raise ConfigError(f"data.mix: files must be [SOURCE, TARGET], got {files!r}")
    if tsv is not None and not (isinstance(tsv, str) and tsv):
        raise ConfigError(f"data.mix: tsv must be a file path, got {tsv!r}")
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 1000:
        raise ConfigError(f"data.mix: weight must be a number in (0, 1000] (times per epoch), got {weight!r}")
    tag = entry.get("tag", "")
    if not isinstance(tag, str) or any(c.isspace() for c in tag):
        raise ConfigError(f"data.mix: tag must be one token without spaces (e.g. '<bt>'), got {tag!r}")
    if tag in ("<pad>", "<s>", "</s>", "<unk>"):  # the tokenizer's own special pieces
        raise ConfigError(
            f"data.mix: tag {tag!r} is one of the tokenizer's special pieces; choose another, e.g. '<bt>'"
        )


def _paths(name: str, value: Any) -> list[str]:
    if isinstance(value, str):  # one path written without brackets
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) and p for p in value):
        raise ConfigError(f"data.{name} must be a list of file paths, got {value!r}")
    return list(value)


def _default(field: dataclasses.Field | str) -> Any:
    if isinstance(field, str):
        field = next(f for f in dataclasses.fields(DataConfig) if f.name == field)
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
