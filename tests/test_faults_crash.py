"""Crash consistency: commands that write, killed (SIGKILL, SIGTERM) while they work, leave no
process behind, nothing that looks complete and is not, and every file the user had; a re-run
cleans what the killed one left and finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import TINY_CONFIG


def pids(marker: str) -> list[int]:
    """Processes whose command line holds ``marker`` (a path unique to the test)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
    return value


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.slow
def test_a_killed_prepare_leaves_no_worker_and_a_rerun_finishes(tmp_path, shared_data, how):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_CONFIG.replace("max_train_pairs: 300", "max_train_pairs: 0"), encoding="utf-8")
    out = tmp_path / "prepared-unique"
    (tmp_path / "mine.txt").write_text("the user's")
    argv = [sys.executable, "-m", "attnkit.cli", "prepare", "--config", str(config), "--output", str(out)]
    argv += ["--data-dir", str(shared_data), "--workers", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(lambda: len(pids(str(out))) >= 3 or proc.poll() is not None, 120, "the encoding workers")
    if proc.poll() is not None:
        pytest.skip("prepare finished before its workers could be seen")
    proc.send_signal(how)
    proc.wait(timeout=30)
    wait_for(lambda: not pids(str(out)), 10, "the workers to go")  # none left behind
    assert not out.exists() or (out / "manifest.json").is_file()  # nothing half-written in its place
    assert (tmp_path / "mine.txt").read_text() == "the user's"
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (out / "manifest.json").is_file()
    assert not list(tmp_path.glob(f".{out.name}.attnkit-work.*"))  # the killed run's folder is gone too


def test_a_worker_whose_parent_died_before_it_began_to_watch_exits(tmp_path):
    """The race a killed ``prepare`` can hit: the parent dies between forking a worker and the worker's
    first look, so the worker's parent is already init. The pid it watches comes from the parent."""
    gone = 999_999_999  # no such process: the parent is already gone when the worker looks
    code = "from attnkit.processes import die_with_parent; import time; "
    code += f"die_with_parent({gone}, 0.05); time.sleep(60)"
    done = subprocess.run([sys.executable, "-c", code], timeout=30, capture_output=True)
    assert done.returncode == 1
