"""Fault suite, outputs and the Python API: output paths checked before any decoding (and written
whole, through symlinks, keeping their mode), a str given to ``Translator.translate``, bad search
settings, a reader that leaves early, and a beam wider than half the vocabulary in every command.
"""

from __future__ import annotations

import os

import pytest
import torch

from attnkit.errors import ConfigError, DataError
from attnkit.tasks.translation import Translator
from fault_helpers import (
    assert_user_error,
    attnkit_cmd,
    cli,
    fill,
    process_env,
)

torch.set_num_threads(1)


# -- outputs are checked before the decoding --------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["translate", "--input", "{one.txt}", "--output", "{in_missing_folder}"],
        ["translate", "--input", "{one.txt}", "--output", "{folder}"],
        ["evaluate", "--src", "{one.txt}", "--ref", "{one.txt}", "--hyp-output", "{in_missing_folder}"],
        ["evaluate", "--src", "{one.txt}", "--ref", "{one.txt}", "--hyp-output", "{under_a_file}"],
        ["attention", "--text", "Ein Hund", "--out", "{under_a_file}.png"],
    ],
    ids=[
        "translate-missing-folder",
        "translate-folder",
        "evaluate-missing-folder",
        "evaluate-under-file",
        "attention-under-a-file",
    ],
)
def test_output_paths_are_checked_before_any_decoding(monkeypatch, files, argv):
    def must_not_decode(*args, **kwargs):
        raise AssertionError("decoded before checking the output path")

    monkeypatch.setattr(Translator, "translate", must_not_decode)
    argv = [argv[0], "--checkpoint", str(files.ckpt), *(fill(a, files, files.root) for a in argv[1:])]
    code, _, err = cli(*argv)
    assert_user_error(code, err)


def test_plot_positional_bound_is_checked_before_allocating(monkeypatch, tmp_path):
    import attnkit.positional

    def must_not_allocate(*args, **kwargs):
        raise AssertionError("allocated before checking the bounds")

    monkeypatch.setattr(attnkit.positional, "sinusoidal_encoding", must_not_allocate)
    code, _, err = cli(
        "plot-positional", "--d-model", "20000", "--max-len", "20000", "--out", tmp_path / "p.png"
    )
    assert_user_error(code, err, "from 1 to 4,096")


def test_output_keeps_its_mode_and_replaces_the_old_content(files, tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old\n")
    os.chmod(out, 0o640)
    code, _, err = cli(
        "translate",
        "--checkpoint",
        files.ckpt,
        "--output",
        out,
        "--beam",
        "1",
        stdin=b"Ein Hund.\nZwei Katzen.\n",
    )
    assert code == 0, err
    assert len(out.read_text().splitlines()) == 2
    assert out.stat().st_mode & 0o777 == 0o640


def test_output_through_a_symlink_replaces_its_target(files, tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    code, _, err = cli(
        "translate", "--checkpoint", files.ckpt, "--output", link, "--beam", "1", stdin=b"Ein Hund.\n"
    )
    assert code == 0, err
    assert link.is_symlink() and target.read_text() != "old\n"


# -- item 4: a str given to Translator.translate -----------------------------------------------


@pytest.fixture(scope="module")
def translator(files) -> Translator:
    return Translator.from_checkpoint(files.ckpt, device="cpu")


def test_a_str_is_one_sentence_not_a_list_of_characters(translator):
    text = "Zwei Hunde."
    (one,) = translator.translate(text, beam=2)
    (expected,) = translator.translate([text], beam=2)
    assert one.text == expected.text and one.tokens == expected.tokens
    assert one.src_pieces == translator.tokenizer.pieces(text, side="src")


@pytest.mark.parametrize(
    "sentences, fragment",
    [
        (b"Zwei Hunde", "bytes"),
        (["Ein Hund", None], "sentence 1 is a NoneType"),
        (["Ein Hund", 3], "sentence 1 is a int"),
        (42, "int"),
        (["Ein \udcff Hund"], "sentence 0 is not valid text"),
    ],
)
def test_translate_rejects_what_is_not_text(translator, sentences, fragment):
    with pytest.raises(DataError, match=fragment):
        translator.translate(sentences)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"beam": 0}, "beam"),
        ({"beam": 2.5}, "beam"),
        ({"nbest": 3, "beam": 2}, "nbest"),
        ({"length_penalty": float("nan")}, "length_penalty"),
        ({"length_penalty": float("inf")}, "length_penalty"),
        ({"batch_tokens": 0}, "batch_tokens"),
    ],
)
def test_translate_rejects_bad_search_settings(translator, kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        translator.translate(["Ein Hund."], **kwargs)


def test_a_reader_that_leaves_early_is_not_an_error(files):
    """``attnkit translate | head -1``: a closed pipe ends the command quietly (141, as SIGPIPE would)."""
    import subprocess

    argv = ["translate", "--checkpoint", files.ckpt, "--beam", 1, "--input", files["two.txt"]]
    proc = subprocess.Popen(
        attnkit_cmd(*argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=process_env()
    )
    proc.stdout.close()  # the reader is gone before the first translation is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""


# -- item 6: a beam larger than half the vocabulary (fixed in decoding; the commands must work) --


@pytest.mark.parametrize("command", ["translate", "evaluate", "attention"])
@pytest.mark.slow
def test_a_beam_larger_than_half_the_vocabulary_works_in_every_command(files, tmp_path, command):
    vocab = Translator.from_checkpoint(files.ckpt, device="cpu").tokenizer.tgt_vocab_size
    beam = vocab // 2 + 8
    argv = {
        "translate": ["--input", files["two.txt"]],
        "evaluate": ["--src", files["two.txt"], "--ref", files["two.txt"]],
        "attention": ["--text", "Ein Hund.", "--out", tmp_path / "map.png"],
    }[command]
    code, out, err = cli(command, "--checkpoint", files.ckpt, "--beam", beam, "--device", "cpu", *argv)
    assert code == 0, err
    assert "Traceback" not in err
