"""What the server serves: one object per loaded checkpoint, made by the checkpoint's task.

A checkpoint's task (:func:`attnkit.tasks.task_of`) makes its served model (``TaskInfo.serve``) and
names the endpoints that answer for it (``TaskInfo.endpoints``); an endpoint asked of a model of
another task answers 422 naming what it needs and what is loaded.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..checkpoint import load_checkpoint
from ..errors import CheckpointError, ConfigError
from ..files import describe_os_error
from ..plugin import TaskInfo, task_of
from ..plugin.served import ServedModel, missing_members

__all__ = [
    "load_models",
    "model_name",
    "read_checkpoints",
    "release_weights",
]


def model_name(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` or ``PATH``; a bare path is named after its file, or its folder for checkpoint_*.pt."""
    name, sep, path = spec.partition("=")
    if sep and name and "/" not in name:
        return name, Path(path)
    p = Path(spec)
    return (p.parent.name or p.stem) if p.stem.startswith("checkpoint") else p.stem, p


def read_checkpoints(specs: Sequence[str]) -> tuple[bytes, ...]:
    """The bytes of every ``--checkpoint`` spec's file, read once: what the server serves for its whole
    life (a decoding process that restarts loads these, never a file that training may have
    overwritten or someone may have moved since)."""
    contents = []
    for spec in specs:
        _, path = model_name(spec)
        if not path.is_file():
            raise CheckpointError(f"checkpoint not found: {path}")
        try:
            contents.append(path.read_bytes())
        except OSError as e:
            raise CheckpointError(f"cannot read checkpoint {path}: {describe_os_error(e)}") from None
    return tuple(contents)


def load_models(
    specs: Sequence[str],
    *,
    device: str = "auto",
    contents: Sequence[bytes] | None = None,
    engine: str = "torch",
    threads: int | None = None,
    load_engine: bool = True,
    compile: bool = False,
) -> list[ServedModel]:
    """Load every ``--checkpoint`` spec (from ``contents``, the files' bytes as
    :func:`read_checkpoints` read them; else from the files); names must be unique, tasks servable.

    ``engine``, ``threads``, ``load_engine`` and ``compile`` go to each checkpoint's task, whose
    served model decides what they mean for it (``TaskInfo.serve``): e.g. translation with
    CTranslate2, exported now unless cached, or through the compiled step (a GPU's)."""
    contents = read_checkpoints(specs) if contents is None else contents
    if len(contents) != len(specs):
        raise ValueError(f"{len(specs)} checkpoint specs but {len(contents)} contents")
    models: list[ServedModel] = []
    for spec, blob in zip(specs, contents):
        name, path = model_name(spec)
        if any(m.name == name for m in models):
            raise ConfigError(f"two checkpoints are named {name!r}: name them with NAME=PATH")
        state = load_checkpoint(path, data=blob)  # the bytes read at start, never the file now
        engine_options: dict[str, Any] = dict(engine=engine, threads=threads, load_engine=load_engine)
        engine_options.update(compile=compile, path=path, blob=blob, announce=_announcer(name))
        models.append(_served(task_of(state, path), name, state, device, engine_options))
    if not models:
        raise ConfigError("no checkpoint to serve: give --checkpoint PATH")
    return models


def _served(task: TaskInfo, name: str, state: dict, device: str, engine: dict[str, Any]) -> ServedModel:
    """The task's served model, which must have every member of :class:`ServedModel` (a plugin's
    that lacks one is refused at load, naming it, rather than failing on its first request)."""
    model = task.load("serve")(name, state, device, **engine)
    missing = missing_members(model)
    if missing:
        raise ConfigError(f"task {task.name!r} serves a {type(model).__name__} without {', '.join(missing)}")
    return model


def release_weights(models: list[ServedModel]) -> None:
    """Free the weights of models that decode in another process; their tokenizers, configs and
    labels stay (what the server checks requests against)."""
    for m in models:
        m.release()


def _announcer(name: str):
    """Where a served model's compiles are announced: the server's stderr, a line each."""

    def announce(message: str) -> None:
        print(f"attnkit serve: model {name!r}: {message}", file=sys.stderr, flush=True)

    return announce
