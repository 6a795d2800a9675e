"""The ``attnkit`` command: one module per subcommand, each a thin wrapper over one public function.

A command module has ``NAME``, ``add_parser(subparsers)`` and ``run(args)``; adding a command is a
new module and one line in ``COMMANDS``. Every user error (bad flag, config key or value, missing or
malformed file, bad checkpoint) prints one line on stderr and exits with code 2; no traceback.
"""

from __future__ import annotations

import io
import os
import sys
import warnings

from .. import fast
from ..errors import AttnkitError, Stopped
from . import (
    attention,
    average,
    caption,
    classify,
    evaluate,
    export,
    generate,
    import_,
    import_captions,
    make_shapes,
    plot_positional,
    prepare,
    serve,
    train,
    translate,
)
from .common import EXIT_USAGE, Parser

COMMANDS = [
    prepare,
    train,
    translate,
    evaluate,
    attention,
    plot_positional,
    average,
    serve,
    generate,
    classify,
    export,
    import_,
    caption,
    make_shapes,
    import_captions,
]


def build_parser() -> Parser:
    parser = Parser(
        prog="attnkit", description="Attention and the Transformer for sequence-to-sequence work."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


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


def parse(argv: list[str] | None = None):
    """The command line as a namespace; ``key=value`` overrides may stand anywhere after the command
    (``attnkit train --config C a.b=1 --output-dir D c.d=2``)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    run = {c.NAME: c.run for c in COMMANDS}[args.command]
    formatwarning = warnings.formatwarning
    warnings.formatwarning = lambda msg, category, *a, **k: f"attnkit: warning: {_one_line(msg)}\n"
    fast.flush_denormals()  # a run starts here (denormals slow CPU math ~10x); never in a constructor
    try:
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
