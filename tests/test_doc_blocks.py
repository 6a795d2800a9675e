"""The code blocks of the README and the documentation site say what works.

- Every ``attnkit`` command line in a ``bash`` block (torchrun's included) parses with attnkit's own
  parser: its verb, flags and choices exist, and a ``train`` line's ``key=value`` overrides are keys
  of its config with valid values.
- Every Python block runs (on a small trained model where it names one).
- The how-to guides' commands that decode, draw, average, export or import run on a small model.
Commands that train, prepare a corpus, serve, need GPUs or a download (SCALING.md's recipe) are
parsed here and run by their own tests (test_train, test_prepare, test_serve, test_task_plugin, ...).
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnkit.cli import parse
from attnkit.train import load_config
from cli_helpers import cli_stdin

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SEPARATORS = {"&&", "||", "|", ";"}
REDIRECTS = {"<", ">", ">>", "2>"}


def blocks(*langs: str) -> list[tuple[str, str]]:
    """(page, text) of every fenced block in one of ``langs``."""
    found = []
    for page in PAGES:
        for lang, text in BLOCK.findall(page.read_text(encoding="utf-8")):
            if lang in langs:
                found.append((str(page.relative_to(ROOT)), text))
    return found


def command_lines(text: str) -> list[list[str]]:
    """Each command of a shell block as words: continuations joined, comments, redirections and the
    optional brackets of a usage line ([--quantization int8]) removed, pipes and && split."""
    commands = []
    for line in text.replace("\\\n", " ").splitlines():
        current: list[str] = []
        skip = optional = False
        for word in shlex.split(line, comments=True):
            if word.startswith("[--"):  # a usage line's optional part: [--flag value]
                word, optional = word[1:], True
            if optional and word.endswith("]"):
                word, optional = word[:-1], False
            if skip:
                skip = False
            elif word in REDIRECTS:
                skip = True
            elif word in SEPARATORS:
                commands.append(current)
                current = []
            else:
                current.append(word)
        commands.append(current)
    return [c for c in commands if c]


def attnkit_argv(words: list[str]) -> list[str] | None:
    """The arguments after ``attnkit`` (or torchrun's ``attnkit`` / ``-m attnkit.cli``), else None."""
    for i, word in enumerate(words):
        if word == "attnkit":
            return words[i + 1 :]
        if word == "attnkit.cli" and i > 0 and words[i - 1] == "-m":
            return words[i + 1 :]
    return None


PLUGIN_PAGE = "docs/WRITING_A_TASK.md"  # its verbs come with the example plugin: test_task_plugin runs them
DOC_COMMANDS = [
    (page, argv)
    for page, text in blocks("bash")
    for words in command_lines(text)
    if (argv := attnkit_argv(words)) is not None and page != PLUGIN_PAGE
]


def test_the_guides_hold_attnkit_commands():
    pages = {page for page, _ in DOC_COMMANDS}
    guides = ("command-line", "export", "serving", "tasks")
    assert {f"docs/howto/{g}.md" for g in guides} | {"docs/SCALING.md"} <= pages
    assert len(DOC_COMMANDS) >= 30


def command_id(value: object) -> str:
    return " ".join(value) if isinstance(value, list) else str(value)


@pytest.mark.parametrize(
    ("page", "argv"), DOC_COMMANDS, ids=lambda x: " ".join(x) if isinstance(x, list) else x
)
def test_every_documented_command_parses(page, argv, monkeypatch):
    monkeypatch.chdir(ROOT)
    try:
        args = parse(argv)
    except SystemExit as e:  # the parser's one line went to stderr; --version and --help exit 0
        if e.code == 0 and argv[:1] in (["--version"], ["--help"], ["-h"]):
            return
        pytest.fail(f"{page}: attnkit {' '.join(argv)} does not parse (exit {e.code})")
    if args.command == "train":
        overrides = list(getattr(args, "overrides", None) or [])
        load_config(args.config, overrides)  # a ConfigError names the key or value


@pytest.mark.slow
def test_every_python_block_runs(runs, tmp_path, monkeypatch):
    """README's and the guides' Python, in a folder where the paths they name exist."""
    work = tmp_path / "work"
    (work / "runs").mkdir(parents=True)
    shutil.copytree(runs.transformer_dir, work / "runs" / "multi30k_de_en_tiny")
    code = subprocess.run(
        [sys.executable, "-m", "attnkit.cli", "export", "--checkpoint", str(runs.ckpt)]
        + ["--format", "ctranslate2", "--output", str(work / "ct2_model")],
        capture_output=True,
        text=True,
    )
    assert code.returncode == 0, code.stderr
    monkeypatch.chdir(work)
    python = blocks("python") + [(page, text) for page, text in blocks("") if "import " in text]
    assert len(python) >= 3
    with _a_server(runs.ckpt, tmp_path) as url:  # what the clients' page talks to
        for page, text in python:
            text = text.replace("http://127.0.0.1:8080", url)
            exec(compile(text, page, "exec"), {"__name__": "__doc_block__"})


@contextlib.contextmanager
def _a_server(translator: Path, tmp_path: Path):
    """attnkit serve's app on a free port with ``translator`` (de_en) and an untrained tiny language
    model (lm): the models docs/howto/clients.md names."""
    pytest.importorskip("fastapi")
    import torch

    from attnkit.checkpoint import save_checkpoint
    from attnkit.model import LMConfig, TransformerLM
    from attnkit.serve.app import create_app
    from attnkit.serve.tasks import load_models
    from decoding_helpers import tiny_tokenizer
    from serve_helpers import app_server

    torch.manual_seed(0)
    tok = tiny_tokenizer()
    cfg = LMConfig.preset("tiny", vocab_size=tok.src_vocab_size, max_len=64)
    state = {"arch": "lm", "model_config": cfg.to_dict(), "model": TransformerLM(cfg).state_dict()}
    lm = save_checkpoint({**state, "tokenizer": tok.state_dict(), "experiment": {}}, tmp_path / "lm.pt")
    with app_server(create_app(load_models([f"de_en={translator}", f"lm={lm}"], device="cpu"))) as url:
        yield url


RUN = {"translate", "attention", "plot-positional", "average", "export", "import"}  # on a small model
GUIDES = ("command-line", "export", "engines", "serving")


@pytest.mark.slow
def test_the_guides_commands_run(runs, tmp_path, capsys, monkeypatch):
    """The how-to guides' commands that decode, draw, average, export or import run on a small
    model, in a folder holding the files they name; ``--compile`` is refused on a CPU in one line, as
    the guides say. Training, preparing, evaluating a whole test split, serving and other tasks'
    commands are parsed above and run by their own tests."""
    pages = {f"docs/howto/{g}.md" for g in GUIDES}
    text = "\n".join(t for page, t in blocks("bash") if page in pages)
    (tmp_path / "input.de").write_text("Zwei Hunde spielen im Schnee.\nEin Mann.\n", encoding="utf-8")
    (tmp_path / "in.de").write_text("Ein Hund.\n", encoding="utf-8")
    (tmp_path / "src.de").write_text("Ein Hund läuft.\n", encoding="utf-8")
    (tmp_path / "prefix.en").write_text("A\n", encoding="utf-8")
    (tmp_path / "run").mkdir()
    for name, ckpt in zip(("checkpoint_step9000.pt", "checkpoint_step10000.pt"), runs.step_ckpts):
        shutil.copy(ckpt, tmp_path / "run" / name)
    for name in ("a.pt", "b.pt", "c.pt", "ckpt.pt"):
        shutil.copy(runs.ckpt, tmp_path / name)
    ran = refused = 0
    monkeypatch.chdir(tmp_path)
    for words in command_lines(text):
        if words[0] != "attnkit" or words[1] not in RUN:
            continue
        # the placeholders: a checkpoint, and (for import) the Marian folder the export line wrote
        argv = [{"CKPT": "ckpt.pt", "opus-mt-de-en": "hf_model"}.get(w, w) for w in words[1:]]
        stdin = (tmp_path / "input.de").read_bytes() if "--input" not in words else b""
        code, _, err = cli_stdin(capsys, monkeypatch, stdin, *argv)  # in this process: no start-up each
        if "--compile" in argv:  # a CPU: one line that says why and what to use
            assert code == 2 and "ctranslate2" in err, err
            refused += 1
            continue
        assert code == 0, f"attnkit {' '.join(argv)}\n{err[-2000:]}"
        ran += 1
    assert ran >= 18 and refused == 1
