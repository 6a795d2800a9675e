"""The tasks attnkit trains and serves, found through one registry (:mod:`.registry`).

Each task has one home, a package holding its training object, inference wrapper, metrics,
evaluation, served model, endpoints and commands (:class:`~.base.TaskInfo` names them), registered
in the entry-point group ``attnkit.tasks``, as a plugin outside attnkit registers:

- :mod:`.translation` ("translate"): ``transformer`` and ``rnn`` models;
- :mod:`.language_model` ("generate"): ``lm``;
- :mod:`.classification` ("classify"): ``classifier``;
- :mod:`.captioning` ("caption"): ``captioner``.

The trainer, the server, the commands and the exporter ask :func:`tasks`, :func:`task_named`,
:func:`task_of_arch` and :func:`task_of`; none of them names a task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import CheckpointError, ConfigError
from .base import Encoded, Task, TaskInfo
from .registry import load as tasks


def task_of_arch(arch: str) -> TaskInfo:
    """The first registered task whose models have ``model.arch`` = ``arch``."""
    for task in tasks():
        if arch in task.archs:
            return task
    archs = dict.fromkeys(a for task in tasks() for a in task.archs)
    raise ConfigError(f"model.arch = {arch!r}: must be one of {', '.join(archs)}")


def task_named(name: str) -> TaskInfo:
    """The task called ``name`` ("translate", "generate", ...): a ConfigError naming the choices."""
    for task in tasks():
        if task.name == name:
            return task
    raise ConfigError(f"task = {name!r}: must be one of {', '.join(t.name for t in tasks())}")


def task_for(name: str | None, arch: str) -> TaskInfo:
    """A config's task: ``task:`` when given (it must accept the arch), else the arch's."""
    if name is None:
        return task_of_arch(arch)
    task = task_named(name)
    if arch not in task.archs:
        raise ConfigError(f"task {name!r} takes model.arch {' or '.join(task.archs)}, not {arch!r}")
    return task


def task_of(state: dict[str, Any], path: str | Path = "checkpoint") -> TaskInfo:
    """The task of a loaded checkpoint (its ``task``, or, written before tasks had names in
    checkpoints, its arch's); unknown is a :class:`CheckpointError` naming the file."""
    try:
        return task_for(state.get("task"), state["arch"])
    except ConfigError as e:
        if state.get("task") is None:
            raise CheckpointError(f"{path}: unknown model arch {state['arch']!r}") from None
        raise CheckpointError(f"{path}: {e}") from None


def expect_task(state: dict[str, Any], name: str, path: str | Path = "checkpoint") -> TaskInfo:
    """``task_of(state)``, which must be the task ``name``: else an error saying what the file holds."""
    task, wanted = task_of(state, path), task_named(name)
    if task is not wanted:
        raise CheckpointError(f"{path} holds {task.noun} (arch {state['arch']!r}), not {wanted.noun}")
    return task


def endpoint_task(endpoint: str) -> TaskInfo:
    """The task whose models answer ``/v1/ENDPOINT``."""
    return next(task for task in tasks() if endpoint in task.endpoints)


__all__ = [
    "Encoded",
    "Task",
    "TaskInfo",
    "endpoint_task",
    "expect_task",
    "task_for",
    "task_named",
    "task_of",
    "task_of_arch",
    "tasks",
]
