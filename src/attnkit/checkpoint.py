"""Checkpoints: one file holding everything needed to translate with a model or resume its training.

Written atomically (a temporary file in the same folder, then ``os.replace``), so a crash or a full
disk mid-write never leaves a half-written checkpoint behind; read with
``torch.load(weights_only=True)``, so a checkpoint cannot run code. Contents (plain types and tensors
only):

    format, arch, model_config, tokenizer, experiment   -- enough to translate
    model                                               -- the weights
    optimizer, step, epoch, sampler, rng, metrics       -- present in training checkpoints
    crc32                                               -- a CRC-32 of every tensor, by its path
    content_crc32                                       -- a CRC-32 of everything else

torch does not check its zip entries' CRCs on load, so flipped bytes inside a tensor would load as
silently wrong weights; ``crc32`` is verified on load instead. The rest (the tokenizer's bytes, the
model config, the training state's numbers) is covered by ``content_crc32``, a CRC-32 of a canonical
encoding of every value that is not a tensor: one flipped bit in the SentencePiece model, or
``relu`` turned ``gelu`` in ``model_config``, is found on load rather than translating otherwise.
Checkpoints written before either existed still load, unverified in what they lack.

Before a model is built its config is checked against the weights' shapes on the meta device
(:func:`model_from_checkpoint`): a config that does not fit its weights allocates nothing.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from .errors import CheckpointError, ConfigError
from .files import (
    ZIP_MAGIC,
    atomic_copy,
    atomic_write,
    check_output_path,
    describe_os_error,
    os_error_in,
    starts_with,
)
from .model.registry import ARCHS

if TYPE_CHECKING:
    from .experiment import Experiment

FORMAT = "attnkit-checkpoint-1"


def save_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` (with a CRC-32 of each tensor) to ``path`` atomically.

    A write that fails (full disk, unwritable folder) raises :class:`CheckpointError` naming the
    path and the reason; ``path`` keeps its previous content and no temporary file is left.
    """
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"cannot write checkpoint {path}: it is a folder")
    state = {"format": FORMAT, **{k: v for k, v in state.items() if k not in CHECKSUM_KEYS}}
    checksums = {name: _crc32(t) for name, t in _tensors(state)}  # recomputed: never a stale one
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "wb") as f:
            torch.save({**state, "crc32": checksums, "content_crc32": content_crc32(state)}, f)
    except (OSError, RuntimeError) as e:  # torch.save wraps the OSError of a failed write
        cause = os_error_in(e)
        if cause is None:
            raise
        raise CheckpointError(f"cannot write checkpoint {path}: {describe_os_error(cause)}") from None
    return path


def is_attnkit_checkpoint(path: Path) -> bool:
    """Whether ``path`` holds an attnkit checkpoint (its header read; the tensors are not loaded)."""
    if not starts_with(path, ZIP_MAGIC):
        return False
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # anything torch cannot read is not one
        return False
    return isinstance(state, dict) and state.get("format") == FORMAT


def check_checkpoint_output(
    path: str | Path, *, force: bool, what: str = "--output", make_folders: bool = False
) -> Path:
    """An output checkpoint's path, checked now: an existing file is replaced only with ``--force``,
    and only if it is an attnkit checkpoint (:func:`attnkit.files.check_output_path`)."""
    return check_output_path(
        path,
        what=what,
        make_folders=make_folders,
        force=force,
        replaceable=is_attnkit_checkpoint,
        kind="an attnkit checkpoint",
    )


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


CHECKSUM_KEYS = ("crc32", "content_crc32")


def content_crc32(state: dict[str, Any]) -> int:
    """CRC-32 of every value in ``state`` that is not a tensor, with its path and type, in a canonical
    order (dict keys sorted, sets sorted): the same state gives the same number in any process."""
    crc = 0
    for path, value in _leaves({k: v for k, v in state.items() if k not in CHECKSUM_KEYS}):
        crc = zlib.crc32(f"{path}:{type(value).__name__}=".encode(), crc)
        crc = zlib.crc32(bytes(value) if isinstance(value, (bytes, bytearray)) else repr(value).encode(), crc)
    return crc


def _leaves(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every value that is not a container or a tensor, with its path (a tensor's place is kept by
    ``crc32``'s own table)."""
    if isinstance(obj, Tensor):
        return
    if isinstance(obj, dict):
        yield f"{prefix}{{}}", len(obj)
        for key in sorted(obj, key=repr):
            yield from _leaves(obj[key], f"{prefix}/{key!r}")
    elif isinstance(obj, (list, tuple)):
        yield f"{prefix}[]", len(obj)
        for i, value in enumerate(obj):
            yield from _leaves(value, f"{prefix}/{i}")
    elif isinstance(obj, (set, frozenset)):
        yield prefix, sorted(map(repr, obj))
    else:
        yield prefix, obj


def _crc32(t: Tensor) -> int:
    """CRC-32 of the tensor's bytes (any dtype, any device)."""
    flat = t.detach().contiguous().reshape(-1)
    if not flat.numel():
        return 0
    return zlib.crc32(flat.view(torch.uint8).cpu().numpy().data)  # .data: the array's bytes, no copy


def verify_checksums(state: dict[str, Any], path: str | Path = "checkpoint") -> None:
    """Raise :class:`CheckpointError` if a tensor's bytes, or anything else, differ from the CRC-32
    saved with them."""
    content = state.get("content_crc32")
    if content is not None and content != content_crc32(state):
        raise CheckpointError(
            f"{path}: checkpoint damaged (checksum mismatch in its contents: the tokenizer, the config "
            "or the training state)"
        )
    saved = state.get("crc32")
    if saved is None:
        return  # written before checksums existed
    if not isinstance(saved, dict):
        raise CheckpointError(f"{path}: checkpoint damaged (its checksum table is unreadable)")
    found = dict(_tensors({k: v for k, v in state.items() if k not in CHECKSUM_KEYS}))
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
    """Rebuild the model and load its weights; a mismatch is a :class:`CheckpointError`.

    The model is built on the meta device first (shapes, no memory) and compared with the weights,
    so a config that does not fit them (``d_model: 1000000`` beside a small model's tensors) is one
    line before anything is allocated."""
    arch = state["arch"]
    check_shapes(state)
    try:
        model = build_model(arch, state["model_config"])
    except ConfigError as e:
        raise CheckpointError(f"checkpoint has an incompatible model config: {e}") from None
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint weights do not fit the model: {str(e).splitlines()[0]}") from None
    return model


class _ShapesOnly(TorchFunctionMode):
    """Skip in-place ops (the initialisers' ``normal_``, ``zero_`` ...): they change no shape, and on
    the meta device their first call costs a second of torch's set-up."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name.endswith("_") and not name.endswith("__"):
            target = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
            if isinstance(target, Tensor):
                return target
        return func(*args, **kwargs)


def check_shapes(state: dict[str, Any]) -> None:
    """Raise :class:`CheckpointError` unless ``state["model"]`` loads into the model that
    ``state["model_config"]`` builds, both on the meta device: the model's own load path (an older
    checkpoint's packed or tied weights upgraded by its hooks), no memory."""
    try:
        with torch.device("meta"), _ShapesOnly():
            shape_model = build_model(state["arch"], state["model_config"])
    except ConfigError as e:
        raise CheckpointError(f"checkpoint has an incompatible model config: {e}") from None
    weights = state["model"]
    if not isinstance(weights, dict) or not all(isinstance(t, Tensor) for t in weights.values()):
        raise CheckpointError("checkpoint weights are not a table of tensors")
    shapes = {name: torch.empty(t.shape, dtype=t.dtype, device="meta") for name, t in weights.items()}
    try:
        shape_model.load_state_dict(shapes, assign=True)
    except RuntimeError as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        detail = lines[1] if len(lines) > 1 else lines[0] if lines else "shapes differ"
        raise CheckpointError(f"checkpoint weights do not fit its model config: {detail}") from None


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
