"""Fault suite, export and import: what ``--force`` may replace, killed exports, damaged Marian
folders, a full disk while exporting.

Issue 37 items 1 (``export --force`` replaces an earlier export only, never a project or the
checkpoint's run folder; work folders of killed exports are removed), 2 (``import`` accounts for
every tensor and checks finiteness, types and the tokenizer) and 3 (a full disk during the Hugging
Face export is one line, exit 2, nothing half-written).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from export_helpers import require
from fault_helpers import assert_user_error, cli, make_tokenizer, process_env, write_checkpoint

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer(seed=0)


@pytest.fixture
def ckpt(tmp_path, tokenizer) -> Path:
    return write_checkpoint(tmp_path / "model.pt", tokenizer)


def export(ckpt: Path, out: Path, *flags, fmt: str = "ctranslate2"):
    require("ctranslate2" if fmt == "ctranslate2" else "transformers", "safetensors")
    return cli("export", "--checkpoint", ckpt, "--format", fmt, "--output", out, *flags)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def hidden_leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# -- item 1: what --force may replace -----------------------------------------------------------


def test_force_refuses_a_folder_that_is_not_an_export(ckpt, tmp_path):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "notes.txt").write_text("mine")
    (project / "src" / "main.py").write_text("print(1)")
    before = snapshot(project)
    code, _, err = export(ckpt, project, "--force")
    assert_user_error(code, err, str(project), "not an earlier attnkit export")
    assert snapshot(project) == before and hidden_leftovers(tmp_path) == []


def test_force_refuses_the_run_folder_of_the_checkpoint(tmp_path, tokenizer):
    run = tmp_path / "run"
    run.mkdir()
    best = write_checkpoint(run / "checkpoint_best.pt", tokenizer)
    (run / "metrics.csv").write_text("step,val_bleu\n10,1.0\n")
    before = snapshot(run)
    for out in (run, tmp_path):  # the run folder, and a folder above it
        code, _, err = export(best, out, "--force")
        assert_user_error(code, err, "holds the checkpoint being exported")
    assert snapshot(run) == before


def test_force_refuses_an_export_holding_the_checkpoint(tmp_path, tokenizer):
    """Even an earlier export is kept when the checkpoint was put inside it."""
    out = tmp_path / "ct2"
    code, _, err = export(write_checkpoint(tmp_path / "a.pt", tokenizer), out)
    assert code == 0, err
    inside = write_checkpoint(out / "model.pt", tokenizer)
    code, _, err = export(inside, out, "--force")
    assert_user_error(code, err, "holds the checkpoint being exported")
    assert inside.is_file()


@pytest.mark.parametrize("fmt", ["ctranslate2", "huggingface"])
def test_force_replaces_an_earlier_export_but_not_files_added_to_it(ckpt, tmp_path, fmt):
    out = tmp_path / "exported"
    code, _, err = export(ckpt, out, fmt=fmt)
    assert code == 0, err
    marker = json.loads((out / ".attnkit-export.json").read_text())
    assert marker["format"] == fmt and sorted(marker["files"]) == sorted(
        n for n in snapshot(out) if n != ".attnkit-export.json"
    )
    code, _, err = export(ckpt, out, "--force", fmt=fmt)
    assert code == 0, err
    (out / "my_notes.txt").write_text("keep me")
    code, _, err = export(ckpt, out, "--force", fmt=fmt)
    assert_user_error(code, err, "my_notes.txt", "did not write")
    assert (out / "my_notes.txt").read_text() == "keep me"
    assert hidden_leftovers(tmp_path) == []


def test_force_replaces_an_empty_folder(ckpt, tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    code, _, err = export(ckpt, out, "--force")
    assert code == 0 and (out / "model.bin").is_file(), err


KILLED_EXPORT = """
import sys, time
from pathlib import Path
from attnkit.export.output import write_then_swap
def write(folder):
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"half")
    print("writing", flush=True)
    time.sleep(600)
write_then_swap(Path(sys.argv[1]), write, "ctranslate2")
"""


def start_export_that_hangs(out: Path) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_EXPORT, str(out)], stdout=subprocess.PIPE, env=process_env()
    )
    assert child.stdout is not None and child.stdout.readline() == b"writing\n"
    return child


def test_work_folders_of_killed_exports_are_removed_by_the_next_one(ckpt, tmp_path):
    out = tmp_path / "ct2"
    killed = start_export_that_hangs(out)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    (dead,) = hidden_leftovers(tmp_path)
    assert dead.startswith(".ct2.attnkit-export.")
    unrelated = tmp_path / ".ct2.attnkit-export.mine"  # no lock file: not provably ours
    unrelated.mkdir()
    running = start_export_that_hangs(out)  # an export of the same name removes the killed one's folder
    try:
        (writing,) = set(hidden_leftovers(tmp_path)) - {unrelated.name}
        assert writing != dead
        code, _, err = export(ckpt, out)
        assert code == 0 and (out / "model.bin").stat().st_size > 100, err
        assert hidden_leftovers(tmp_path) == sorted([unrelated.name, writing])  # in use, or not ours
        assert (tmp_path / writing / "model" / "model.bin").read_bytes() == b"half"
    finally:
        running.kill()
        running.wait()
