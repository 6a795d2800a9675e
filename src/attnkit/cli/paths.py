"""Every path a command is given, checked in one place before the command runs.

Two rules hold for every command, the task plugins' included, because they are checked here on the
parsed arguments rather than in each command:

- **A path is one the file system can take**: valid UTF-8 (a name with other bytes gets one line,
  as attnkit's files, configs and logs are UTF-8 text) and no name in it longer than the file
  system allows (the temporary names a write makes beside it stay within that too:
  :func:`attnkit.files.temporary_name`).
- **An output never replaces an input of the same call**: an output path that is, or links to, one
  of the inputs (the same file by inode, so a hard link counts too) is refused, and so is a folder
  output (replaced whole when it is written) that holds an input.

A flag's role comes from its name, one name per concept across commands: ``--checkpoint``,
``--config``, ``--input`` ... are inputs, ``--output``, ``--out`` ... outputs. A command whose flag
means something else sets ``path_role`` on the argparse action (``ROLE_*``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path

from ..errors import ConfigError

ROLE_INPUT = "input"  # read: a file or a folder
ROLE_OUTPUT = "output"  # a file written (replaced whole)
ROLE_OUTPUT_FOLDER = "output-folder"  # a folder written and swapped in whole
ROLE_RUN_FOLDER = "run-folder"  # a folder written into, keeping what else it holds (train --output-dir)

INPUT_FLAGS = frozenset(
    {"--checkpoint", "--checkpoints", "--config", "--resume", "--input", "--src", "--ref"}
    | {"--prefix-file", "--image", "--data-dir", "--dataset", "--glossary", "source", "--api-key-file"}
)
OUTPUT_FLAGS = frozenset({"--output", "--hyp-output", "--confusion", "--html"})
# (command, flag) pairs whose output is a folder swapped in whole, or written into
FOLDER_OUTPUTS = {
    ("export", "--output"): ROLE_OUTPUT_FOLDER,
    ("prepare", "--output"): ROLE_OUTPUT_FOLDER,
    ("make-shapes", "--output"): ROLE_OUTPUT_FOLDER,
    ("import-captions", "--output"): ROLE_OUTPUT_FOLDER,
    ("train", "--output-dir"): ROLE_RUN_FOLDER,
}


def role(command: str, action: argparse.Action) -> str | None:
    """What the flag's value is: one of the ``ROLE_*`` names, or None (not a path)."""
    explicit = getattr(action, "path_role", None)
    if explicit is not None:
        return explicit
    names = action.option_strings or [action.dest]
    for name in names:
        if (command, name) in FOLDER_OUTPUTS:
            return FOLDER_OUTPUTS[(command, name)]
    if any(name in OUTPUT_FLAGS for name in names):
        return ROLE_OUTPUT
    if any(name in INPUT_FLAGS for name in names):
        return ROLE_INPUT
    return None


def path_values(command: str, parser: argparse.ArgumentParser, args: argparse.Namespace):
    """(flag, role, value) for every path given on the command line (``-`` and empty values left out)."""
    for action in parser._actions:
        kind = role(command, action)
        value = getattr(args, action.dest, None)
        if kind is None or value is None or isinstance(value, bool):
            continue
        flag = action.option_strings[0] if action.option_strings else action.dest
        for one in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(one, (str, os.PathLike)) and str(one) not in ("", "-"):
                yield flag, kind, str(one)


def check_paths(command: str, parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Raise a one-line :class:`ConfigError` if a path breaks one of the rules above."""
    given = list(path_values(command, parser, args))
    for flag, _, value in given:
        check_path_text(value, what=flag)
    inputs = [(flag, Path(value)) for flag, kind, value in given if kind == ROLE_INPUT]
    inputs = [(flag, path) for flag, path in inputs if os.path.lexists(path)]
    for flag, kind, value in given:
        if kind == ROLE_INPUT:
            continue
        out = Path(value)
        for in_flag, path in inputs:
            if _same_file(out, path) and kind != ROLE_RUN_FOLDER:
                raise ConfigError(
                    f"{flag} {value} is the same file as {in_flag} {path}: an output never replaces an "
                    "input of the same command; write it to another path"
                )
            if kind == ROLE_OUTPUT_FOLDER and _inside(path, out):
                raise ConfigError(
                    f"{flag} {value} holds {in_flag} {path}, which replacing the folder would delete; "
                    "write it to another folder"
                )


def check_path_text(value: str, *, what: str) -> None:
    """A path attnkit can name and write: UTF-8, each name short enough for its file system."""
    try:
        os.fsencode(value).decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{what}: the path {value!r} is not valid UTF-8; rename it") from None
    limit = name_max(Path(value))
    for name in Path(value).parts:
        if len(os.fsencode(name)) > limit:
            raise ConfigError(
                f"{what}: the name {name[:40]}... in the path is {len(os.fsencode(name))} bytes, over "
                f"the {limit} this file system allows"
            )


def name_max(path: Path) -> int:
    """The longest name the file system holding ``path`` (its nearest existing folder) allows."""
    folder = path.absolute()
    while not os.path.isdir(folder) and folder != folder.parent:  # isdir: False on a too-long name
        folder = folder.parent
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _same_file(a: Path, b: Path) -> bool:
    """The same regular file or folder (a terminal or /dev/stdout on both sides is no data to lose)."""
    try:
        if not all(os.path.isfile(p) or os.path.isdir(p) for p in (a, b)):
            return False
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one of them cannot be read: not the same file
        return False


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (links followed)."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python before 3.13)
        return False


def subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[command]
    raise KeyError(command)


def commands_of(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every subcommand's name and parser (the tests walk them)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()
