"""Crash consistency of the commands that write a folder or a file (``make-shapes``,
``import-captions``, ``export``, ``average``): killed (SIGKILL, SIGTERM) while they write, they leave no
process behind, nothing at the output that looks complete and is not, and every file the user had; a
re-run cleans what the killed one left and finishes. ``prepare`` is in ``test_faults_crash``, ``train``
in ``test_faults_training`` and ``test_faults_signals``.

The swaps' narrow windows (between moving the earlier folder aside and moving the new one in) are
set up directly: a run killed there is recovered by the next."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnkit.cli import main
from attnkit.files import atomic_write
from attnkit.folders import LOCK, WORK_TAG, remove_stale_work, write_folder
from test_faults_crash import pids

ROOT = Path(__file__).resolve().parents[1]
CKPT = ROOT / "tests" / "fixtures" / "c46ef86" / "translation_step3.pt"


def dead_pid() -> int:
    """The pid of a process that has exited (reaped): what a killed run's names carry."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# --- the swap's windows, set up as a killed run leaves them ----------------------------------------
def test_a_run_killed_after_moving_the_earlier_folder_aside_gets_it_back(tmp_path):
    out, pid = tmp_path / "corpus", dead_pid()
    work = tmp_path / f".corpus{WORK_TAG}{pid}.abc"  # its lock file gone with it: killed early
    (work / "old").mkdir(parents=True)
    (work / "old" / "train.tsv").write_text("the user's earlier corpus")
    (work / "new").mkdir()  # the new one, never moved in
    remove_stale_work(out)
    assert (out / "train.tsv").read_text() == "the user's earlier corpus"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]


def test_a_run_killed_after_its_new_folder_took_the_name_leaves_only_it(tmp_path):
    out = tmp_path / "corpus"
    out.mkdir()
    (out / "train.tsv").write_text("new")
    work = tmp_path / f".corpus{WORK_TAG}{os.getpid()}.abc"  # a pid that lives, but a lock nobody holds
    (work / "old").mkdir(parents=True)  # the earlier one, not yet deleted
    (work / LOCK).touch()
    with write_folder(out) as tmp:  # the next run cleans it first
        (tmp / "train.tsv").write_text("newer")
    assert (out / "train.tsv").read_text() == "newer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]


def test_a_writer_still_at_work_keeps_its_folder(tmp_path):
    """A work folder whose lock is held is a live writer's: the next writer leaves it be."""
    from attnkit.folders import locked

    out = tmp_path / "corpus"
    work = tmp_path / f".corpus{WORK_TAG}{dead_pid()}.abc"
    (work / "new").mkdir(parents=True)
    with locked(work / LOCK):
        assert remove_stale_work(out) == [] and (work / "new").is_dir()
    assert remove_stale_work(out) == [work] and not work.exists()


def test_a_killed_writer_s_temporary_file_goes_and_a_live_one_s_stays(tmp_path):
    target = tmp_path / "avg.pt"
    stale = tmp_path / f".avg.pt.{dead_pid()}.x1.tmp"
    live = tmp_path / f".avg.pt.{os.getpid()}.x2.tmp"  # a writer still running (this process)
    stale.write_text("half")
    live.write_text("half")
    with atomic_write(target) as f:
        f.write("done")
    assert target.read_text() == "done" and not stale.exists() and live.exists()


def test_an_export_killed_mid_swap_gets_the_earlier_export_back(tmp_path):
    out = tmp_path / "model.ct2"
    work = tmp_path / f".model.ct2{WORK_TAG}abc"
    (work / "old").mkdir(parents=True)
    (work / LOCK).touch()  # nobody holds it: its export was killed
    (work / "old" / "model.bin").write_bytes(b"the earlier export")
    remove_stale_work(out)
    assert (out / "model.bin").read_bytes() == b"the earlier export" and not work.exists()


# --- the commands, killed while they write ----------------------------------------------------------
def _make_shapes(tmp_path: Path) -> tuple[list[str], Path]:
    out = tmp_path / "shapes"
    assert main(["make-shapes", "--out", str(out), "--train", "4", "--valid", "2", "--test", "2"]) == 0
    return [
        "make-shapes",
        "--out",
        str(out),
        "--train",
        "1500",
        "--valid",
        "10",
        "--test",
        "10",
        "--overwrite",
    ], out


def _import_captions(tmp_path: Path) -> tuple[list[str], Path]:
    datasets = pytest.importorskip("datasets")
    from PIL import Image

    n = 300
    features = datasets.Features({"image": datasets.Image(), "caption": datasets.Value("string")})
    rows = {"image": [Image.new("RGB", (24, 24), (i % 255, 0, 0)) for i in range(n)]}
    rows["caption"] = [f"picture {i}" for i in range(n)]
    splits = {s: datasets.Dataset.from_dict(rows, features=features) for s in ("train", "validation", "test")}
    datasets.DatasetDict(splits).save_to_disk(tmp_path / "hf")
    out = tmp_path / "imported"
    argv = ["import-captions", "--dataset", str(tmp_path / "hf"), "--out", str(out), "--size", "16"]
    assert main([*argv, "--max-images", "2"]) == 0
    return [*argv, "--overwrite"], out


def _export(tmp_path: Path) -> tuple[list[str], Path]:
    out = tmp_path / "model.ct2"
    argv = ["export", "--checkpoint", str(CKPT), "--format", "ctranslate2", "--output", str(out)]
    assert main(argv) == 0
    return [*argv, "--force"], out


def _average(tmp_path: Path) -> tuple[list[str], Path]:
    import shutil

    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    shutil.copy(CKPT, a)
    shutil.copy(CKPT, b)
    return [
        "average",
        "--checkpoints",
        str(a),
        str(b),
        "--output",
        str(tmp_path / "averaged.pt"),
    ], tmp_path / "averaged.pt"


COMMANDS = {
    "make-shapes": _make_shapes,
    "import-captions": _import_captions,
    "export": _export,
    "average": _average,
}


def complete(out: Path) -> bool:
    """Whether ``out`` is a whole output: a corpus folder as its file list says, an export as its
    marker's checksums say, a checkpoint whose tensors pass their CRCs."""
    from attnkit.checkpoint import load_checkpoint
    from attnkit.export.output import MARKER, damaged
    from attnkit.folders import FILE_LIST, listing

    if out.is_file():
        load_checkpoint(out)  # raises on a damaged file
        return True
    if (out / MARKER).is_file():
        return damaged(out) is None
    listed = out / FILE_LIST
    return listed.is_file() and set(listed.read_text().split()) == set(listing(out))


def state(root: Path) -> dict[str, object]:
    """What the user sees under ``root``: each visible entry's content."""
    return {
        p.name: digests(p) if p.is_dir() else p.read_bytes()
        for p in root.iterdir()
        if not p.name.startswith(".")
    }


def _kill_while_writing(argv: list[str], out: Path, how: int) -> bool:
    """Start the command and kill it once it writes (a temporary beside ``out`` appears); False if it
    finished first."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "attnkit.cli", *argv]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if any(p.name.startswith(f".{out.name}.") for p in out.parent.iterdir()):
            break
        time.sleep(0.002)
    if proc.poll() is not None:
        return False
    proc.send_signal(how)
    proc.wait(timeout=30)
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.slow
def test_a_command_killed_while_it_writes_loses_nothing_and_a_rerun_finishes(tmp_path, command, how):
    work = tmp_path / "work"
    work.mkdir()
    argv, out = COMMANDS[command](work)
    (work / "mine.txt").write_text("the user's")
    before = state(work)
    if not _kill_while_writing(argv, out, how):
        pytest.skip(f"{command} finished before it could be killed while writing")
    assert not pids(str(out)), "a process was left behind"
    after = state(work)
    # every other file as it was; the output as it was (the earlier one, or none) or whole
    assert {k: v for k, v in after.items() if k != out.name} == {
        k: v for k, v in before.items() if k != out.name
    }
    assert after.get(out.name) == before.get(out.name) or complete(out), out
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "attnkit.cli", *argv], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert complete(out)
    assert not [p.name for p in work.iterdir() if p.name.startswith(f".{out.name}.")]  # nothing left over


def test_a_probe_left_by_a_killed_command_goes_with_the_next_check(tmp_path):
    from attnkit.files import check_output_path

    stale = tmp_path / f".out.pt.{dead_pid()}.x1.probe"  # killed while checking it could write
    stale.write_text("")
    check_output_path(tmp_path / "out.pt")
    assert not stale.exists()


def test_an_export_killed_before_it_took_its_lock_leaves_nothing(tmp_path):
    killed = tmp_path / f".model.ct2{WORK_TAG}{dead_pid()}.abc"  # killed before its .lock existed
    killed.mkdir()
    kept = tmp_path / f".model.ct2{WORK_TAG}mine"  # no lock and no export's pid: not provably ours
    kept.mkdir()
    (kept / "notes.txt").write_text("someone's")
    remove_stale_work(tmp_path / "model.ct2")
    assert not killed.exists() and (kept / "notes.txt").read_text() == "someone's"
