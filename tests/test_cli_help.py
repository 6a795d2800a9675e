"""The command line helps: every flag has help text, a misspelt command or flag gets the nearest
name, and no flag is taken from a prefix of its name."""

from __future__ import annotations

from attnkit.cli import build_parser
from attnkit.cli.paths import commands_of
from fault_helpers import cli


def test_every_flag_of_every_command_has_help_text():
    missing = [
        f"{command} {action.option_strings or action.dest}"
        for command, parser in commands_of(build_parser())
        for action in parser._actions
        if not action.help
    ]
    assert not missing


def test_a_misspelt_command_gets_the_nearest_one():
    code, _, err = cli("tranlsate")
    assert code == 2 and "did you mean 'translate'?" in err and len(err.splitlines()) == 1, err


def test_a_misspelt_flag_gets_the_nearest_one():
    code, _, err = cli("translate", "--checkpoint", "x.pt", "--bem", "4")
    assert code == 2 and "--bem: did you mean --beam?" in err and len(err.splitlines()) == 1, err


def test_a_prefix_of_a_flag_is_not_that_flag():
    code, _, err = cli("translate", "--checkpoint", "x.pt", "--be", "4")
    assert code == 2 and "unrecognized arguments: --be 4" in err and "--beam" in err, err


def test_version_reports_the_install_in_one_line():
    import attnkit

    code, out, err = cli("--version")
    assert code == 0, err
    assert out.startswith(f"attnkit {attnkit.__version__}: Python ") and "torch " in out, out
    assert len(out.strip().splitlines()) == 1
    assert attnkit.__version__ != "0.0.0+unknown"  # read from the installed metadata
