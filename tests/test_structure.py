"""The shape of the code: short functions, and a core that asks the task registry instead of naming
tasks (``attnkit.plugin.registry``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from test_imports import import_graph

SRC = Path(__file__).resolve().parents[1] / "src" / "attnkit"
CORE = ["cli", "train", "serve", "export", "checkpoint.py"]
TASK_NAMES = {"translate", "generate", "classify", "caption"}


def python_files(*parts: str) -> list[Path]:
    found = []
    for part in parts:
        path = SRC / part
        found += [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
    return found


def test_no_function_is_over_60_lines():
    long = []
    for path in python_files("."):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > 60:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "\n".join(long)


def test_the_core_never_names_a_task():
    """No string in the code of cli/, train/, serve/, export/ or checkpoint.py is a task's name
    (docstrings aside): the core iterates the registry."""
    named = []
    for path in python_files(*CORE):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in TASK_NAMES and id(node) not in docstrings:
                named.append(f"{path.relative_to(SRC)}:{node.lineno} {node.value!r}")
    assert not named, "\n".join(named)


def test_data_model_and_tasks_never_import_the_training_loop():
    """Each config section lives with the code that reads it: data/, model/ and tasks/ read the
    experiment through ``attnkit.experiment.Experiment`` and never import train/ (TYPE_CHECKING included)."""
    found = []
    for path in python_files("data", "model", "tasks"):
        package = ["attnkit", *path.relative_to(SRC).parent.parts]  # the module's own package
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *filter(None, [node.module])])
            if target == "attnkit.train" or target.startswith("attnkit.train."):
                found.append(f"{path.relative_to(SRC)}:{node.lineno} imports {target}")
    assert not found, "\n".join(found)


# Where a built-in task may be named outside its own package: its registration and the model registry.
REGISTRATIONS = {"plugin/registry.py", "model/registry.py"}
PAGE_AND_CODE = {".py", ".js", ".html", ".css"}


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _names_it(path: Path, package: str, words: set[str]) -> bool:
    """Whether ``path`` imports the task's package, or holds its name or an architecture of it as a
    string (a quoted word in the page's scripts and markup)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return any(f'"{w}"' in text or f"'{w}'" in text for w in words)
    tree = ast.parse(text)
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and package in (node.module or "").split("."):
            return True
        if isinstance(node, ast.Constant) and node.value in words and id(node) not in skip:
            return True
    return False


@pytest.mark.slow
def test_each_built_in_task_is_named_only_where_it_registers():
    """Everything about a task lives in its package: outside it, only its registration and the model
    registry name it (``attnkit.plugin.registry``), so a fifth task adds a package, not core edits."""
    from attnkit.plugin import tasks
    from attnkit.plugin.registry import BUILT_IN

    found = {}
    for task in tasks():
        if task.name not in BUILT_IN:
            continue
        package = BUILT_IN[task.name].split(":")[0].split(".")[-1]  # attnkit.tasks.<package>:TASK
        home = SRC / "tasks" / package
        files = [p for p in SRC.rglob("*") if p.suffix in PAGE_AND_CODE and home not in p.parents]
        found[task.name] = {
            str(p.relative_to(SRC)) for p in files if _names_it(p, package, {task.name, *task.archs})
        } - REGISTRATIONS
    assert found == {name: set() for name in found}, found
    assert set(found) == set(BUILT_IN)


# A feature that spans packages has one home that the others ask; besides it, only the config
# sections that declare its keys (and the prepared folder's list of run-time keys) name them.
FEATURES = {
    "data/bidirectional.py": {"bidirectional_epochs"},
    "data/subword_sampling.py": {"sample_nbest", "sample_alpha"},
}
DECLARED = {"train/config.py", "data/tokenizer_config.py", "data/prepared.py"}


def test_bidirectional_training_and_subword_sampling_each_have_one_home():
    found = []
    for path in python_files("."):
        rel = str(path.relative_to(SRC))
        if rel in DECLARED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for home, keys in FEATURES.items():
            if rel == home:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in keys:
                    found.append(f"{rel}:{node.lineno} reads {node.attr} (its home is {home})")
    assert not found, "\n".join(found)


# The layers, from the ground up: a module imports its own layer and those below it, never one above
# (function-level and TYPE_CHECKING imports included). The plugin interface sits under the core that
# asks it (cli, serve, train, export) and the tasks that implement it, and imports neither; a task
# may import export/ (translation's CTranslate2 engine exports the checkpoint it serves).
LAYERS = [
    {
        "attnkit",
        "errors",
        "bounds",
        "lazy",
        "denormals",
        "device",
        "precision",
        "files",
        "folders",
        "processes",
    }
    | {"quantize", "report"}
    | {"text_scores", "loss", "fast", "config", "positional"},
    {"attention"},
    {"model", "heads"},
    {"decoding", "plotting", "picture_rules", "show", "checkpoint", "data", "experiment", "linear_loss"},
    {"plugin"},
    {"page", "export", "train", "serve"},
    {"cli", "tasks"},
]
# What a task package never imports, beside another task: the core's internals.
NOT_FOR_TASKS = {"cli", "serve", "train"}


def _layer(module: str) -> tuple[int, str]:
    top = module.split(".")[1] if "." in module else "attnkit"
    return next(i for i, layer in enumerate(LAYERS) if top in layer), top


def test_every_package_has_a_layer():
    placed = set().union(*LAYERS)
    unplaced = {m.split(".")[1] for m in import_graph() if "." in m} - placed
    assert not unplaced, f"give these a layer in LAYERS: {sorted(unplaced)}"


def test_no_import_runs_up_a_layer():
    upward = []
    for module, targets in import_graph().items():
        (rank, top) = _layer(module)
        for target in targets:
            (to, other) = _layer(target)
            if to > rank:
                upward.append(f"{module} (layer {rank}) imports {target} (layer {to})")
            if top == "tasks" and other in NOT_FOR_TASKS:
                upward.append(f"{module} imports {target}: a task builds on attnkit.plugin, not {other}/")
            if top == "tasks" and other == "tasks" and module.split(".")[2:3] != target.split(".")[2:3]:
                upward.append(f"{module} imports {target}: a task never imports another")
            if top != "tasks" and other == "tasks":
                upward.append(f"{module} imports {target}: the core finds tasks through attnkit.plugin")
    assert not upward, "\n".join(sorted(upward))


def test_no_module_is_over_350_lines():
    long = {}
    for path in python_files("."):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > 350:
            long[str(path.relative_to(SRC))] = n
    assert not long, f"over 350 lines: {long}"
