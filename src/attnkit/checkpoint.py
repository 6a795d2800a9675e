"""Checkpoints: one file holding everything needed to translate with a model or resume its training.

Written atomically (a temporary file in the same folder, then ``os.replace``), so a crash or a full
disk mid-write never leaves a half-written checkpoint behind; read with
``torch.load(weights_only=True)``, so a checkpoint cannot run code. Contents (plain types and tensors
only):

    format, arch, model_config, tokenizer, experiment   -- enough to translate
    model                                               -- the weights
    optimizer, step, epoch, sampler, rng, metrics       -- present in training checkpoints
    crc32                                               -- a CRC-32 of every tensor, by its path

torch does not check its zip entries' CRCs on load, so flipped bytes inside a tensor would load as
silently wrong weights; ``crc32`` is verified on load instead. Checkpoints written before it existed
(no ``crc32`` key) still load, unverified.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from .errors import CheckpointError, ConfigError
from .files import atomic_copy, atomic_write, describe_os_error, os_error_in
from .model.registry import ARCHS

if TYPE_CHECKING:
    from .config import Experiment

FORMAT = "attnkit-checkpoint-1"


def save_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` (with a CRC-32 of each tensor) to ``path`` atomically.

    A write that fails (full disk, unwritable folder) raises :class:`CheckpointError` naming the
    path and the reason; ``path`` keeps its previous content and no temporary file is left.
    """
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"cannot write checkpoint {path}: it is a folder")
    state = {k: v for k, v in state.items() if k != "crc32"}  # recomputed: never a stale one
    checksums = {name: _crc32(t) for name, t in _tensors(state)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "wb") as f:
            torch.save({"format": FORMAT, **state, "crc32": checksums}, f)
    except (OSError, RuntimeError) as e:  # torch.save wraps the OSError of a failed write
        cause = os_error_in(e)
        if cause is None:
            raise
        raise CheckpointError(f"cannot write checkpoint {path}: {describe_os_error(cause)}") from None
    return path


def copy_checkpoint(src: str | Path, dst: str | Path) -> Path:
    """Copy the checkpoint file ``src`` to ``dst`` atomically (its checksums travel with it), with
    :func:`save_checkpoint`'s one-line error; much faster than saving the same state again."""
    try:
        return atomic_copy(src, dst)
    except OSError as e:
        raise CheckpointError(f"cannot write checkpoint {dst}: {describe_os_error(e)}") from None


def _tensors(obj: Any, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
    """Every tensor inside nested dicts, lists and tuples, with a path such as ``model/w1.weight``."""
    if isinstance(obj, Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from _tensors(value, f"{prefix}/{key}" if prefix else str(key))
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from _tensors(value, f"{prefix}/{i}")


def _crc32(t: Tensor) -> int:
    """CRC-32 of the tensor's bytes (any dtype, any device)."""
    flat = t.detach().contiguous().reshape(-1)
    if not flat.numel():
        return 0
    return zlib.crc32(flat.view(torch.uint8).cpu().numpy().data)  # .data: the array's bytes, no copy


def verify_checksums(state: dict[str, Any], path: str | Path = "checkpoint") -> None:
    """Raise :class:`CheckpointError` if a tensor's bytes differ from the CRC-32 saved with it."""
    saved = state.get("crc32")
    if saved is None:
        return  # written before checksums existed
    if not isinstance(saved, dict):
        raise CheckpointError(f"{path}: checkpoint damaged (its checksum table is unreadable)")
    found = dict(_tensors({k: v for k, v in state.items() if k != "crc32"}))
    for name in sorted(set(saved) | set(found)):
        if name not in found or name not in saved or _crc32(found[name]) != saved[name]:
            what = "weights" if name.startswith("model/") else "training state"
            raise CheckpointError(f"{path}: {what} damaged (checksum mismatch in {name})")


def load_checkpoint(
    path: str | Path, *, map_location: str | torch.device = "cpu", data: bytes | None = None
) -> dict[str, Any]:
    """Read a checkpoint; a missing, corrupt or foreign file raises :class:`CheckpointError`.

    data: the file's bytes, read earlier (the server keeps them); ``path`` then only names it.
    """
    path = Path(path)
    if data is None and not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        source = io.BytesIO(data) if data is not None else path
        state = torch.load(source, map_location=map_location, weights_only=True)
    except Exception:  # torch's unpickler raises almost anything on random bytes
        raise CheckpointError(
            f"{path}: not a readable checkpoint (corrupt, truncated or not a torch file)"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an attnkit checkpoint (expected format {FORMAT!r})")
    for key in ("arch", "model_config", "model", "tokenizer"):
        if key not in state:
            raise CheckpointError(f"{path}: checkpoint lacks {key!r}")
    verify_checksums(state, path)
    return state


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, Any]:
    """Average the model weights of several checkpoints of one run (Vaswani et al., section 6.1).

    Returns the last checkpoint's state with averaged weights and no optimizer state.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    seen: dict[Path, str | Path] = {}
    for p in paths:
        key = Path(p).resolve()
        if key in seen:
            also = f" (also as {seen[key]})" if str(seen[key]) != str(p) else ""
            raise CheckpointError(f"{p} is listed twice{also}; each checkpoint counts once")
        seen[key] = p
    states = [load_checkpoint(p) for p in paths]
    first = states[0]
    for p, s in zip(paths[1:], states[1:]):
        if s["arch"] != first["arch"] or s["model_config"] != first["model_config"]:
            raise CheckpointError(f"{p}: a different model than {paths[0]}; cannot average")
        if s["tokenizer"] != first["tokenizer"]:
            raise CheckpointError(
                f"{p}: a different tokenizer (SentencePiece model) than {paths[0]}; the same ids mean "
                "other subwords, so the average would be meaningless: average checkpoints of one run"
            )
    avg = {}
    for name, tensor in first["model"].items():
        if tensor.is_floating_point():
            avg[name] = sum(s["model"][name].double() for s in states).div(len(states)).to(tensor.dtype)
        else:
            avg[name] = tensor
    keep = ("arch", "task", "model_config", "tokenizer", "experiment", "step", "epoch")
    out = {k: states[-1][k] for k in keep if k in states[-1]}
    out["model"] = avg
    out["averaged_from"] = [str(p) for p in paths]
    return out


def build_model(arch: str, config: dict[str, Any]) -> nn.Module:
    """A fresh model of ``arch`` from its config dict."""
    if arch not in ARCHS:
        raise ConfigError(f"unknown model arch {arch!r} (known: {', '.join(ARCHS)})")
    model_cls, config_cls = ARCHS[arch]
    model = model_cls(config_cls.from_dict(config))
    if config.get("pruned_heads"):  # `attnkit prune`'s checkpoints: those heads' weights are gone
        from .heads import prune_heads

        prune_heads(model, config["pruned_heads"])
    return model


def model_from_checkpoint(state: dict[str, Any]) -> nn.Module:
    """Rebuild the model and load its weights; a mismatch is a :class:`CheckpointError`."""
    arch = state["arch"]
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
            inner = model.module
        elif hasattr(model, "_orig_mod"):
            inner = model._orig_mod
        else:
            return model
        assert isinstance(inner, nn.Module)  # what DDP and torch.compile wrap
        model = inner


def load_init(cfg: Experiment) -> dict[str, Any]:
    """The checkpoint ``train.init_from`` names, checked against the config's architecture."""
    path = cfg.train.init_from
    state = load_checkpoint(path)
    if state.get("arch") != cfg.arch:
        raise ConfigError(
            f"train.init_from: {path} holds a {state.get('arch')!r} model, the config's model.arch is "
            f"{cfg.arch!r}; set model.arch={state.get('arch')}"
        )
    if cfg.tokenizer.model:
        raise ConfigError(
            f"train.init_from: the tokenizer comes from {path} (its embeddings are indexed by it); "
            "remove tokenizer.model"
        )
    return state
