"""The plugin interface: what a task provides and how the rest of attnkit finds it.

Every task, built-in (:mod:`attnkit.tasks`) or a plugin installed beside attnkit, is a
:class:`TaskInfo` registered in the entry-point group ``attnkit.tasks`` (:mod:`.registry`). Its
training object keeps :class:`~.training.Task`, what it serves keeps
:class:`~.served.ServedModel`; its commands, endpoints and evaluation build on :mod:`.flags`, :mod:`.http` and
:mod:`.evaluation`. The trainer, the server, the commands and the exporter ask :func:`tasks`,
:func:`task_named`, :func:`task_of_arch` and :func:`task_of`; none of them names a task.

This package imports the library below it (data, model, decoding) and never the core above it
(cli, serve, train, export) nor a task: both import it. Its face and the registry import no torch:
every command finds the tasks through them, ``attnkit --help`` included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import CheckpointError, ConfigError
from .info import TaskInfo
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
    "TaskInfo",
    "endpoint_task",
    "expect_task",
    "task_for",
    "task_named",
    "task_of",
    "task_of_arch",
    "tasks",
]
