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


def test_help_imports_no_torch_for_any_command():
    """``attnkit --help`` and every ``attnkit CMD --help`` list what they list without loading torch
    (the tasks register by name; their modules import when a command runs)."""
    import subprocess
    import sys

    names = [command for command, _ in commands_of(build_parser())]
    probe = (
        "import contextlib, io, sys\n"
        "from attnkit.cli import main\n"
        "loaded = []\n"
        "for argv in [['--help']] + [[name, '--help'] for name in sys.argv[1:]]:\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        main(argv)\n"
        "    if 'torch' in sys.modules:\n"
        "        loaded.append(' '.join(argv)); break\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, *names], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    assert len(names) > 12  # the shared commands and every task's verbs were asked


def test_every_command_parses_without_the_optional_extras():
    """A core install (``pip install -e .``, the README's main job) has no FastAPI, pydantic,
    uvicorn, prometheus_client, pysbd, CTranslate2 or transformers: ``attnkit --help`` and every
    ``attnkit CMD --help`` still answer (once, a batching module importing pydantic broke every command)."""
    import subprocess
    import sys

    names = [command for command, _ in commands_of(build_parser())]
    extras = [
        "pydantic",
        "fastapi",
        "starlette",
        "uvicorn",
        "prometheus_client",
        "pysbd",
        "ctranslate2",
        "transformers",
    ]
    probe = (
        "import contextlib, io, sys\n"
        f"for name in {extras!r}:\n"
        "    sys.modules[name] = None  # import fails, as where the extra is not installed\n"
        "from attnkit.cli import main\n"
        "for argv in [['--help']] + [[name, '--help'] for name in sys.argv[1:]]:\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit as e:\n"
        "            assert e.code == 0, (argv, e.code)\n"
        "    assert 'usage' in out.getvalue(), argv\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, *names], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stdout + done.stderr[-3000:]


def test_a_task_package_s_public_names_all_import_when_asked():
    import importlib

    for package in (
        "attnkit.decoding",
        "attnkit.tasks.translation",
        "attnkit.tasks.language_model",
        "attnkit.tasks.classification",
        "attnkit.tasks.captioning",
    ):
        module = importlib.import_module(package)
        for name in module.__all__:
            assert getattr(module, name) is not None, (package, name)
    from attnkit.decoding import search
    from attnkit.decoding.pick import search as picked

    assert search is picked  # not the module of the same name's


def test_a_lazy_name_that_is_also_a_module_is_refused(tmp_path, monkeypatch):
    import pytest

    from attnkit.lazy import lazy_names

    (tmp_path / "lazy_clash").mkdir()
    (tmp_path / "lazy_clash" / "__init__.py").write_text("")
    (tmp_path / "lazy_clash" / "maps.py").write_text("maps = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import lazy_clash

    with pytest.raises(ValueError, match="maps also name modules of it"):
        lazy_names("lazy_clash", {"maps": "maps"})
    names = lazy_names("lazy_clash", {"other": "maps"})
    with pytest.raises(AttributeError, match="has no attribute 'missing'"):
        names("missing")
    assert lazy_clash is not None


def test_a_task_s_parts_named_by_place_load_once_asked_and_a_wrong_place_is_one_line():
    import pytest

    from attnkit.errors import ConfigError
    from attnkit.plugin import TaskInfo, task_named
    from attnkit.tasks.translation.training import TranslationTask

    assert task_named("translate").load("training") is TranslationTask
    broken = TaskInfo("x", "an x", ("x",), "pairs", ".nowhere:Y", ".cli:Nothing", print, package="attnkit")
    with pytest.raises(ConfigError, match=r"task 'x': training = '.nowhere:Y' does not import"):
        broken.load("training")
    with pytest.raises(ConfigError, match="open = '.cli:Nothing'"):
        broken.load("open")
    assert broken.load("serve") is print  # an object is itself
