"""What the export tests share: a small Transformer trained on Multi30k once per session, the test
sentences, and the skip rule for the optional ``attnkit[export]`` packages.

The model (d_model 64, 2+2 layers, 600 joint SentencePiece pieces) trains for 250 steps, about
20 CPU seconds on one thread (valid BLEU ~10): poor translations, but real ones that end in eos
(97 of the first 100 test sentences), which is what parity needs (a model that never stops would
only compare length limits).
"""

from __future__ import annotations

import atexit
import functools
import gzip
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TRAIN_CONFIG = """\
data: {max_train_pairs: 3000, max_valid_pairs: 20, max_len: 40}
tokenizer: {vocab_size: 600}
model: {preset: tiny, d_model: 64, d_ff: 128, max_len: 64, share_vocab: true}
train: {max_steps: 250, max_tokens: 1500, schedule: inverse_sqrt, lr: 0.005, warmup_steps: 50,
        progress: false}
valid: {every: 100000, keep_last: 1}
"""


def require(*modules: str) -> None:
    """Skip when an optional package is missing, except in CI (CI=true), where it is a failure."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing and os.environ.get("CI") == "true":
        pytest.fail(f"CI must install attnkit[export]; missing: {', '.join(missing)}")
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (pip install 'attnkit[export]')")


def require_data() -> None:
    if not (SHARED_DATA / "multi30k" / "train.de.gz").is_file():
        pytest.skip(f"Multi30k not found under {SHARED_DATA}")


@functools.cache
def workdir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="attnkit-export-tests-"))
    atexit.register(shutil.rmtree, path, True)
    return path


@functools.cache
def trained_checkpoint(norm: str = "post") -> Path:
    """checkpoint_best.pt of the small model (trained once per session and norm)."""
    require_data()
    from attnkit.train import load_config, train

    root = workdir() / f"train-{norm}"
    root.mkdir()
    (root / "config.yaml").write_text(TRAIN_CONFIG)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = load_config(
            root / "config.yaml",
            [f"data.data_dir={SHARED_DATA}", f"output_dir={root / 'run'}", f"model.norm={norm}"],
        )
        result = train(cfg, log=lambda message: None)
    finally:
        torch.set_num_threads(threads)
    return result.last_checkpoint


@functools.cache
def flickr_sentences(n: int = 100) -> tuple[list[str], list[str]]:
    """The first ``n`` German sources and English references of test_2016_flickr."""
    require_data()
    out = []
    for lang in ("de", "en"):
        with gzip.open(SHARED_DATA / "multi30k" / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8") as f:
            out.append([f.readline().rstrip("\n") for _ in range(n)])
    return out[0], out[1]


def length_limit(n_src: int, max_len: int, a: float = 1.5, b: int = 10) -> int:
    """attnkit's per-sentence limit (tokens, eos included), as ``decoding.common.length_limits``."""
    return max(1, min(int(a * n_src + b), max_len - 1))


def variant_checkpoint(name: str, seed: int = 3, **overrides) -> Path:
    """An untrained Transformer with the session model's tokenizer and config changed by ``overrides``,
    its weights jittered so that biases, norms and output biases are not at their initial values."""
    from attnkit.checkpoint import load_checkpoint, save_checkpoint
    from attnkit.model import Transformer, TransformerConfig

    state = load_checkpoint(trained_checkpoint())
    cfg = TransformerConfig.from_dict(state["model_config"]).replace(**overrides)
    torch.manual_seed(seed)
    model = Transformer(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    path = workdir() / f"variant-{name}.pt"
    save_checkpoint(
        {
            "arch": "transformer",
            "model_config": cfg.to_dict(),
            "tokenizer": state["tokenizer"],
            "model": model.state_dict(),
        },
        path,
    )
    return path


def lm_checkpoint(name: str, seed: int = 3, **overrides) -> Path:
    """An untrained language model (model.arch lm, d_model 64, 2 layers, max_len 40) with the session
    model's tokenizer and ``overrides``, its weights jittered as :func:`variant_checkpoint`'s."""
    from attnkit.checkpoint import load_checkpoint, save_checkpoint
    from attnkit.data.tokenizer import SubwordTokenizer
    from attnkit.model import LMConfig, TransformerLM

    state = load_checkpoint(trained_checkpoint())
    vocab = SubwordTokenizer.from_state_dict(state["tokenizer"]).src_vocab_size
    base = dict(d_model=64, n_heads=4, d_ff=128, n_layers=2, max_len=40, dropout=0.0, vocab_size=vocab)
    cfg = LMConfig(**{**base, **overrides})
    torch.manual_seed(seed)
    model = TransformerLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    path = workdir() / f"lm-{name}.pt"
    save_checkpoint(
        {
            "arch": "lm",
            "model_config": cfg.to_dict(),
            "tokenizer": state["tokenizer"],
            "model": model.state_dict(),
        },
        path,
    )
    return path


def engine_setup(name: str, n_sentences: int) -> tuple[Path, Path]:
    """(the trained checkpoint copied into a folder of its own, so its CTranslate2 cache starts
    empty; a file of ``n_sentences`` test_2016_flickr sentences) for an engine's tests."""
    require("ctranslate2")
    folder = workdir() / name
    folder.mkdir()
    ckpt = folder / "model.pt"
    shutil.copy(trained_checkpoint(), ckpt)
    src = folder / "in.de"
    src.write_text("\n".join(flickr_sentences(n_sentences)[0]) + "\n", encoding="utf-8")
    return ckpt, src
