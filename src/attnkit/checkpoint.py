"""Checkpoints: one file holding everything needed to translate with a model or resume its training.

Written atomically (a temporary file in the same folder, then ``os.replace``), so a crash mid-write
never leaves a half-written checkpoint behind; read with ``torch.load(weights_only=True)``, so a
checkpoint cannot run code. Contents (plain types and tensors only):

    format, arch, model_config, tokenizer, experiment   -- enough to translate
    model                                               -- the weights
    optimizer, step, epoch, sampler, rng, metrics       -- present in training checkpoints
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .errors import CheckpointError, ConfigError
from .model.registry import ARCHS

FORMAT = "attnkit-checkpoint-1"



def save_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save({"format": FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path, *, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint; a missing, corrupt or foreign file raises :class:`CheckpointError`."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception:  # torch's unpickler raises almost anything on random bytes
        raise CheckpointError(
            f"{path}: not a readable checkpoint (corrupt, truncated or not a torch file)"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an attnkit checkpoint (expected format {FORMAT!r})")
    for key in ("arch", "model_config", "model", "tokenizer"):
        if key not in state:
            raise CheckpointError(f"{path}: checkpoint lacks {key!r}")
    return state


def average_checkpoints(paths: list[str | Path]) -> dict[str, Any]:
    """Average the model weights of several checkpoints of one run (Vaswani et al., section 6.1).

    Returns the last checkpoint's state with averaged weights and no optimizer state.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    states = [load_checkpoint(p) for p in paths]
    first = states[0]
    for p, s in zip(paths[1:], states[1:]):
        if s["arch"] != first["arch"] or s["model_config"] != first["model_config"]:
            raise CheckpointError(f"{p}: a different model than {paths[0]}; cannot average")
    avg = {}
    for name, tensor in first["model"].items():
        if tensor.is_floating_point():
            avg[name] = sum(s["model"][name].double() for s in states).div(len(states)).to(tensor.dtype)
        else:
            avg[name] = tensor
    keep = ("arch", "model_config", "tokenizer", "experiment", "step", "epoch")
    out = {k: states[-1][k] for k in keep if k in states[-1]}
    out["model"] = avg
    out["averaged_from"] = [str(p) for p in paths]
    return out


def build_model(arch: str, config: dict[str, Any]) -> nn.Module:
    """A fresh model of ``arch`` from its config dict."""
    if arch not in ARCHS:
        raise ConfigError(f"unknown model arch {arch!r} (known: {', '.join(ARCHS)})")
    model_cls, config_cls = ARCHS[arch]
    return model_cls(config_cls.from_dict(config))


def model_from_checkpoint(state: dict[str, Any], *, expect_arch: str | None = None) -> nn.Module:
    """Rebuild the model and load its weights; a mismatch is a :class:`CheckpointError`."""
    arch = state["arch"]
    if expect_arch is not None and arch != expect_arch:
        raise CheckpointError(f"checkpoint holds a {arch!r} model, but the config asks for {expect_arch!r}")
    try:
        model = build_model(arch, state["model_config"])
    except ConfigError as e:
        raise CheckpointError(f"checkpoint has an incompatible model config: {e}") from None
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint weights do not fit the model: {str(e).splitlines()[0]}") from None
    return model


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model under DistributedDataParallel and torch.compile wrappers."""
    while True:
        if hasattr(model, "module"):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model
