"""The registry of tasks: every task, built-in or not, registers through the entry-point group
``attnkit.tasks`` (``name = "package.module:TASK"``, a :class:`~.info.TaskInfo`).

A plugin is a package installed beside attnkit whose ``pyproject.toml`` names its TaskInfo in that
group; the commands, the trainer and the server then find it here, as they find translation. A
plugin that fails to import, or whose task name, command or endpoint is already taken, is left out
with one warning line naming it and the clash; the other tasks keep working.
"""

from __future__ import annotations

import warnings
from importlib import metadata

from .info import TaskInfo

GROUP = "attnkit.tasks"
# The built-in tasks, as attnkit's own pyproject.toml registers them: what a source tree that was
# never installed (no entry points) still finds.
BUILT_IN = {
    "translate": "attnkit.tasks.translation:TASK",
    "generate": "attnkit.tasks.language_model:TASK",
    "classify": "attnkit.tasks.classification:TASK",
    "caption": "attnkit.tasks.captioning:TASK",
}

_loaded: tuple[TaskInfo, ...] | None = None


def _entry_points() -> list[metadata.EntryPoint]:
    """The group's entry points, the built-in ones first (they win a clash), each once."""
    found = {ep.value: ep for ep in metadata.entry_points(group=GROUP)}
    built_in = [found.pop(v) if v in found else metadata.EntryPoint(k, v, GROUP) for k, v in BUILT_IN.items()]
    return built_in + sorted(found.values(), key=lambda ep: ep.value)


def _clash(task: TaskInfo, taken: dict[str, str]) -> str | None:
    """What of ``task`` another task already holds (``taken``: "kind name" -> its module)."""
    names = [f"task {task.name!r}"] + [f"command {c!r}" for c in task.command_names()]
    names += [f"endpoint /v1/{e}" for e in task.endpoints]
    for name in names:
        if name in taken:
            return f"its {name} is taken by {taken[name]}"
    return None


def load() -> tuple[TaskInfo, ...]:
    """Every registered task, in order: the built-in ones, then plugins by module name."""
    global _loaded
    if _loaded is not None:
        return _loaded
    tasks: list[TaskInfo] = []
    taken: dict[str, str] = {}
    for ep in _entry_points():
        try:
            task = ep.load()
        except Exception as e:  # a broken plugin: said in one line, the others keep working
            warnings.warn(
                f"task plugin {ep.value} failed to import ({type(e).__name__}: {e}); left out", stacklevel=2
            )
            continue
        if not isinstance(task, TaskInfo):
            warnings.warn(
                f"task plugin {ep.value} is a {type(task).__name__}, not a TaskInfo; left out", stacklevel=2
            )
            continue
        clash = _clash(task, taken)
        if clash:
            warnings.warn(f"task plugin {ep.value} left out: {clash}", stacklevel=2)
            continue
        for name in [f"task {task.name!r}", *(f"command {c!r}" for c in task.command_names())]:
            taken[name] = ep.value.partition(":")[0]
        for endpoint in task.endpoints:
            taken[f"endpoint /v1/{endpoint}"] = ep.value.partition(":")[0]
        tasks.append(task)
    _loaded = tuple(tasks)
    return _loaded
