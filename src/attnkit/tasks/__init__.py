"""The tasks attnkit trains and serves, and the one map from a model's ``arch`` to its task.

Each task has one home, a package holding its training object, inference wrapper, metrics, one
evaluation function and served model (:class:`~.base.TaskInfo` names them):

- :mod:`.translation` ("translate"): ``transformer`` and ``rnn`` models;
- :mod:`.language_model` ("generate"): ``lm``;
- :mod:`.classification` ("classify"): ``classifier``;
- :mod:`.captioning` ("caption"): ``captioner``.

The trainer, the server, the commands and the exporter ask :func:`task_of_arch` /
:func:`task_of`; no other module compares architecture names. A new task is a package with a
``TASK`` and one line in ``TASKS``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import CheckpointError, ConfigError
from .base import Encoded, Task, TaskInfo
from .captioning import TASK as CAPTIONING
from .classification import TASK as CLASSIFICATION
from .language_model import TASK as LANGUAGE_MODEL
from .translation import TASK as TRANSLATION

TASKS: tuple[TaskInfo, ...] = (TRANSLATION, LANGUAGE_MODEL, CLASSIFICATION, CAPTIONING)
_BY_ARCH = {arch: task for task in TASKS for arch in task.archs}
_BY_NAME = {task.name: task for task in TASKS}


def task_of_arch(arch: str) -> TaskInfo:
    """The task whose models have ``model.arch`` = ``arch``."""
    if arch not in _BY_ARCH:
        raise ConfigError(f"model.arch = {arch!r}: must be one of {', '.join(_BY_ARCH)}")
    return _BY_ARCH[arch]


def task_named(name: str) -> TaskInfo:
    """The task called ``name`` ("translate", "generate", "classify")."""
    return _BY_NAME[name]


def task_of(state: dict[str, Any], path: str | Path = "checkpoint") -> TaskInfo:
    """The task of a loaded checkpoint; an unknown arch is a :class:`CheckpointError` naming the file."""
    try:
        return task_of_arch(state["arch"])
    except ConfigError:
        raise CheckpointError(f"{path}: unknown model arch {state['arch']!r}") from None


def expect_task(state: dict[str, Any], name: str, path: str | Path = "checkpoint") -> TaskInfo:
    """``task_of(state)``, which must be the task ``name``: else an error saying what the file holds."""
    task, wanted = task_of(state, path), task_named(name)
    if task is not wanted:
        raise CheckpointError(f"{path} holds {task.noun} (arch {state['arch']!r}), not {wanted.noun}")
    return task


__all__ = [
    "CAPTIONING",
    "CLASSIFICATION",
    "LANGUAGE_MODEL",
    "TASKS",
    "TRANSLATION",
    "Encoded",
    "Task",
    "TaskInfo",
    "expect_task",
    "task_named",
    "task_of",
    "task_of_arch",
]
