"""The ``attnkit`` command: one module per subcommand, each a thin wrapper over one public function.

A command module has ``NAME``, ``add_parser(subparsers)`` and ``run(args)``. The commands every task
shares are here (``COMMANDS``); a task's own verbs (``translate``, ``generate``, ...) come from its
registration (``TaskInfo.commands``: verb ``make-shapes`` is its package's module
``make_shapes_command``), a plugin's as the built-in tasks'. Every user error (bad flag,
config key or value, missing or malformed file, bad checkpoint) prints one line on stderr and exits
with code 2; no traceback.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import warnings
from typing import Any

from ..denormals import flush_kernel_threads
from ..errors import AttnkitError, Stopped
from ..plugin import tasks
from . import (
    attention,
    average,
    configs,
    evaluate,
    export,
    heads,
    import_,
    plot_positional,
    prepare,
    prune,
    serve,
    train,
)
from .common import EXIT_USAGE, Parser, old_names
from .paths import check_paths, commands_of, subparser

COMMANDS: list[Any] = [
    prepare,
    train,
    evaluate,
    attention,
    heads,
    prune,
    plot_positional,
    average,
    serve,
    export,
    import_,
    configs,
]


def commands() -> list[Any]:
    """Every command module: the shared ones, then each registered task's verbs (a verb that is
    already taken, or a module that fails to import, is left out with one warning line)."""
    found = list(COMMANDS)
    for task in tasks():
        for verb in task.commands:
            if verb in {c.NAME for c in found}:
                warnings.warn(f"task {task.name!r}: command {verb!r} is taken; left out", stacklevel=2)
                continue
            try:
                module = task.command_module(verb)
            except Exception as e:
                warnings.warn(
                    f"task {task.name!r}: command {verb!r} failed to import ({type(e).__name__}: {e}); "
                    "left out",
                    stacklevel=2,
                )
                continue
            if module is None:
                warnings.warn(
                    f"task {task.name!r}: command {verb!r} has no module {verb.replace('-', '_')}_command in "
                    f"{task.package}; left out",
                    stacklevel=2,
                )
                continue
            found.append(module)
    return found


def build_parser() -> Parser:
    parser = Parser(
        prog="attnkit", description="Attention and the Transformer for sequence-to-sequence work."
    )
    parser.add_argument(
        "--version",
        action=Version,
        help="print attnkit's version and a one-line check of the install (torch build, threads, "
        "optional engines) and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in commands():
        command.add_parser(sub)
    for _, command_parser in commands_of(parser):
        keep_out_as_old_name(command_parser)
    return parser


def keep_out_as_old_name(parser: argparse.ArgumentParser) -> None:
    """``--out`` still names ``--output`` wherever it named it before: as the old flag of five
    commands, or as the prefix argparse once expanded (flags are no longer abbreviated)."""
    taken = parser._option_string_actions
    action = taken.get("--output")
    if action is None or "--out" in taken:
        return
    action.option_strings = [*action.option_strings, "--out"]
    taken["--out"] = action
    old_names(action, *getattr(action, "old_names", ()), "--out")


class Version(argparse.Action):
    """``attnkit --version``: the version, then what this install can run, in one line."""

    def __init__(self, option_strings, dest, help=None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(install_report())  # stdout, as argparse's own version action writes
        parser.exit(0)


def install_report() -> str:
    """``attnkit 0.1.0: Python 3.11.7, torch 2.13.0+cpu (CPU, 2 threads), extras: serve, export``."""
    import importlib.util
    import platform

    import torch

    from .. import __version__

    if torch.cuda.is_available():
        device = f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        device = "Apple MPS"
    else:
        device = "CPU" + (f"; a CUDA {torch.version.cuda} build, no GPU seen" if torch.version.cuda else "")
    extras = {
        "serve": ("fastapi", "uvicorn"),
        "export": ("ctranslate2", "transformers", "safetensors"),
        "hf": ("datasets",),
        "tensorboard": ("tensorboard",),
    }
    have = [name for name, mods in extras.items() if all(importlib.util.find_spec(m) for m in mods)]
    return (
        f"attnkit {__version__}: Python {platform.python_version()}, torch {torch.__version__} "
        f"({device}, {torch.get_num_threads()} threads), extras: {', '.join(have) or 'none'}"
    )


def _one_line(message: object) -> str:
    """An error message on one line: some (a YAML parser's, the OS's) span several."""
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())


EXIT_BROKEN_PIPE = 141  # what a shell reports for a process ended by SIGPIPE


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # stdout is not a real file (tests, notebooks): nothing to flush later


def parse(argv: list[str] | None = None, parser: Parser | None = None):
    """The command line as a namespace; ``key=value`` overrides may stand anywhere after the command
    (``attnkit train --config C a.b=1 --output-dir D c.d=2``)."""
    parser = parser or build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:  # named by the command's own parser, which knows its flags (did you mean ...)
        subparser(parser, args.command).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    if sys.stdout is None:  # started with its standard output closed (1>&-): results would be lost
        if sys.stderr is not None:
            print(
                "attnkit: error: standard output is closed: redirect it (> FILE or > /dev/null)",
                file=sys.stderr,
            )
        return EXIT_USAGE
    parser = build_parser()
    args = parse(argv, parser)
    run = {c.NAME: c.run for c in commands()}[args.command]
    formatwarning = warnings.formatwarning
    warnings.formatwarning = lambda msg, category, *a, **k: f"attnkit: warning: {_one_line(msg)}\n"
    try:
        check_paths(args.command, subparser(parser, args.command), args)  # every command's paths, one place
        flush_kernel_threads()  # torch's threads only; this one keeps IEEE arithmetic
        run(args)
    except BrokenPipeError:  # `attnkit translate | head`: the reader left; not an error to report
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Stopped as e:  # a signal stopped training after saving: say where and how to resume
        if str(e):
            print(f"attnkit {args.command}: {_one_line(e)}", file=sys.stderr)
        return e.exit_code
    except AttnkitError as e:
        print(f"attnkit {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # unwritable output, full disk, ...: the OS's message names the file
        message = f"{e.strerror or e}: {e.filename or ''}".rstrip(": ")
        print(f"attnkit {args.command}: error: {_one_line(message)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"attnkit {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = formatwarning  # main() may be called in-process (tests, notebooks)
    return 0
