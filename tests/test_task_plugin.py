"""Tasks as plugins: a task written outside attnkit (examples/attnkit-reverse), installed with pip,
gets ``attnkit train``, ``attnkit evaluate``, its own verbs and its endpoint with no line of attnkit
changed; a plugin that fails to import or clashes is one warning line, and the others keep working."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from importlib import metadata
from pathlib import Path

import pytest

from attnkit.plugin import registry, task_named

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "examples" / "attnkit-reverse"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    """The plugin installed with pip into a folder of its own: the environment that finds it."""
    target, source = tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("plugin") / "src"
    shutil.copytree(PLUGIN, source)  # pip builds in the source folder: the repository stays clean
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--target", str(target), str(source)], check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    return {**env, "OMP_NUM_THREADS": "1"}  # beside the suite's other worker: threads would only contend


def attnkit(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnkit.cli", *args], env=env, cwd=cwd, capture_output=True, text=True
    )


@pytest.mark.slow
def test_an_installed_task_trains_evaluates_answers_its_verb_and_its_endpoint(installed, tmp_path):
    made = attnkit(installed, tmp_path, "make-reversal", "--out", "data/reversal")
    assert made.returncode == 0, made.stderr
    trained = attnkit(
        installed, tmp_path, "train", "--config", str(PLUGIN / "reverse_tiny.yaml"), "valid.every=300"
    )
    assert trained.returncode == 0, trained.stderr
    ckpt = tmp_path / "runs" / "reverse_tiny" / "checkpoint_best.pt"
    evaluated = attnkit(installed, tmp_path, "evaluate", "--checkpoint", str(ckpt))
    assert evaluated.returncode == 0, evaluated.stderr
    exact = float(evaluated.stdout.split("exact ")[1])
    assert exact > 50, evaluated.stdout  # learned, not guessed: a wrong letter anywhere is a miss
    reversed_ = attnkit(installed, tmp_path, "reverse", "--checkpoint", str(ckpt), "--text", "a b c d")
    assert reversed_.returncode == 0 and reversed_.stdout.split() == ["d", "c", "b", "a"], reversed_
    # a translation command refuses it, naming what the file holds
    refused = attnkit(installed, tmp_path, "translate", "--checkpoint", str(ckpt))
    assert refused.returncode == 2 and "holds a reversal model" in refused.stderr, refused.stderr
    # its endpoint, served by attnkit's app
    script = f"""
import json
from fastapi.testclient import TestClient
from attnkit.serve.app import create_app
from attnkit.serve.tasks import load_models
with TestClient(create_app(load_models([{str(ckpt)!r}], device="cpu"))) as c:
    r = c.post("/v1/reverse", json={{"text": "a b c d"}})
    m = c.get("/v1/models").json()
    page = c.get("/").text
panel = ['registerPanel("reverse"' in page, 'id="reverse-text"' in page]
print(json.dumps([r.status_code, r.json(), m, *panel]))
"""
    served = subprocess.run([sys.executable, "-c", script], env=installed, capture_output=True, text=True)
    assert served.returncode == 0, served.stderr
    status, answer, models, script, markup = json.loads(served.stdout.strip().splitlines()[-1])
    assert status == 200 and answer["reversed"].split() == ["d", "c", "b", "a"], answer
    assert models["models"][0]["task"] == "reverse"
    assert script and markup  # its panel, shipped in its package, is on the page


def fake_entry_points(monkeypatch, *extra: tuple[str, str]) -> None:
    """The built-in tasks and ``extra`` (name, "module:attr") as the installed entry points."""
    points = [metadata.EntryPoint(n, v, registry.GROUP) for n, v in registry.BUILT_IN.items()]
    points += [metadata.EntryPoint(n, v, registry.GROUP) for n, v in extra]
    monkeypatch.setattr(registry.metadata, "entry_points", lambda group: points)
    monkeypatch.setattr(registry, "_loaded", None)


def test_a_plugin_that_fails_or_clashes_is_one_line_and_the_others_keep_working(monkeypatch, tmp_path):
    (tmp_path / "broken_plugin.py").write_text("raise ImportError('no module named torchvisionx')\n")
    (tmp_path / "clashing_plugin.py").write_text(
        "import dataclasses\nfrom attnkit.tasks import translation\n"
        "TASK = dataclasses.replace(translation.TASK, commands=())\n"
        "OTHER = dataclasses.replace(translation.TASK, name='other', endpoints=('other',), "
        "commands=('train',))\n"
        "TIDY = dataclasses.replace(translation.TASK, name='tidy', endpoints=(), commands=('tidy',))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    extra = [("broken", "broken_plugin:TASK"), ("clash", "clashing_plugin:TASK")]
    fake_entry_points(
        monkeypatch, *extra, ("other", "clashing_plugin:OTHER"), ("tidy", "clashing_plugin:TIDY")
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = registry.load()
    lines = [str(w.message) for w in caught]
    assert any("broken_plugin:TASK failed to import" in m and "torchvisionx" in m for m in lines), lines
    assert any("clashing_plugin:TASK left out" in m and "task 'translate'" in m for m in lines), lines
    assert all("\n" not in m for m in lines)
    assert [t.name for t in loaded] == ["translate", "generate", "classify", "caption", "other", "tidy"]
    assert task_named("translate").noun == "a translation model"  # the built-in one kept
    # a plugin's command named like a core one is left out with one line; the parser still builds
    from attnkit.cli import build_parser

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parser = build_parser()
    assert any("command 'train' is taken" in str(w.message) for w in caught)
    # a verb is its package's module VERB_command: one without it is left out, naming what is missing
    said = "task 'tidy': command 'tidy' has no module tidy_command in attnkit.tasks.translation"
    assert any(said in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert parser.parse_args(["translate", "--checkpoint", "x"]).command == "translate"
    monkeypatch.setattr(registry, "_loaded", None)  # the next test loads the installed ones again


def test_a_plugin_adds_its_own_flags_to_evaluate_and_another_task_refuses_them(monkeypatch, tmp_path):
    """A task's ``evaluate_command.add_flags`` puts its flags on the one ``attnkit evaluate``; given for
    a checkpoint of a task that does not read it, a flag is one line naming who does."""
    package = tmp_path / "digits_plugin"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import dataclasses\nfrom attnkit.tasks import translation\n"
        "TASK = dataclasses.replace(translation.TASK, name='digits', noun='a digit sorter', "
        "endpoints=(), commands=(), package=__name__)\n"
    )
    (package / "evaluate_command.py").write_text(
        "def add_flags(add):\n    add('--digits', type=int, help='how many digits to sort')\n"
        "def run(args, state):\n    print(args.digits)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fake_entry_points(monkeypatch, ("digits", "digits_plugin:TASK"))
    from attnkit.cli import build_parser
    from attnkit.errors import ConfigError
    from attnkit.plugin.flags import check_task_flags

    args = build_parser().parse_args(["evaluate", "--checkpoint", "x.pt", "--digits", "7"])
    assert args.digits == 7 and args.src is None  # its flag beside translation's
    with pytest.raises(ConfigError, match=r"^--digits is for a digit sorter; give --src and --ref$"):
        check_task_flags(args, task_named("translate"), "evaluate", "give --src and --ref")
    check_task_flags(args, task_named("digits"), "evaluate", "")  # its own: taken
    monkeypatch.setattr(registry, "_loaded", None)


def test_a_misnamed_validation_metric_is_one_line_before_training_or_at_the_first_validation():
    """A task's metric names are checked where they are declared: a default metric outside its choices
    when the task is built, a metric outside what it declares validate reports at build time, and
    a validate that leaves a declared metric out at the first validation, never a raw KeyError."""
    from attnkit.errors import ConfigError
    from attnkit.plugin.training import SplitTask, check_metrics, check_reported

    class Misnamed(SplitTask):
        metric = "accuracy"
        metrics = ("loss", "acc")
        choices = {"loss": False, "acc": True}

    with pytest.raises(
        ConfigError, match=r"^Misnamed.metric = 'accuracy' is not among its choices \(loss, acc\)"
    ):
        Misnamed()

    class Declared(SplitTask):
        metric = "acc"
        metrics = ("loss", "acc")
        choices = {"loss": False, "acc": True}

    task = Declared()
    check_metrics(task, "digits")  # consistent: taken
    task.metrics = ("loss",)
    with pytest.raises(ConfigError, match="its metric 'acc' is not among the metrics its validate reports"):
        check_metrics(task, "digits")
    task.metrics = ("loss", "acc")
    check_reported(task, "digits", {"loss": 1.0, "acc": 0.5})
    with pytest.raises(
        ConfigError, match=r"^task 'digits': validate reported loss, accuracy, not its declared"
    ):
        check_reported(task, "digits", {"loss": 1.0, "accuracy": 0.5})


def test_a_config_names_its_task_and_a_checkpoint_without_one_keeps_its_arch_s(tmp_path):
    from attnkit.errors import ConfigError
    from attnkit.plugin import task_for, task_of
    from attnkit.train.config import load_config

    assert task_for(None, "transformer").name == "translate"
    assert task_of({"arch": "lm"}).name == "generate"  # a checkpoint written before tasks had names
    with pytest.raises(ConfigError, match="task 'generate' takes model.arch lm, not 'transformer'"):
        load_config(None, ["task=generate"])
    with pytest.raises(ConfigError, match="task = 'summarise': must be one of translate, generate"):
        load_config(None, ["task=summarise"])
    cfg = load_config(None, ["task=translate"])
    assert cfg.task == "translate" and cfg.to_dict()["task"] == "translate"
    assert "task" not in load_config(None).to_dict()  # a config without one saves as before


def test_an_installed_plugin_s_verbs_are_listed_without_torch(installed, tmp_path):
    probe = (
        "import contextlib, io, sys\n"
        "from attnkit.cli import main\n"
        "out = io.StringIO()\n"
        "for argv in (['--help'], ['reverse', '--help'], ['evaluate', '--help']):\n"
        "    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "        main(argv)\n"
        "print('make-reversal' in out.getvalue(), 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=installed, capture_output=True, text=True)
    assert done.stdout.split() == ["True", "False"], done.stdout + done.stderr
