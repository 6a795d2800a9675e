"""One task's record: its name, its models' archs, and the parts the rest of attnkit finds through
the registry (:mod:`.registry`): the objects it names, and the modules of its package found by name.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError

if TYPE_CHECKING:
    from .training import Task


@dataclass(frozen=True)
class TaskInfo:
    """One task: what it is, and where its parts are.

    name: the task's name, as ``task:`` in a config and the server's API say it ("translate").
    noun: what a model of the task is called in messages ("a translation model").
    archs: the ``model.arch`` values whose models this task trains and serves; a config without
    ``task:`` takes the first registered task that lists its arch.
    records: the kind of record it reads ("pairs", "text", "labelled").
    training: the trainer's task object, built from ``(Experiment, amp)``, amp the autocast dtype.
    open: the inference wrapper from a loaded checkpoint: ``open(state, device=..., path=...)``.
    serve: the server's model from ``(name, state, device, **engine)``, a
    :class:`~attnkit.plugin.served.ServedModel`.
    Each of these three is the object, or where it is written as an entry point is,
    ``"module:name"`` (``".training:TranslationTask"``: a leading dot names a module of the
    package), imported only when first used (:meth:`load`): a package whose TASK names its parts
    so imports no torch to be registered, and ``attnkit --help`` lists its verbs at once.
    package: the task's package (``__name__`` of the module defining it), where attnkit finds the
    modules below by their names; each is optional.
    endpoints: the server endpoints (``/v1/NAME``) that answer for this task, added by the package's
    ``routes.add_routes(app, server)`` (:class:`attnkit.serve.app.Server`); imported only by the server.
    commands: the task's command-line verbs; verb ``make-shapes`` is the package's module
    ``make_shapes_command`` (``NAME``, ``add_parser(subparsers)``, ``run(args)``).
    ``attnkit evaluate`` runs the package's ``evaluate_command.run(args, state)``, with the flags its
    ``add_flags(add)`` adds (``add(flag, **argparse keywords)``; :func:`~.flags.add_task_flags`).
    ``attnkit attention`` runs the package's ``attention_command.run(args, state)``, with the flags
    its ``add_flags(add)`` adds (``--text`` or ``--image``, ``--html``, ``--method``).
    The package's ``static/panel.js`` (which calls ``registerPanel``; ``input.html`` and
    ``view.html`` beside it where it has them) is its panel of the attention page.
    """

    name: str
    noun: str
    archs: tuple[str, ...]
    records: str
    training: Callable[..., Task] | str
    open: Callable[..., Any] | str
    serve: Callable[..., Any] | str
    package: str
    endpoints: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()

    def load(self, part: Literal["training", "open", "serve"]) -> Callable[..., Any]:
        """The object ``part`` names, imported now where it is a ``"module:name"`` place."""
        found = getattr(self, part)
        if not isinstance(found, str):
            return found
        module, _, name = found.partition(":")
        try:
            value: Any = importlib.import_module(self.package + module if module.startswith(".") else module)
            for attribute in name.split("."):
                value = getattr(value, attribute)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"task {self.name!r}: {part} = {found!r} does not import ({e})") from None
        return value

    def command_names(self) -> tuple[str, ...]:
        return self.commands

    def part(self, name: str) -> ModuleType | None:
        """The package's module ``name`` (``routes``, ``evaluate_command``, ``make_shapes_command``),
        imported, or None when the package has none: the one place attnkit looks a part up by name."""
        module = f"{self.package}.{name}"
        if importlib.util.find_spec(module) is None:
            return None
        return importlib.import_module(module)

    def command_module(self, verb: str) -> ModuleType | None:
        return self.part(verb.replace("-", "_") + "_command")

    @property
    def has_page(self) -> bool:
        """Whether the package ships a panel of the attention page (``static/panel.js``)."""
        return resources.files(self.package).joinpath("static", "panel.js").is_file()
