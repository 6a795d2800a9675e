"""Fault suite, bad input: every CLI command fed empty, huge, non-UTF-8 and malformed input, missing
and unwritable paths and numbers that are not numbers. Each case either works (exit 0, no traceback)
or is one line on stderr naming the problem, with exit code 2; nothing hangs, nothing is half-written.

Issue 9 items 4 (a str given to ``Translator.translate``), 8 (bounded allocations) and 9 (output
paths checked before decoding), and the audit's "of the same kinds".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fault_helpers import (
    NOT_UTF8,
    Files,
    assert_user_error,
    cli,
    fill,
    stray_files,
)

torch.set_num_threads(1)


# Each case: (id, argv with {placeholders}, stdin, None for success or the fragments of the error line).
# {ckpt} is the checkpoint; {name} is a file from the fixture; {out} is a fresh path in a fresh folder.
CASES = [
    # translate: input
    ("translate-empty-stdin", "translate --checkpoint {ckpt}", b"", None),
    ("translate-blank-lines", "translate --checkpoint {ckpt} --input {blank.txt}", b"", None),
    ("translate-empty-file", "translate --checkpoint {ckpt} --input {empty.txt}", b"", None),
    ("translate-huge-line", "translate --checkpoint {ckpt} --input {huge_line.txt} --beam 1", b"", None),
    ("translate-many-lines", "translate --checkpoint {ckpt} --input {many_lines.txt} --beam 1", b"", None),
    ("translate-nul-byte", "translate --checkpoint {ckpt} --beam 1", b"Ein\x00Hund\n", None),
    ("translate-not-utf8-stdin", "translate --checkpoint {ckpt}", NOT_UTF8, ["stdin", "UTF-8"]),
    (
        "translate-not-utf8-file",
        "translate --checkpoint {ckpt} --input {not_utf8.txt}",
        b"",
        ["not_utf8.txt", "UTF-8"],
    ),
    (
        "translate-binary-file",
        "translate --checkpoint {ckpt} --input {random.bin}",
        b"",
        ["random.bin", "UTF-8"],
    ),
    ("translate-missing-input", "translate --checkpoint {ckpt} --input {missing}", b"", ["missing.txt"]),
    ("translate-input-is-folder", "translate --checkpoint {ckpt} --input {folder}", b"", ["a_folder"]),
    # translate: checkpoint
    ("translate-missing-ckpt", "translate --checkpoint {missing}", b"x\n", ["missing.txt", "not found"]),
    ("translate-empty-ckpt", "translate --checkpoint {empty.txt}", b"x\n", ["empty.txt", "not a readable"]),
    ("translate-text-as-ckpt", "translate --checkpoint {one.txt}", b"x\n", ["one.txt", "not a readable"]),
    ("translate-truncated-ckpt", "translate --checkpoint {truncated.pt}", b"x\n", ["truncated.pt"]),
    ("translate-folder-ckpt", "translate --checkpoint {folder}", b"x\n", ["a_folder"]),
    # translate: output
    (
        "translate-output-folder",
        "translate --checkpoint {ckpt} --output {folder}",
        b"x\n",
        ["a_folder", "folder"],
    ),
    (
        "translate-output-missing-folder",
        "translate --checkpoint {ckpt} --output {in_missing_folder}",
        b"x\n",
        ["no_such_folder", "does not exist"],
    ),
    (
        "translate-output-under-a-file",
        "translate --checkpoint {ckpt} --output {under_a_file}",
        b"x\n",
        ["one.txt", "not a folder"],
    ),
    ("translate-output-file", "translate --checkpoint {ckpt} --output {out} --beam 1", b"Ein Hund.\n", None),
    # translate: numbers
    ("translate-beam-0", "translate --checkpoint {ckpt} --beam 0", b"x\n", ["--beam", "from 1 to 256"]),
    ("translate-beam-negative", "translate --checkpoint {ckpt} --beam -3", b"x\n", ["--beam"]),
    ("translate-beam-huge", "translate --checkpoint {ckpt} --beam 1000000000", b"x\n", ["--beam", "to 256"]),
    ("translate-beam-text", "translate --checkpoint {ckpt} --beam four", b"x\n", ["--beam"]),
    ("translate-nbest-huge", "translate --checkpoint {ckpt} --nbest 99999", b"x\n", ["--nbest", "to 1,000"]),
    (
        "translate-lp-nan",
        "translate --checkpoint {ckpt} --length-penalty nan",
        b"x\n",
        ["--length-penalty", "a number from 0 to 10", "nan"],
    ),
    (
        "translate-lp-inf",
        "translate --checkpoint {ckpt} --length-penalty inf",
        b"x\n",
        ["--length-penalty", "a number from 0 to 10", "inf"],
    ),
    (
        "translate-lp-text",
        "translate --checkpoint {ckpt} --length-penalty high",
        b"x\n",
        ["--length-penalty"],
    ),
    (
        "translate-batch-tokens-0",
        "translate --checkpoint {ckpt} --batch-tokens 0",
        b"x\n",
        ["--batch-tokens"],
    ),
    (
        "translate-batch-tokens-1",
        "translate --checkpoint {ckpt} --batch-tokens 1 --beam 1",
        b"Ein Hund.\n",
        None,
    ),
    ("translate-device-typo", "translate --checkpoint {ckpt} --device gpu", b"x\n", ["--device"]),
    # evaluate
    (
        "evaluate-empty-files",
        "evaluate --checkpoint {ckpt} --src {empty.txt} --ref {empty.txt}",
        b"",
        ["empty.txt", "no lines"],
    ),
    (
        "evaluate-blank-references",
        "evaluate --checkpoint {ckpt} --src {blank.txt} --ref {blank.txt}",
        b"",
        ["blank.txt", "empty"],
    ),
    (
        "evaluate-mismatched",
        "evaluate --checkpoint {ckpt} --src {one.txt} --ref {two.txt}",
        b"",
        ["line counts"],
    ),
    (
        "evaluate-not-utf8",
        "evaluate --checkpoint {ckpt} --src {one.txt} --ref {not_utf8.txt}",
        b"",
        ["not_utf8.txt", "UTF-8"],
    ),
    ("evaluate-src-without-ref", "evaluate --checkpoint {ckpt} --src {one.txt}", b"", ["--src and --ref"]),
    (
        "evaluate-huge-line",
        "evaluate --checkpoint {ckpt} --src {huge_line.txt} --ref {huge_line.txt} --beam 1",
        b"",
        None,
    ),
    ("evaluate-unknown-split", "evaluate --checkpoint {ckpt} --split nope", b"", ["--split", "'files'"]),
    (
        "evaluate-hyp-output-folder",
        "evaluate --checkpoint {ckpt} --src {one.txt} --ref {one.txt} --hyp-output {folder}",
        b"",
        ["--hyp-output", "a_folder"],
    ),
    (
        "evaluate-hyp-output-missing-folder",
        "evaluate --checkpoint {ckpt} --src {one.txt} --ref {one.txt} --hyp-output {in_missing_folder}",
        b"",
        ["--hyp-output", "does not exist"],
    ),
    (
        "evaluate-hyp-output-file",
        "evaluate --checkpoint {ckpt} --src {one.txt} --ref {one.txt} --beam 1 --hyp-output {out}",
        b"",
        None,
    ),
    (
        "evaluate-lp-nan",
        "evaluate --checkpoint {ckpt} --src {one.txt} --ref {one.txt} --length-penalty nan",
        b"",
        ["--length-penalty"],
    ),
    # attention
    ("attention-empty-text", "attention --checkpoint {ckpt} --text '' --out {out}.png", b"", ["empty"]),
    ("attention-blank-text", "attention --checkpoint {ckpt} --text '   ' --out {out}.png", b"", ["empty"]),
    (
        "attention-not-utf8-text",
        "attention --checkpoint {ckpt} --text 'Ein \udcff Hund' --out {out}.png",
        b"",
        ["not valid text"],
    ),
    ("attention-huge-text", "attention --checkpoint {ckpt} --text HUGE --out {out}.png --beam 1", b"", None),
    ("attention-out-not-png", "attention --checkpoint {ckpt} --text Hund --out {out}.txt", b"", [".png"]),
    ("attention-out-folder", "attention --checkpoint {ckpt} --text Hund --out {folder}", b"", ["a_folder"]),
    (
        "attention-out-under-a-file",
        "attention --checkpoint {ckpt} --text Hund --out {one.txt}/sub/a.png",
        b"",
        ["one.txt", "not a folder"],
    ),
    (
        "attention-out-new-folder",
        "attention --checkpoint {ckpt} --text Hund --out {out}/new/a.png --beam 1",
        b"",
        None,
    ),
    (
        "plot-positional-out-under-a-file",
        "plot-positional --out {one.txt}/a.png",
        b"",
        ["one.txt", "not a folder"],
    ),
    (
        "attention-missing-ckpt",
        "attention --checkpoint {missing} --text Hund --out {out}.png",
        b"",
        ["missing.txt"],
    ),
    (
        "attention-beam-huge",
        "attention --checkpoint {ckpt} --text Hund --out {out}.png --beam 100000",
        b"",
        ["--beam"],
    ),
    # plot-positional
    (
        "plot-positional-huge",
        "plot-positional --d-model 100000 --max-len 100000 --out {out}.png",
        b"",
        ["--d-model", "from 1 to 4,096"],
    ),
    (
        "plot-positional-huge-len",
        "plot-positional --max-len 20000 --out {out}.png",
        b"",
        ["--max-len", "from 1 to 4,096"],
    ),
    ("plot-positional-zero", "plot-positional --d-model 0 --out {out}.png", b"", ["--d-model", "from 1 to"]),
    ("plot-positional-float", "plot-positional --d-model 1e3 --out {out}.png", b"", ["--d-model"]),
    ("plot-positional-one", "plot-positional --d-model 1 --max-len 1 --out {out}.png", b"", None),
    ("plot-positional-out-folder", "plot-positional --out {folder}", b"", ["a_folder"]),
    ("plot-positional-out-txt", "plot-positional --out {out}.txt", b"", [".png"]),
    # average
    ("average-empty-ckpt", "average --checkpoints {ckpt} {empty.txt} --output {out}", b"", ["empty.txt"]),
    ("average-random-ckpt", "average --checkpoints {ckpt} {random.bin} --output {out}", b"", ["random.bin"]),
    ("average-missing-ckpt", "average --checkpoints {ckpt} {missing} --output {out}", b"", ["missing.txt"]),
    ("average-output-folder", "average --checkpoints {ckpt} --output {folder}", b"", ["a_folder", "folder"]),
    (
        "average-output-missing-folder",
        "average --checkpoints {ckpt} --output {in_missing_folder}",
        b"",
        ["does not exist"],
    ),
    # generate, classify, serve: the wrong kind of checkpoint, broken checkpoints, bad numbers
    ("generate-translation-ckpt", "generate --checkpoint {ckpt} --prompt x", b"", ["not a language model"]),
    ("generate-empty-ckpt", "generate --checkpoint {empty.txt} --prompt x", b"", ["empty.txt"]),
    (
        "generate-temperature-nan",
        "generate --checkpoint {ckpt} --prompt x --temperature nan",
        b"",
        ["--temperature"],
    ),
    (
        "classify-translation-ckpt",
        "classify --checkpoint {ckpt} --input {two.txt}",
        b"",
        ["not a classifier"],
    ),
    ("classify-random-ckpt", "classify --checkpoint {random.bin} --input {two.txt}", b"", ["random.bin"]),
    ("serve-port-out-of-range", "serve --checkpoint {ckpt} --port 99999", b"", ["--port"]),
    ("serve-negative-body", "serve --checkpoint {ckpt} --max-body-bytes -1", b"", ["--max-body-bytes"]),
    ("serve-zero-join-group", "serve --checkpoint {ckpt} --join-group 0", b"", ["--join-group"]),
    (
        "serve-negative-join-wait",
        "serve --checkpoint {ckpt} --join-wait-steps -1",
        b"",
        ["--join-wait-steps"],
    ),
    # train: config file and overrides (each fails before any data is read)
    ("train-empty-config", "train --config {empty.yaml} --output-dir {out}", b"", ["empty.yaml", "empty"]),
    (
        "train-not-utf8-config",
        "train --config {not_utf8.yaml} --output-dir {out}",
        b"",
        ["not_utf8.yaml", "UTF-8"],
    ),
    (
        "train-malformed-config",
        "train --config {malformed.yaml} --output-dir {out}",
        b"",
        ["malformed.yaml", "YAML"],
    ),
    ("train-list-config", "train --config {list.yaml} --output-dir {out}", b"", ["list.yaml", "mapping"]),
    ("train-unknown-key", "train --config {unknown_key.yaml} --output-dir {out}", b"", ["learning_rate"]),
    ("train-binary-config", "train --config {random.bin} --output-dir {out}", b"", ["random.bin"]),
    ("train-missing-config", "train --config {missing} --output-dir {out}", b"", ["missing.txt"]),
    ("train-config-is-folder", "train --config {folder} --output-dir {out}", b"", ["a_folder"]),
    ("train-override-not-utf8", "train --config {list.yaml} train.lr=\udcff", b"", ["override", "UTF-8"]),
    ("train-output-dir-not-utf8", "train --config {list.yaml} --output-dir {root}/\udcff", b"", ["UTF-8"]),
    ("train-override-malformed", "train --config {unknown_key.yaml} lr", b"", ["section.key=value"]),
    ("train-resume-random", "train --config {one.txt} --resume {random.bin}", b"", []),
]


def _argv(template: str, f: Files, out: Path) -> list[str]:
    import shlex

    argv = shlex.split(fill(template, f, out, shlex.quote))
    return ["Hund " * 5000 if a == "HUGE" else a for a in argv]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.slow
def test_cli_bad_input(case, files, tmp_path):
    name, template, stdin, fragments = case
    out = tmp_path / "out"
    code, stdout, err = cli(*_argv(template, files, out), stdin=stdin)
    assert "Traceback" not in err, err
    if fragments is None:
        assert code == 0, f"{name}: exit {code}\n{err}"
        assert all(line.startswith("attnkit: warning:") for line in err.splitlines()), err
    else:
        assert_user_error(code, err, *fragments)
    assert stray_files(files.root) == [] and stray_files(tmp_path) == []


def test_no_case_wrote_into_a_missing_folder(files):
    """A text or checkpoint output in a missing folder is refused, never created as a new folder.

    (Figures are different: ``attention --out figs/map.png`` creates ``figs``, as it always has.)
    """
    assert not (files.root / "no_such_folder").exists()


# --- checked by subject here (they were once in a file named after the round they were written in)
FIXTURE_CKPT = Path(__file__).parent / "fixtures" / "c46ef86" / "translation_step3.pt"
FIXTURE_CONFIG = Path(__file__).parent / "fixtures" / "c46ef86" / "config.yaml"


@pytest.mark.parametrize("seed", ["-1", "4294967296", "99999999999999999999999"])
def test_a_seed_outside_32_bits_is_one_line(tmp_path, seed):
    code, _, err = cli(
        "train",
        "--config",
        Path(__file__).parent / "fixtures" / "c46ef86" / "config.yaml",
        "--output-dir",
        tmp_path / "run",
        f"train.seed={seed}",
    )
    assert_user_error(code, err, "seed", "0 to 4,294,967,295")


def test_an_unknown_key_suggests_the_close_one(tmp_path):
    config = Path(__file__).parent / "fixtures" / "c46ef86" / "config.yaml"
    code, _, err = cli("train", "--config", config, "--output-dir", tmp_path / "run", "train.max_stepz=3")
    assert_user_error(code, err, "max_stepz", "did you mean max_steps?")


@pytest.mark.parametrize("closed", ["0<&-", "1>&-"])
@pytest.mark.slow
def test_a_closed_standard_input_or_output_is_one_line(closed):
    cmd = f"{sys.executable} -m attnkit.cli translate --checkpoint {FIXTURE_CKPT} {closed}"
    done = subprocess.run(
        ["bash", "-c", cmd], capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "standard " + ("input" if closed.startswith("0") else "output") + " is closed" in done.stderr


def test_workers_past_the_machine_s_cores_are_refused(tmp_path):
    too_many = str((os.cpu_count() or 1) + 1)
    code, _, err = cli(
        "prepare", "--config", tmp_path / "x.yaml", "--output", tmp_path / "p", "--workers", too_many
    )
    assert_user_error(code, err, "--workers", "cores")
    code, _, err = cli("serve", "--checkpoint", FIXTURE_CKPT, "--workers", too_many)
    assert code == 2 and "--workers" in err and "cores" in err


def test_a_prefix_the_vocabulary_cannot_spell_is_refused_not_printed_as_unknown(tmp_path):
    prefix = tmp_path / "prefix.txt"
    prefix.write_text("A 狗 dog\n", encoding="utf-8")
    argv = ["translate", "--checkpoint", FIXTURE_CKPT, "--prefix-file", prefix]
    code, out, err = cli(*argv, stdin=b"Ein Hund.\n")
    assert_user_error(code, err, "prefix of sentence 1", "'狗'")
    assert out == ""


def test_unclear_errors_name_what_is_wrong(tmp_path):
    root = Path(__file__).resolve().parents[1]
    code, _, err = cli(
        "prepare",
        "--config",
        root / "configs" / "captions_shapes_tiny.yaml",
        "--output",
        tmp_path / "p",
    )
    assert_user_error(code, err, "a captioner", "does not train from them")
    code, _, err = cli(
        "train",
        "--config",
        FIXTURE_CONFIG,
        "--output-dir",
        tmp_path / "r",
        "data.mix=[{files: [a.de, a.en], tag: '</s>'}]",
    )
    assert_user_error(code, err, "tag '</s>'", "special pieces")
