"""What a command's flags are built from, the built-in commands' and a task's alike: argument types
from declared bounds (a value out of range is the one line that says the range), the device, the
search and decoding flags with a task's defaults, input read from a file or stdin, and ``--compile``."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from ..bounds import INT_MAX, Bound
from ..device import DEVICE_NAMES, check_device_name
from ..errors import ConfigError, DataError

__all__ = ["DEVICE_NAMES"]  # the device flag's help names them


def bounded(bound: Bound, name: str = ""):
    """An argparse type from a declared :class:`~attnkit.bounds.Bound`: the value in range, or the one
    line that says the range. The bound stays on it (``.bound``) for the tests that draw from it."""

    def parse(text: str) -> int | float:
        try:
            return bound.parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = name or bound.describe()
    parse.bound = bound  # type: ignore[attr-defined]
    return parse


positive_int = bounded(Bound(int, 1, INT_MAX), "positive_int")
non_negative_int = bounded(Bound(int, 0, INT_MAX), "non_negative_int")


def int_at_most(limit: int):
    """A positive integer no larger than ``limit`` (an allocation bound)."""
    return bounded(Bound(int, 1, limit), f"int_at_most_{limit}")


def device(text: str) -> str:
    """A device name (:mod:`attnkit.device`): a typo is a usage error, not a torch traceback."""
    try:
        return check_device_name(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(f"expected {DEVICE_NAMES}, got {text!r}") from None


def add_decoding_flags(
    p: argparse.ArgumentParser,
    *,
    batch_tokens: int | None = 4000,
    batch_tokens_help: str = "default 4000",
    search: bool = True,
) -> None:
    """--beam and --length-penalty (``search=False``: they come with ``add_search_flags``),
    --batch-tokens and --device."""
    if search:
        from ..decoding.defaults import BOUNDS, HELP

        for name, default in (("beam", 4), ("length_penalty", 0.6)):
            flag, bound = "--" + name.replace("_", "-"), BOUNDS[name]
            p.add_argument(
                flag, type=bounded(bound), default=default, help=f"{HELP[name]} (default {default})"
            )
    p.add_argument(
        "--batch-tokens",
        type=positive_int,
        default=batch_tokens,
        help=f"source tokens per batch ({batch_tokens_help})",
    )
    p.add_argument("--device", type=device, default="auto", help=f"{DEVICE_NAMES} (default auto)")


# Every option of attnkit.decoding.SearchOptions as a flag: the same name (dashes for underscores),
# the same default, help (attnkit.decoding.defaults.HELP) and checks as SearchOptions' own (one line,
# exit 2). argparse only parses.
def add_search_flags(
    p: argparse.ArgumentParser, defaults=None, aliases: dict[str, str] | None = None
) -> None:
    """A flag for every field of :class:`attnkit.decoding.SearchOptions` (``search_options`` reads
    them): the same names, help and rules for every command; ``defaults``: the task's search
    (default ``SearchOptions()``); ``aliases``: field -> a flag's name before."""
    import dataclasses

    from ..decoding.defaults import BOUNDS, HELP
    from ..decoding.options import SearchOptions

    defaults = defaults or SearchOptions()
    for field in dataclasses.fields(SearchOptions):
        flags = ["--" + field.name.replace("_", "-")]
        help = HELP[field.name]
        if aliases and field.name in aliases:
            flags.append(aliases[field.name])
            help += f"; {aliases[field.name]} is its name before"
        if field.type in (bool, "bool"):
            p.add_argument(*flags, dest=field.name, action="store_true", help=help)
        else:
            kind = int if field.type in (int, "int") else float
            default = getattr(defaults, field.name)
            help += f" (default {default})"
            kind_of = _number_of(kind, BOUNDS[field.name])
            p.add_argument(*flags, dest=field.name, type=kind_of, default=default, help=help)


def search_options(args: argparse.Namespace):
    """The :class:`~attnkit.decoding.SearchOptions` of the flags ``add_search_flags`` added (checked)."""
    import dataclasses

    from ..decoding.options import SearchOptions

    names = [f.name for f in dataclasses.fields(SearchOptions)]
    try:
        return SearchOptions(**{name: getattr(args, name) for name in names})
    except ConfigError as e:  # the fields it names first as the flags that set them
        message = str(e)
        lead = re.match(r"[a-z_]+(, [a-z_]+)*", message)
        if lead and all(name in names for name in lead.group().split(", ")):
            flags = ", ".join("--" + name.replace("_", "-") for name in lead.group().split(", "))
            message = flags + message[lead.end() :]
        raise ConfigError(message) from None


def _number_of(kind: type, bound: Bound):
    """An argparse type that only parses: ``bound`` (the option's declared range) is SearchOptions' to
    check, in one place for the command line, the HTTP schema and Python."""

    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None

    parse.__name__ = kind.__name__
    parse.bound = bound  # type: ignore[attr-defined]
    return parse


def read_input(path: str | None) -> list[str]:
    """Lines of ``path``, or of stdin when it is None; stripped of line endings, UTF-8 checked."""
    from ..data.readers import check_line_end, read_lines

    if path:
        return read_lines(path)
    if sys.stdin is None or sys.stdin.closed:  # started with its standard input closed (0<&-)
        raise DataError("standard input is closed: give the input with --input FILE (or pipe it in)")
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"stdin: not valid UTF-8 (byte offset {e.start})") from None
    lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []
    lines = [line.removesuffix("\r") for line in lines]  # as read_lines does for --input
    if lines:
        check_line_end(lines[0], "stdin line 1")
    return lines


def add_compile_flag(p: argparse.ArgumentParser) -> None:
    """--compile: the decoding verbs of the tasks (serve has its own help)."""
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch on a GPU: decode through the model's step compiled by torch.compile and replayed "
        "from CUDA graphs (each new size of rows and lengths compiles once, announced on stderr); "
        "refused on a CPU, where compiling took longer than it saved (translate: --engine ctranslate2 is "
        "the fast path)",
    )


def announcer(command: str):
    """Where a compile's start and end go: stderr, a line each (the first inputs wait for it)."""

    def announce(message: str) -> None:
        print(f"attnkit {command}: {message}", file=sys.stderr, flush=True)

    return announce


def check_compile(args: argparse.Namespace) -> None:
    """--compile on a CPU: refused in one line before anything is read."""
    if getattr(args, "compile", False):
        from ..decoding.compiled import refuse_on_cpu
        from ..device import resolve_device

        refuse_on_cpu(resolve_device(args.device))


# --- a task's own flags of a shared command ------------------------------------------------------
def task_flags(task: Any, command: str) -> dict[str, dict[str, Any]]:
    """The flags a task adds to the shared command ``command`` (``evaluate``, ``attention``): what its
    package's ``COMMAND_command.add_flags(add)`` passes to ``add(flag, **argparse keywords)``."""
    module = task.part(f"{command}_command")
    found: dict[str, dict[str, Any]] = {}
    if module is not None and hasattr(module, "add_flags"):
        module.add_flags(lambda flag, **keywords: found.setdefault(flag, keywords))
    return found


def flag_readers(command: str) -> dict[str, list[Any]]:
    """Each task flag of ``command`` -> the registered tasks that read it, in registry order."""
    from . import tasks

    readers: dict[str, list[Any]] = {}
    for task in tasks():
        for flag in task_flags(task, command):
            readers.setdefault(flag, []).append(task)
    return readers


def add_task_flags(p: argparse.ArgumentParser, command: str) -> None:
    """Every registered task's flags of ``command``, each added once: a flag several tasks read is one
    flag (the first task's keywords), whose help says what each of them reads. ``required=True``
    means required for that task's checkpoints (:func:`check_task_flags`), not for the command."""
    from . import tasks

    keywords: dict[str, dict[str, Any]] = {}
    helps: dict[str, dict[str, list[str]]] = {}  # flag -> its help -> the tasks that say it
    for task in tasks():
        for flag, kw in task_flags(task, command).items():
            keywords.setdefault(flag, {k: v for k, v in kw.items() if k != "required"})
            helps.setdefault(flag, {}).setdefault(kw.get("help", ""), []).append(task.noun)
    for flag, kw in keywords.items():
        said = helps[flag]
        kw["help"] = (
            next(iter(said))
            if len(said) == 1
            else "; ".join(f"{' and '.join(n)}: {h}" for h, n in said.items())
        )
        p.add_argument(flag, **kw)


def check_task_flags(args: argparse.Namespace, task: Any, command: str, instead: str) -> None:
    """The task flags of ``command`` against the checkpoint's task: one it requires, missing, is one
    line naming it; one it does not read, given (not at its default), is one line naming who reads it
    and ``instead``."""
    mine = task_flags(task, command)
    for flag, kw in mine.items():
        if kw.get("required") and getattr(args, flag.lstrip("-").replace("-", "_"), None) is None:
            raise ConfigError(f"{task.noun} needs {flag}")
    for flag, readers in flag_readers(command).items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        default = task_flags(readers[0], command)[flag].get("default")
        if flag not in mine and value not in (None, False, default):
            takers = " and ".join(t.noun for t in readers)
            raise ConfigError(f"{flag} is for {takers}; {instead}")


# What ``--method`` of ``attnkit attention`` means, for every task that follows its maps down the layers.
METHOD_FLAG: dict[str, Any] = dict(
    choices=("raw", "rollout", "flow"),
    default="raw",
    help="raw weights, or followed down to the input tokens through the layers with the residual "
    "counted (Abnar and Zuidema, 2020): rollout or flow (default raw)",
)
