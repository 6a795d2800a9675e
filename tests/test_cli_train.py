"""``attnkit train`` end to end, and the one-line error (exit 2) for each bad flag, config or corpus.

The success path is the session fixture ``runs`` (tests/conftest.py), which trains through the command.
"""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from attnkit.data import multi30k
from cli_helpers import assert_user_error, cli, run_process, write_config

# -- help and usage --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [None, "train", "translate", "evaluate", "attention", "plot-positional", "average"]
)
def test_help_exits_0(capsys, command):
    code, out, err = cli(capsys, *([command] if command else []), "--help")
    assert code == 0, err
    assert out.startswith(f"usage: attnkit{' ' + command if command else ''}")


def test_no_command_and_unknown_flag_are_usage_errors(capsys):
    assert_user_error(*cli(capsys)[::2], "required")
    assert_user_error(*cli(capsys, "plot-positional", "--out", "x.png", "--bogus")[::2], "--bogus")


# -- train -----------------------------------------------------------------------------------------


def test_train_prints_best_checkpoint_and_keeps_step_checkpoints(runs):
    assert f"best checkpoint: {runs.ckpt} (valid BLEU " in runs.train_stdout
    assert runs.ckpt.is_file()
    assert all(p.is_file() for p in runs.step_ckpts)


@pytest.mark.parametrize(
    "override, fragments",
    [
        ("train.lrr=1", ["lrr"]),
        ("train.lr=-1", ["lr", "must be positive"]),
        ("train.cooldown_steps=999999", ["cooldown_steps", "[0, max_steps]", "max_steps is"]),
        ("train.cooldown_steps=-1", ["cooldown_steps", "[0, max_steps]"]),
        ("model.d_model=30", ["d_model", "n_heads=4"]),  # the tiny preset has 4 heads
        ("model.arch=lstm", ["model.arch", "lstm", "transformer, rnn"]),
        ("valid.every=often", ["every", "integer"]),
        ("trainn.lr=1", ["trainn"]),
        ("train.lr", ["'train.lr'", "section.key=value"]),
    ],
)
def test_train_rejects_bad_override(capsys, tmp_path, override, fragments):
    result = cli(
        capsys, "train", "--config", write_config(tmp_path), "--output-dir", tmp_path / "out", override
    )
    assert_user_error(*result[::2], *fragments)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "content, fragments",
    [
        (None, ["config file not found"]),
        (b"train: [1, 2\n", ["not valid YAML"]),  # the parser's message spans lines: still one line
        (b"- data\n- train\n", ["must be a mapping"]),
        (b"train: {lr: \xff}\n", ["not a UTF-8 text file"]),
    ],
    ids=["missing", "not-yaml", "not-a-mapping", "not-utf8"],
)
def test_train_rejects_bad_config_file(capsys, tmp_path, content, fragments):
    config = tmp_path / "config.yaml"
    if content is not None:
        config.write_bytes(content)
    result = cli(capsys, "train", "--config", config, "--output-dir", tmp_path / "out")
    assert_user_error(*result[::2], str(config), *fragments)


def test_train_refuses_an_existing_run(capsys, runs, shared_data, tmp_path):
    before = sorted(p.name for p in runs.transformer_dir.iterdir())
    code, _, err = cli(
        capsys,
        "train",
        "--config",
        write_config(tmp_path),
        "--output-dir",
        runs.transformer_dir,
        "--data-dir",
        shared_data,
    )
    assert_user_error(code, err, "already holds a training run", "--resume", "--overwrite")
    assert sorted(p.name for p in runs.transformer_dir.iterdir()) == before


def test_train_resume_from_missing_checkpoint(capsys, tmp_path):
    missing = tmp_path / "nope.pt"
    result = cli(
        capsys, "train", "--config", write_config(tmp_path), "--output-dir", tmp_path, "--resume", missing
    )
    assert_user_error(*result[::2], "checkpoint not found", str(missing))


def test_train_unknown_language_lists_valid_ones(capsys, tmp_path):
    result = cli(
        capsys,
        "train",
        "--config",
        write_config(tmp_path),
        "--output-dir",
        tmp_path / "out",
        "--data-dir",
        tmp_path,
        "data.src_lang=xx",
    )
    assert_user_error(*result[::2], "'xx'", "de, en, fr, cs")


@pytest.mark.parametrize("problem", ["line-counts", "empty", "invalid-utf8"])
def test_train_files_corpus_names_the_bad_file(capsys, tmp_path, problem):
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src_bytes, tgt_bytes, fragments = {
        "line-counts": (
            b"ein Hund\nzwei Katzen\ndrei\n",
            b"a dog\ntwo cats\n",
            ["line counts differ", str(src), str(tgt)],
        ),
        "empty": (b"", b"", ["empty corpus", str(src)]),
        "invalid-utf8": (
            b"ein Hund\nzwei \xffKatzen\n",
            b"a dog\ntwo cats\n",
            [f"{src}:2", "not valid UTF-8"],
        ),
    }[problem]
    src.write_bytes(src_bytes)
    tgt.write_bytes(tgt_bytes)
    result = cli(
        capsys,
        "train",
        "--config",
        write_config(tmp_path),
        "--output-dir",
        tmp_path / "out",
        "data.corpus=files",
        f"data.train_files=[{src},{tgt}]",
        f"data.valid_files=[{src},{tgt}]",
    )
    assert_user_error(*result[::2], *fragments)


@pytest.mark.parametrize(
    "overrides, fragments",
    [
        (["data.train=train"], ["data.train is no longer a key", "data.train_split", "data.train_files"]),
        (["data.train_files=[a.de,a.en]"], ["data.train_files", "not used by corpus 'multi30k'"]),
        (["data.corpus=files", "data.src_lang=fr"], ["data.src_lang", "not used by corpus 'files'"]),
        (
            ["data.corpus=tsv", "data.train_files=[a.tsv]", "data.valid_files=[a.tsv]", "data.test_split=x"],
            ["data.test_split", "not used by corpus 'tsv'", "it reads train_files"],
        ),
        (["data.corpus=files", "data.train_files=[a.de]"], ["data.train_files", "[SOURCE, TARGET]"]),
        (["data.corpus=text", "data.train_files=[]"], ["data.train_files", "[PATH]"]),
        (["data.train_files=7"], ["data.train_files", "list of file paths"]),
        (["data.lang=en", "data.src_lang=fr"], ["data.src_lang", "not used with data.lang"]),
        (["data.corpus=hf", "data.dataset=x", "data.text_b_field=b"], ["data.text_b_field", "label_field"]),
        (["data.corpus=hf"], ["data.dataset", "needs a dataset"]),
        (["data.valid_split=dev"], ["'dev'", "train, val, test_2016_flickr"]),
    ],
    ids=[
        "old-key",
        "files-on-multi30k",
        "lang-on-files",
        "split-on-tsv",
        "one-of-two-files",
        "no-text-file",
        "not-a-list",
        "lang-and-pair",
        "text-b-alone",
        "hf-no-dataset",
        "unknown-split",
    ],
)
def test_train_rejects_a_data_field_the_corpus_does_not_read(capsys, tmp_path, overrides, fragments):
    result = cli(
        capsys, "train", "--config", write_config(tmp_path), "--output-dir", tmp_path / "out", *overrides
    )
    assert_user_error(*result[::2], *fragments)
    assert not (tmp_path / "out").exists()


def test_train_translation_from_a_text_corpus_is_refused(capsys, tmp_path):
    text = tmp_path / "lines.txt"
    text.write_text("ein Hund\nzwei Katzen\n", encoding="utf-8")
    result = cli(
        capsys,
        "train",
        "--config",
        write_config(tmp_path),
        "--output-dir",
        tmp_path / "out",
        "data.corpus=text",
        f"data.train_files=[{text}]",
        f"data.valid_files=[{text}]",
    )
    assert_user_error(*result[::2], "data.corpus = 'text'", "gives text records", "needs a parallel corpus")


def test_train_without_data_or_network_says_where_to_put_the_files(capsys, tmp_path, monkeypatch):
    requested = []

    def no_network(url, *args, **kwargs):
        requested.append(url)
        raise urllib.error.URLError("network disabled in this test")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli(
        capsys,
        "train",
        "--config",
        write_config(tmp_path),
        "--output-dir",
        tmp_path / "out",
        "--data-dir",
        empty,
    )
    assert_user_error(
        *result[::2], "download of", "failed", f"Put the Multi30k files at {empty / 'multi30k'}"
    )
    assert requested and all(url.startswith(multi30k.BASE_URL) for url in requested)


def test_train_bad_key_in_a_real_process(tmp_path):
    proc = run_process(
        "train", "--config", write_config(tmp_path), "--output-dir", tmp_path / "out", "train.lrr=1"
    )
    assert_user_error(proc.returncode, proc.stderr.decode(), "lrr")
    assert proc.stdout == b""
