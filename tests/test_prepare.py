"""``attnkit prepare``: prepared data trains exactly as the corpus does, and a bad folder is one line."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from attnkit.checkpoint import load_checkpoint
from attnkit.data import load_multi30k
from attnkit.data.examples import train_tokenizer
from attnkit.data.prepare import prepare
from attnkit.data.prepared import open_prepared
from attnkit.errors import ConfigError, DataError
from attnkit.tasks.translation.training import TranslationTask
from attnkit.train import load_config, train
from cli_helpers import assert_user_error, cli

SMALL = [
    "data.max_train_pairs=300",
    "data.max_valid_pairs=20",
    "tokenizer.vocab_size=300",
    "model.preset=tiny",
    "model.share_vocab=true",
    "model.dropout=0.1",
    "train.max_tokens=800",
    "train.schedule=inverse_sqrt",
    "train.lr=0.003",
    "train.warmup_steps=5",
    "train.progress=false",
    "train.max_steps=6",
    "valid.every=6",
    "valid.max_sentences=5",
]


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    """1,200 Multi30k pairs as plain files (so a test can change them), plus a 20-pair valid split."""
    root = tmp_path_factory.mktemp("corpus")
    for split, n in (("train", 1200), ("val", 20)):
        pairs = load_multi30k(split, "de", "en", shared_data, download=False)[:n]
        (root / f"{split}.de").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
        (root / f"{split}.en").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return root


def config(corpus, out, *extra):
    files = [
        "data.corpus=files",
        f"data.train_files=[{corpus / 'train.de'}, {corpus / 'train.en'}]",
        f"data.valid_files=[{corpus / 'val.de'}, {corpus / 'val.en'}]",
    ]
    return load_config(None, [*files, *SMALL, f"output_dir={out}", *extra])


def weights(path):
    return load_checkpoint(path)["model"]


def same_weights(a, b) -> bool:
    return all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)


def test_prepared_data_trains_bit_for_bit_as_the_corpus_does(tmp_path, corpus):
    prepare(config(corpus, tmp_path), tmp_path / "prep", workers=2, log=lambda m: None)
    direct = train(config(corpus, tmp_path / "a"), log=lambda m: None)
    lines: list[str] = []
    prepared = train(config(corpus, tmp_path / "b", f"data.prepared={tmp_path / 'prep'}"), log=lines.append)
    assert same_weights(weights(direct.last_checkpoint), weights(prepared.last_checkpoint))
    assert any("290 training examples" in line for line in lines), lines  # 10 over max_len


def test_the_prepared_folder_maps_its_arrays_and_one_worker_writes_what_two_do(tmp_path, corpus):
    cfg = config(corpus, tmp_path, f"data.prepared={tmp_path / 'two'}")
    two = prepare(cfg, tmp_path / "two", workers=2, log=lambda m: None)
    one = prepare(cfg, tmp_path / "one", workers=1, log=lambda m: None)
    assert one["files"] == two["files"] and two["splits"]["train"]["pairs"] == 300
    p = open_prepared(cfg)
    assert isinstance(p.train.src.ids, np.memmap) and isinstance(p.train.lengths(), np.memmap)
    src, tgt = p.train[7]
    assert src == p.tokenizer.encode(open(corpus / "train.de").read().splitlines()[7], "src")
    assert tgt == p.tokenizer.encode(open(corpus / "train.en").read().splitlines()[7], "tgt")


@pytest.fixture
def prepared(tmp_path, corpus):
    cfg = config(corpus, tmp_path, f"data.prepared={tmp_path / 'prep'}")
    prepare(cfg, tmp_path / "prep", log=lambda m: None)
    return cfg, tmp_path / "prep"


def test_a_truncated_or_damaged_shard_is_a_one_line_error(prepared):
    cfg, folder = prepared
    shard = folder / "train.src.bin"
    data = shard.read_bytes()
    shard.write_bytes(data[:-2])
    with pytest.raises(DataError, match="truncated"):
        open_prepared(cfg)
    shard.write_bytes(data[:10] + bytes([data[10] ^ 1]) + data[11:])
    with pytest.raises(DataError, match="damaged"):
        open_prepared(cfg)
    shard.unlink()
    with pytest.raises(DataError, match="missing"):
        open_prepared(cfg)


def test_a_changed_corpus_tokenizer_or_config_is_refused(prepared, corpus, tmp_path):
    cfg, folder = prepared
    with pytest.raises(ConfigError, match=r"tokenizer.vocab_size = 300.*400"):
        open_prepared(config(corpus, tmp_path, f"data.prepared={folder}", "tokenizer.vocab_size=400"))
    open_prepared(config(corpus, tmp_path, f"data.prepared={folder}", "data.max_len=50"))  # applied at start
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["tokenizer"]["fingerprint"] = "0" * 64
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="tokenizer files differ"):
        open_prepared(cfg)
    with (corpus / "train.en").open("a") as f:  # last: the corpus is shared by the module
        f.write("one more line\n")
    try:
        with pytest.raises(DataError, match="changed since"):
            open_prepared(cfg)
    finally:
        text = (corpus / "train.en").read_text().removesuffix("one more line\n")
        (corpus / "train.en").write_text(text)


def test_cli_prepare_and_train_errors_are_one_line(prepared, corpus, tmp_path, capsys):
    cfg, folder = prepared
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    yaml = tmp_path / "c.yaml"
    yaml.write_text(
        f"data: {{corpus: files, train_files: [{corpus}/train.de, {corpus}/train.en], "
        f"valid_files: [{corpus}/val.de, {corpus}/val.en]}}\ntokenizer: {{vocab_size: 300}}\n"
    )
    code, _, err = cli(capsys, "prepare", "--config", yaml, "--output", tmp_path / "mine")
    assert_user_error(code, err, "not a folder written by attnkit prepare")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    code, _, err = cli(capsys, "prepare", "--config", yaml)
    assert_user_error(code, err, "--output")
    code, _, err = cli(capsys, "train", "--config", yaml, f"data.prepared={tmp_path / 'nothing'}")
    assert_user_error(code, err, "no such folder")
    (folder / "manifest.json").write_text("{")
    code, _, err = cli(capsys, "train", "--config", yaml, f"data.prepared={folder}")
    assert_user_error(code, err, "not valid JSON")


def test_a_run_resumed_on_other_prepared_data_is_refused(prepared, corpus, tmp_path):
    cfg, folder = prepared
    run = train(cfg, log=lambda m: None)
    other = tmp_path / "other"
    prepare(config(corpus, tmp_path, "tokenizer.vocab_size=250"), other, log=lambda m: None)
    cfg2 = config(
        corpus, tmp_path / "r", f"data.prepared={other}", "tokenizer.vocab_size=250", "train.max_steps=8"
    )
    with pytest.raises(Exception, match="tokenizer|different model"):
        train(cfg2, resume=run.last_checkpoint, log=lambda m: None)


def test_an_existing_sentencepiece_model_and_a_sampled_tokenizer(prepared, corpus, tmp_path):
    cfg, folder = prepared
    model = folder / "tokenizer.src.model"
    reused = open_prepared(cfg).tokenizer
    again = prepare(config(corpus, tmp_path, f"tokenizer.model={model}"), tmp_path / "p2", log=lambda m: None)
    assert again["tokenizer"]["fingerprint"] == reused.fingerprint()
    logs: list[str] = []  # 1,200 pairs, 500 of them sampled (1,000 sentences, both sides)
    sampled = config(corpus, tmp_path, "tokenizer.max_sentences=1000", "data.max_train_pairs=0")
    a = prepare(sampled, tmp_path / "s1", log=logs.append)["tokenizer"]["fingerprint"]
    assert any("on 500 of 1,200 sentence pairs" in line for line in logs), logs
    records = TranslationTask(sampled).load(sampled.data, "train")
    assert train_tokenizer(records, sampled.tokenizer, sampled.train.seed).fingerprint() == a  # same sample
    whole = config(corpus, tmp_path, "data.max_train_pairs=0")
    assert train_tokenizer(records, whole.tokenizer, 1).fingerprint() != a
    with pytest.raises(ConfigError, match="tokenizer.model"):
        prepare(config(corpus, tmp_path, f"tokenizer.model={tmp_path / 'none.model'}"), tmp_path / "x")


def test_a_folder_with_any_manifest_json_and_other_files_is_never_replaced(tmp_path, corpus):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "manifest.json").write_text("{}")
    (mine / "precious.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not a folder written by attnkit prepare"):
        prepare(config(corpus, tmp_path), mine, log=lambda m: None)
    prepare(config(corpus, tmp_path), tmp_path / "prep", log=lambda m: None)
    (tmp_path / "prep" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="did not write"):
        prepare(config(corpus, tmp_path), tmp_path / "prep", log=lambda m: None)
    assert (mine / "precious.txt").read_text() == "keep me" and (tmp_path / "prep" / "notes.txt").exists()


def _die(job):
    os._exit(1)  # a worker killed mid-chunk, as the OOM killer would


def test_a_dead_worker_is_a_one_line_error_not_a_hang(tmp_path, corpus, monkeypatch):
    from attnkit.data import prepare as prepare_module

    monkeypatch.setattr(prepare_module, "_encode", _die)
    with pytest.raises(DataError, match="worker died"):
        prepare(config(corpus, tmp_path), tmp_path / "prep", workers=2, log=lambda m: None)
    assert not (tmp_path / "prep").exists() and not list(tmp_path.glob(".prep.*"))


def test_line_separators_in_the_text_and_a_copied_corpus_are_fine(prepared, corpus, tmp_path):
    cfg, folder = prepared
    os.utime(corpus / "train.de", (1, 1))  # a copy without -t: new times, same content
    open_prepared(cfg)
    val = tmp_path / "val"
    val.mkdir()
    (val / "v.de").write_text("Ein Satz\u2028mit Trenner\nZwei\n", encoding="utf-8")
    (val / "v.en").write_text("A sentence\u2029with a separator\nTwo\n", encoding="utf-8")
    other = config(
        corpus,
        tmp_path,
        f"data.valid_files=[{val / 'v.de'}, {val / 'v.en'}]",
        f"data.prepared={tmp_path / 'p2'}",
    )
    prepare(other, tmp_path / "p2", log=lambda m: None)
    assert open_prepared(other).valid_records[0] == (
        "Ein Satz\u2028mit Trenner",
        "A sentence\u2029with a separator",
    )


def test_a_manifest_missing_a_key_is_one_line(prepared):
    cfg, folder = prepared
    manifest = json.loads((folder / "manifest.json").read_text())
    for key in ("files", "config", "corpora", "tokenizer", "dtype", "splits"):
        broken = {k: v for k, v in manifest.items() if k != key}
        (folder / "manifest.json").write_text(json.dumps(broken))
        with pytest.raises(DataError, match=key):
            open_prepared(cfg)


@pytest.mark.parametrize("arch", ["lm", "classifier", "captioner"])
def test_tasks_that_do_not_read_text_pairs_refuse_prepared_data_in_one_line(arch, prepared, tmp_path, capsys):
    _, folder = prepared
    yaml = tmp_path / "c.yaml"
    yaml.write_text(
        f"model: {{arch: {arch}}}\ndata: {{prepared: {folder}}}\noutput_dir: {tmp_path / 'run'}\n"
    )
    code, _, err = cli(capsys, "train", "--config", yaml)
    assert_user_error(code, err, f"model.arch '{arch}' does not train from")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda m: m.update(files={}), "lists no checksum for"),  # an emptied list turned checks off
        (lambda m: m["files"].pop("train.tgt.bin"), "lists no checksum for train.tgt.bin"),
        (lambda m: m.update(dtype="uint32"), "train.src"),  # read as other ids: one line, not numpy's
    ],
)
def test_an_edited_manifest_never_turns_the_checks_off(prepared, edit, says):
    import json

    cfg, folder = prepared
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=says):
        open_prepared(cfg)


def test_a_vocab_size_or_joint_that_contradicts_the_given_model_is_refused(prepared, corpus, tmp_path):
    _, folder = prepared
    model = folder / "tokenizer.src.model"
    config(corpus, tmp_path, f"tokenizer.model=[{model}]")  # SMALL's vocab_size=300: the model's own
    with pytest.raises(ConfigError, match="tokenizer.vocab_size = 500 contradicts tokenizer.model's 300"):
        config(corpus, tmp_path, f"tokenizer.model=[{model}]", "tokenizer.vocab_size=500")
    with pytest.raises(ConfigError, match="tokenizer.joint = False contradicts tokenizer.model"):
        config(corpus, tmp_path, f"tokenizer.model=[{model}]", "tokenizer.joint=false")
