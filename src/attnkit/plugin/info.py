"""One task's record: its name, its models' archs, and the parts the rest of attnkit finds through
the registry (:mod:`.registry`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .training import Task


@dataclass(frozen=True)
class TaskInfo:
    """One task's parts, as the rest of attnkit finds them (through :mod:`.registry`).

    name: the task's name, as ``task:`` in a config and the server's API say it ("translate").
    noun: what a model of the task is called in messages ("a translation model").
    archs: the ``model.arch`` values whose models this task trains and serves; a config without
    ``task:`` takes the first registered task that lists its arch.
    records: the kind of record it reads ("pairs", "text", "labelled").
    training: the trainer's task object, built from ``(Experiment, amp)``, amp the autocast dtype.
    open: the inference wrapper from a loaded checkpoint: ``open(state, device=..., path=...)``.
    serve: the server's model from ``(name, state, device)``.
    endpoints: the server endpoints (``/v1/NAME``) that answer for this task.
    routes: ``"module:function"``, the function that adds those endpoints to the app
    (``function(app, server)``, :class:`attnkit.serve.app.Server`); imported only by the server.
    commands: the task's command-line verbs, verb -> ``"module"`` holding ``add_parser`` and ``run``.
    evaluate: ``"module:function"``, what ``attnkit evaluate`` runs: ``function(args, state)``.
    evaluate_flags: the flags of ``attnkit evaluate`` that only some tasks read which it reads
    (``--src``, ``--ref``, ``--hyp-output``, ``--lowercase``, ``--input``, ``--confusion``).
    attention: ``"module:function"``, what ``attnkit attention`` runs: ``function(args, state)``.
    attention_flags: what it reads and writes beyond ``--out``: ``--text`` or ``--image``, ``--html``.
    page: the package whose ``static/`` holds the task's panel of the attention page (``panel.js``,
    which calls ``registerPanel``; ``input.html`` and ``view.html`` where it has them), or None.
    """

    name: str
    noun: str
    archs: tuple[str, ...]
    records: str
    training: Callable[..., Task]
    open: Callable[..., Any]
    serve: Callable[[str, dict[str, Any], str], Any]
    endpoints: tuple[str, ...]
    routes: str | None = None
    commands: Mapping[str, str] = field(default_factory=dict)
    evaluate: str | None = None
    evaluate_flags: tuple[str, ...] = ()
    attention: str | None = None
    attention_flags: tuple[str, ...] = ("--text",)
    page: str | None = None

    def command_names(self) -> tuple[str, ...]:
        return tuple(self.commands)
