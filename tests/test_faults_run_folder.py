"""Fault suite, the training output folder: the lock, write-new-then-replace, leftovers, metrics trim.

Unit tests of :class:`attnkit.train.run_folder.RunFolder` (no training: fast); the end-to-end cases
(a real second ``attnkit train``, kill -9 and resume) are in test_faults_training.py.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from attnkit.errors import ConfigError
from attnkit.train.run_folder import PREVIOUS, RunFolder
from fault_helpers import process_env

OLD = {
    "checkpoint_last.pt": b"old last",
    "checkpoint_step10.pt": b"old step",
    "metrics.csv": b"old rows",
    "resolved_config.yaml": b"old config",
    "notes.txt": b"the user's own file",
}


def old_run(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    for name, data in OLD.items():
        (folder / name).write_bytes(data)
    return folder


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".lock"}


def test_a_second_holder_fails_at_once_naming_the_folder(tmp_path):
    with RunFolder(tmp_path / "run", resume=False, overwrite=False):
        with pytest.raises(
            ConfigError, match=rf"output_dir {tmp_path / 'run'} is in use .*pid {os.getpid()}"
        ):
            RunFolder(tmp_path / "run", resume=False, overwrite=False).acquire()
    with RunFolder(tmp_path / "run", resume=False, overwrite=False):  # free again after release
        pass


def test_the_lock_dies_with_a_killed_process(tmp_path):
    code = (
        "import sys, time; from attnkit.train.run_folder import RunFolder; "
        "RunFolder(sys.argv[1], resume=False, overwrite=False).acquire(); print('locked', flush=True); "
        "time.sleep(600)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=process_env()
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError, match="in use"):
            RunFolder(tmp_path, resume=False, overwrite=False).acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    with RunFolder(tmp_path, resume=True, overwrite=False):
        pass


def test_an_existing_run_is_refused_without_overwrite_and_untouched(tmp_path):
    folder = old_run(tmp_path / "run")
    with pytest.raises(ConfigError, match="already holds a training run"):
        RunFolder(folder, resume=False, overwrite=False).acquire()
    assert contents(folder) == OLD
    with RunFolder(folder, resume=True, overwrite=False):
        pass  # the refusal released the lock


def test_overwrite_that_fails_its_checks_keeps_the_old_run(tmp_path):
    folder = old_run(tmp_path / "run")
    with pytest.raises(RuntimeError):
        with RunFolder(folder, resume=False, overwrite=True):
            raise RuntimeError("data not found")  # before start_writing: nothing moved
    assert contents(folder) == OLD


def test_overwrite_that_fails_before_its_first_checkpoint_puts_the_old_run_back(tmp_path):
    folder = old_run(tmp_path / "run")
    with pytest.raises(RuntimeError):
        with RunFolder(folder, resume=False, overwrite=True) as run:
            run.start_writing()
            assert contents(folder) == {"notes.txt": OLD["notes.txt"]}  # the user's file stays put
            (folder / "metrics.csv").write_bytes(b"new rows")
            (folder / "resolved_config.yaml").write_bytes(b"new config")
            raise RuntimeError("device lost")
    assert contents(folder) == OLD and not (folder / PREVIOUS).exists()


def test_overwrite_replaces_the_old_run_once_the_first_checkpoint_is_written(tmp_path):
    folder = old_run(tmp_path / "run")
    with RunFolder(folder, resume=False, overwrite=True) as run:
        run.start_writing()
        (folder / "checkpoint_last.pt").write_bytes(b"new last")
        assert (folder / PREVIOUS / "checkpoint_step10.pt").exists()
        run.first_checkpoint_written()
    assert contents(folder) == {"checkpoint_last.pt": b"new last", "notes.txt": OLD["notes.txt"]}
    assert not (folder / PREVIOUS).exists()


def test_a_replacement_killed_before_its_first_checkpoint_is_undone_by_the_next_run(tmp_path):
    folder = old_run(tmp_path / "run")
    run = RunFolder(folder, resume=False, overwrite=True)
    run.acquire()
    run.start_writing()
    (folder / "metrics.csv").write_bytes(b"new rows")
    os.close(run._lock_fd)  # as kill -9 would: no clean-up, the kernel drops the lock
    run._lock_fd = None
    with RunFolder(folder, resume=True, overwrite=False):
        assert contents(folder) == OLD


def test_a_failed_first_run_leaves_no_empty_folder(tmp_path):
    with pytest.raises(RuntimeError):
        with RunFolder(tmp_path / "new" / "run", resume=False, overwrite=False):
            raise RuntimeError("bad config")
    assert not (tmp_path / "new" / "run").exists()


def test_an_output_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        RunFolder(tmp_path / "file", resume=False, overwrite=False).acquire()


def test_a_killed_writes_temporary_files_are_removed(tmp_path):
    folder = old_run(tmp_path / "run")
    leftovers = [".checkpoint_last.pt.abcd1234.tmp", ".metrics.csv.x1.tmp", ".resolved_config.yaml.zz.tmp"]
    for name in leftovers:
        (folder / name).write_bytes(b"half")
    (folder / ".my_editor_swap.tmp").write_bytes(b"not ours")
    with RunFolder(folder, resume=True, overwrite=False):
        pass
    assert not any((folder / name).exists() for name in leftovers)
    assert (folder / ".my_editor_swap.tmp").exists()


def test_resume_trims_metrics_rows_past_the_resumed_step(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    rows = [
        {"step": s, "val_loss": v} for s, v in [(1, ""), (2, ""), (2, "3.1"), (3, ""), (4, ""), (4, "2.9")]
    ]
    with (folder / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "val_loss"])
        writer.writeheader()
        writer.writerows(rows)
    with RunFolder(folder, resume=True, overwrite=False) as run:
        assert run.trim_metrics(2) == 3
    with (folder / "metrics.csv").open(newline="") as f:
        kept = [(r["step"], r["val_loss"]) for r in csv.DictReader(f)]
    assert kept == [("1", ""), ("2", ""), ("2", "3.1")]


def test_a_finished_run_leaves_no_pid_in_its_lock(tmp_path):
    with RunFolder(tmp_path / "run", resume=False, overwrite=False):
        assert (tmp_path / "run" / ".lock").read_text().strip() == str(os.getpid())
    assert (tmp_path / "run" / ".lock").read_bytes() == b""
