"""Tiny untrained checkpoints for the decoding-control and ensemble tests (a tokenizer of a few captions).

What these tests check is the search (prefixes, lengths, repetition controls, averaging), not what a
model learned, so untrained models on a SentencePiece model of ~75 captions are enough.
"""

from __future__ import annotations

import io
import sys
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import torch

from attnkit.checkpoint import save_checkpoint
from attnkit.cli import main
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.model import LMConfig, Transformer, TransformerConfig, TransformerLM

TEXT = [
    f"{a} {b} {c} ."
    for a in ("A dog", "Two men", "A woman", "Three kids", "The cat")
    for b in ("runs", "sits", "plays", "walks", "sleeps")
    for c in ("on the grass", "in the snow", "at home")
]


def tiny_tokenizer(vocab_size: int = 36) -> SubwordTokenizer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the corpus may not fill vocab_size pieces
        return SubwordTokenizer.train(TEXT, TEXT, vocab_size=vocab_size)


def save_translation(path: Path, tok: SubwordTokenizer, *, seed: int = 0) -> Path:
    """An untrained tiny Transformer checkpoint over ``tok`` (weights from ``seed``)."""
    torch.manual_seed(seed)
    V = tok.src_vocab_size
    cfg = TransformerConfig.preset("tiny", src_vocab_size=V, tgt_vocab_size=V, share_vocab=True)
    state = {
        "tokenizer": tok.state_dict(),
        "experiment": {},
        "arch": "transformer",
        "model_config": cfg.to_dict(),
        "model": Transformer(cfg).state_dict(),
    }
    return save_checkpoint(state, path)


def tiny_lm(tok: SubwordTokenizer, *, seed: int = 0) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(LMConfig.preset("tiny", vocab_size=tok.src_vocab_size, max_len=48)).eval()


def repeated_ngram(ids: list[int], n: int) -> tuple[int, ...] | None:
    """The first n-gram that occurs twice in ``ids``, or None."""
    seen = set()
    for i in range(len(ids) - n + 1):
        gram = tuple(ids[i : i + n])
        if gram in seen:
            return gram
        seen.add(gram)
    return None


def cli(*argv, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    """``attnkit ARGV`` in-process, ``stdin`` as its input: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8"))
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()
