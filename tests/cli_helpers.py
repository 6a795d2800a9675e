"""Helpers for the ``attnkit`` command tests: run it in-process or as a real process, check errors.

The product rule under test: a wrong flag, a bad config key or value, a missing or malformed file, or
a corrupt or incompatible checkpoint prints ONE line on stderr and exits with code 2, no traceback.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
from pathlib import Path

import torch

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Trains in a few seconds on one CPU thread: enough to exercise every command, not to translate well.
# lr 0.01 is high on purpose: after 20 steps greedy search emits words rather than only end-of-sentence.
TINY_CONFIG = """\
data: {max_train_pairs: 300, max_valid_pairs: 10}
tokenizer: {vocab_size: 300}
model: {preset: tiny}
train: {max_steps: 20, max_tokens: 1000, schedule: inverse_sqrt, lr: 0.01, warmup_steps: 10, progress: false}
valid: {every: 10, keep_last: 2}
"""
SENTENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau mit einem roten Hut."]
N_EVAL = 20  # sentences in the small evaluation split


def cli(capsys, *argv) -> tuple[int, str, str]:
    """Run ``attnkit ARGV`` in-process: (exit code, stdout, stderr)."""
    from attnkit.cli import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse: --help and usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def cli_stdin(capsys, monkeypatch, data: bytes, *argv) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    return cli(capsys, *argv)


def run_process(*argv, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """``python -m attnkit.cli ARGV`` in a real process (one torch thread, as in the fixture)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "attnkit.cli", *map(str, argv)]
    return subprocess.run(cmd, input=stdin, capture_output=True, env=env, timeout=120)


def assert_user_error(code: int, err: str, *fragments: str) -> None:
    """Exit code 2 and exactly one stderr line, no traceback, naming every fragment."""
    assert code == 2, f"exit code {code}, stderr:\n{err}"
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"


def write_config(tmp_path: Path, text: str = TINY_CONFIG) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def api_translations(ckpt: Path, lines: list[str], beam: int) -> list[str]:
    from attnkit.tasks.translation import Translator

    translator = Translator.from_checkpoint(ckpt, device="cpu")
    return [t.text for t in translator.translate(lines, beam=beam)]


def assert_png(path: Path) -> None:
    assert path.is_file(), f"{path} was not written"
    assert path.read_bytes()[:8] == PNG_MAGIC, f"{path} is not a PNG"


def bad_checkpoint(kind: str, tmp_path: Path, good: Path) -> Path:
    """A checkpoint file that must be rejected: random bytes, truncated, foreign (or missing)."""
    path = tmp_path / f"{kind}.pt"
    if kind.startswith("random"):  # deterministic "random" bytes, so a failure reproduces
        path.write_bytes(random.Random(int(kind.removeprefix("random"))).randbytes(2000))
    elif kind == "truncated":
        path.write_bytes(good.read_bytes()[:100_000])
    elif kind == "foreign":
        torch.save({"a": 1}, path)
    return path
