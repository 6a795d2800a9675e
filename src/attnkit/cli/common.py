"""The command line's parser: a usage error is one line and exit 2, with a "did you mean"; the flag
helpers every command shares (its own and a task's) are :mod:`attnkit.plugin.flags`."""

from __future__ import annotations

import argparse
import re

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2, a misspelt command or flag gets a
    "did you mean", and no flag is taken from a prefix of its name (``--be`` is not ``--beam``: a
    later flag that shares the prefix would change what an old command line means)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {_suggest(message, self)} (see {self.prog} --help)\n")


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help, without the old names of a flag (:func:`old_names`)."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        hidden = getattr(action, "old_names", ())
        if not hidden:
            return super()._format_action_invocation(action)
        shown = argparse.Action(
            [s for s in action.option_strings if s not in hidden], action.dest, action.nargs
        )
        shown.metavar, shown.choices = action.metavar, action.choices
        return super()._format_action_invocation(shown)


def old_names(action: argparse.Action, *names: str) -> argparse.Action:
    """Mark ``names`` (among the action's option strings) as a flag's names before: still taken, not
    shown in the help. One name per concept across commands: ``--output`` for an output file or
    folder, where five commands said ``--out``."""
    action.old_names = names  # type: ignore[attr-defined]
    if action.metavar is None and action.option_strings:
        action.metavar = action.option_strings[0].lstrip("-").replace("-", "_").upper()
    return action


def _suggest(message: str, parser: argparse.ArgumentParser) -> str:
    """argparse's message, with the nearest command or flag for an invalid choice or an unknown flag."""
    import difflib

    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        options = re.findall(r"'([^']*)'|(\S+?)(?:,|$)", choice.group(2))
        names = [a or b for a, b in options]
        near = difflib.get_close_matches(choice.group(1), names, n=1, cutoff=0.6)
        if near:
            return message.replace(
                f"'{choice.group(1)}'", f"'{choice.group(1)}' (did you mean '{near[0]}'?)", 1
            )
        return message
    unknown = re.match(r"unrecognized arguments: (.*)", message)
    if unknown:
        flags = [s for a in parser._actions for s in a.option_strings]
        hints = []
        for word in unknown.group(1).split():
            if word.startswith("--"):
                near = difflib.get_close_matches(word.split("=", 1)[0], flags, n=1, cutoff=0.6)
                if near:
                    hints.append(f"{word}: did you mean {near[0]}?")
        if hints:
            return f"{message} ({'; '.join(hints)})"
    return message
