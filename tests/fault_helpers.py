"""Shared by the fault suite (tests/test_faults*.py): tiny checkpoints, a CLI runner, the one-line rule.

The checkpoints here are untrained (random weights, a SentencePiece model trained in a second on a
synthetic corpus): the fault tests check what happens around a model, never what it translates.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import random
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import save_checkpoint
from attnkit.cli import main
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.model import Transformer, TransformerConfig
from cli_helpers import assert_user_error  # noqa: F401 (re-exported: the fault tests import it from here)

WORDS = (
    "ein mann eine frau zwei hunde spielen im schnee auf der straße mit einem roten hut sitzt bank "
    "kind läuft durch das gras ball wasser blau grün haus vor dem kleine große junge mädchen"
).split()


def synthetic_sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))).capitalize() + "." for _ in range(n)
    ]


def make_tokenizer(seed: int = 0, vocab_size: int = 64) -> SubwordTokenizer:
    """A joint SentencePiece model; another ``seed`` gives another model with the same vocabulary size."""
    src, tgt = synthetic_sentences(200, seed), synthetic_sentences(200, seed + 1000)
    return SubwordTokenizer.train(src, tgt, vocab_size=vocab_size, num_threads=1, seed=seed)


def make_state(tokenizer: SubwordTokenizer, *, seed: int = 0) -> dict:
    """A translation checkpoint's contents: a random tiny Transformer over ``tokenizer``."""
    torch.manual_seed(seed)
    vocab = tokenizer.src_vocab_size
    config = TransformerConfig.preset(
        "tiny", src_vocab_size=vocab, tgt_vocab_size=vocab, share_vocab=True, max_len=16
    )
    model = Transformer(config).eval()
    return {
        "arch": "transformer",
        "model_config": config.to_dict(),
        "tokenizer": tokenizer.state_dict(),
        "experiment": {
            "data": {"corpus": "files", "train_files": ["a.src", "a.tgt"], "valid_files": ["b.src", "b.tgt"]}
        },
        "model": model.state_dict(),
    }


def write_checkpoint(path: Path, tokenizer: SubwordTokenizer, *, seed: int = 0) -> Path:
    return save_checkpoint(make_state(tokenizer, seed=seed), path)


def cli(*argv, stdin: bytes = b"") -> tuple[int, str, str]:
    """``attnkit ARGV`` in-process with ``stdin``: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main([str(a) for a in argv])
            except SystemExit as e:  # argparse usage errors
                code = e.code
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue(), err.getvalue()


def process_env() -> dict:
    """The environment of a child ``attnkit``: the attnkit these tests import, one torch thread."""
    import attnkit

    src = str(Path(attnkit.__file__).resolve().parents[1])
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": src}


def attnkit_cmd(*argv) -> list[str]:
    return [sys.executable, "-m", "attnkit.cli", *map(str, argv)]


def stray_files(folder: Path) -> list[str]:
    """Temporary files left behind by an interrupted or failed write."""
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith((".tmp", ".probe")))


class DiskFull:
    """Make every file opened through ``attnkit.files`` fail with ENOSPC after ``budget`` bytes.

    Patched at ``os.fdopen`` in attnkit.files, where checkpoints, PNGs and --output files are opened.
    """

    def __init__(self, monkeypatch, budget: int = 1000):
        import attnkit.files

        real = os.fdopen

        def fdopen(fd, mode="r", *args, **kwargs):
            return _Limited(real(fd, mode, *args, **kwargs), budget)

        monkeypatch.setattr(attnkit.files.os, "fdopen", fdopen)


class _Limited(contextlib.AbstractContextManager):
    def __init__(self, f, budget: int):
        self._f, self._left = f, budget

    def write(self, data):
        size = len(data.encode("utf-8") if isinstance(data, str) else memoryview(data).cast("B"))
        if size > self._left:
            self._left = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._left -= size
        return self._f.write(data)

    def __exit__(self, *exc):
        self._f.close()

    def __getattr__(self, name):
        return getattr(self._f, name)


NOT_UTF8 = b"Ein Hund \xff\xfe spielt.\n"


@dataclass
class Files:
    """The fault suite's input files and checkpoint (the ``files`` fixture)."""

    root: Path
    ckpt: Path
    paths: dict[str, Path] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Path:
        return self.paths[name]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Files:
    root = tmp_path_factory.mktemp("inputs")
    ckpt = write_checkpoint(root / "model.pt", make_tokenizer(0))
    f = Files(root, ckpt)
    write = {
        "empty.txt": b"",
        "blank.txt": b"\n\n\n",
        "one.txt": b"Ein Hund spielt im Schnee.\n",
        "two.txt": b"Ein Hund.\nZwei Katzen.\n",
        "not_utf8.txt": NOT_UTF8,
        "huge_line.txt": ("Hund " * 200_000 + "\n").encode(),  # one 1 MB line
        "many_lines.txt": "Ein Mann fährt Fahrrad.\n".encode() * 1000,
        "nul.txt": b"Ein\x00Hund\n",
        "random.bin": bytes(range(256)) * 64,
        "empty.yaml": b"",
        "not_utf8.yaml": b"train: {lr: \xff}\n",
        "malformed.yaml": b"train: [1\n",
        "list.yaml": b"- a\n- b\n",
        "unknown_key.yaml": b"train: {learning_rate: 0.1}\n",
        "metrics.csv": b"step,val_bleu\n1,2\n",
    }
    for name, data in write.items():
        f.paths[name] = root / name
        f.paths[name].write_bytes(data)
    f.paths["truncated.pt"] = root / "truncated.pt"
    f.paths["truncated.pt"].write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    f.paths["folder"] = root / "a_folder"
    f.paths["folder"].mkdir()
    f.paths["missing"] = root / "missing.txt"
    f.paths["in_missing_folder"] = root / "no_such_folder" / "out.txt"
    f.paths["under_a_file"] = root / "one.txt" / "out.txt"
    return f


def fill(text: str, f: Files, out: Path, quote=str) -> str:
    """``text`` with each {name} placeholder replaced by that file (or the checkpoint, output, root)."""
    names = {
        **{k: str(v) for k, v in f.paths.items()},
        "ckpt": str(f.ckpt),
        "out": str(out),
        "root": str(f.root),
    }
    for key, value in names.items():
        text = text.replace("{" + key + "}", quote(value))
    return text
