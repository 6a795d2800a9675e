"""What the server serves: one object per loaded checkpoint, made by the checkpoint's task.

A checkpoint's task (:func:`attnkit.tasks.task_of`) makes its served model (``TaskInfo.serve``) and
names the endpoints that answer for it (``TaskInfo.endpoints``); an endpoint asked of a model of
another task answers 422 naming what it needs and what is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..checkpoint import load_checkpoint
from ..errors import ConfigError
from ..tasks import TASKS, TaskInfo, task_of
from ..tasks.classification import ClassifierServed
from ..tasks.language_model import LanguageModelServed
from ..tasks.translation import TranslationModel

__all__ = [
    "ClassifierServed",
    "LanguageModelServed",
    "ServedModel",
    "TranslationModel",
    "endpoint_task",
    "load_models",
    "model_name",
    "release_weights",
]


@runtime_checkable
class ServedModel(Protocol):
    """A loaded checkpoint as the server sees it."""

    name: str
    task: str  # its TaskInfo's name
    arch: str

    def describe(self) -> dict[str, Any]: ...

    def release(self) -> None:
        """Free the weights; what requests are checked against (tokenizer, config, labels) stays."""
        ...


def endpoint_task(endpoint: str) -> TaskInfo:
    """The task whose models answer ``/v1/ENDPOINT``."""
    return next(task for task in TASKS if endpoint in task.endpoints)


def model_name(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` or ``PATH``; a bare path is named after its file, or its folder for checkpoint_*.pt."""
    name, sep, path = spec.partition("=")
    if sep and name and "/" not in name:
        return name, Path(path)
    p = Path(spec)
    return (p.parent.name or p.stem) if p.stem.startswith("checkpoint") else p.stem, p


def load_models(specs: list[str], *, device: str = "auto") -> list[ServedModel]:
    """Load every ``--checkpoint`` spec; names must be unique, tasks servable."""
    models: list[ServedModel] = []
    for spec in specs:
        name, path = model_name(spec)
        if any(m.name == name for m in models):
            raise ConfigError(f"two checkpoints are named {name!r}: name them with NAME=PATH")
        state = load_checkpoint(path)
        models.append(task_of(state, path).serve(name, state, device))
    if not models:
        raise ConfigError("no checkpoint to serve: give --checkpoint PATH")
    return models


def release_weights(models: list[ServedModel]) -> None:
    """Free the weights of models that decode in another process; their tokenizers, configs and
    labels stay (what the server checks requests against)."""
    for m in models:
        m.release()
