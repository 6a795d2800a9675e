"""Fault suite, signals: SIGTERM or SIGINT during ``attnkit train`` finishes the step in progress,
saves a resumable ``checkpoint_last.pt`` at that step (no validation), prints one line with the
command that resumes it and exits 143 or 130; resuming trains bit for bit like an uninterrupted run.
A second signal stops at once.

The run is the tiny reverse-the-sentence Transformer of test_faults_training.py with validation only
at the end (valid.every=1000), so a stop between two validations is what the signal alone saves.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from attnkit.checkpoint import load_checkpoint
from attnkit.train.signals import StopSignals
from fault_helpers import attnkit_cmd, process_env
from test_faults_training import (
    assert_clean_metrics,
    assert_same_final_state,
    config_text,
    metrics_steps,
    run_train,
    train_cmd,
    write_corpus,
)

MAX_STEPS = 8  # test_faults_training's assert_same_final_state compares at this step
EVERY = 1000


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("signals")
    config = root / "tiny.yaml"
    config.write_text(
        config_text(write_corpus(root), valid=f"{{every: {EVERY}, keep_last: 2, max_sentences: 3}}"),
        encoding="utf-8",
    )
    reference = root / "reference"
    done = run_train(config, reference)
    assert done.returncode == 0, done.stderr
    return config, reference


def default_signals() -> None:
    """In the child: SIGINT and SIGTERM act by default, as in a terminal, even when the test runner was
    started in the background (a shell then ignores SIGINT, and the child would inherit that)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start(config: Path, out: Path, *extra) -> subprocess.Popen:
    return subprocess.Popen(
        train_cmd(config, out, *extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(),
        preexec_fn=default_signals,
    )


def wait_for_steps(proc: subprocess.Popen, out: Path, steps: int, timeout: float = 120) -> None:
    """Until metrics.csv logs ``steps`` training steps (one row each: train.log_every=1)."""
    csv, deadline = out / "metrics.csv", time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended early: {proc.communicate()[1]}"
        if csv.exists() and len(csv.read_text().splitlines()) > steps:
            return
        time.sleep(0.002)
    raise AssertionError(f"fewer than {steps} steps within {timeout} s")


def stop_with(proc: subprocess.Popen, *signums: signal.Signals) -> str:
    for signum in signums:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    return err


# The runs below train up to max_steps=10_000 so that the signal always lands mid-run; what is
# compared is the resumed run cut at MAX_STEPS, whose learning rate does not depend on max_steps
# (inverse_sqrt, no cooldown). The uninterrupted reference trains to MAX_STEPS.
LONG = "train.max_steps=10000"


@pytest.mark.parametrize(
    "signum, code, every",
    [(signal.SIGTERM, 143, EVERY), (signal.SIGINT, 130, 1)],
    ids=["SIGTERM", "SIGINT-at-a-validation-step"],
)
@pytest.mark.slow
def test_a_signal_saves_the_current_step_and_resuming_equals_the_uninterrupted_run(
    setup, tmp_path, signum, code, every
):
    """With valid.every=1 the signal lands on a validation step: it is skipped to stop sooner, and
    the resumed run makes up for it first (validation draws no random numbers: the same weights)."""
    config, reference = setup
    out = tmp_path / "run"
    proc = start(config, out, LONG, f"valid.every={every}")
    wait_for_steps(proc, out, 2)
    err = stop_with(proc, signum)
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    last_line = err.strip().splitlines()[-1]
    last = out / "checkpoint_last.pt"
    state = load_checkpoint(last)
    step = state["step"]
    assert 2 <= step < MAX_STEPS, f"stopped at step {step}: the run was too fast for this test"
    assert last_line.startswith(f"attnkit train: stopped by {signum.name} at step {step}"), last_line
    if every == EVERY:
        assert step % EVERY, "a periodic checkpoint, not the signal's"
        assert not (out / "checkpoint_best.pt").exists(), "the signal's checkpoint is not a validated one"
    else:
        assert state["metrics"]["pending_validation"], "its validation was skipped: the resumed run owes it"
        assert max(s for s, kind in metrics_steps(out) if kind == "valid") == step - 1
    config_yaml = shlex.quote(str(out / "resolved_config.yaml"))
    command = f"attnkit train --config {config_yaml} --resume {shlex.quote(str(last))}"
    assert command in last_line, last_line

    # resume with the command it printed (the config it saved holds max_steps=10000: cut it short)
    argv = shlex.split(last_line[last_line.index(command) :])[1:]
    done = subprocess.run(
        attnkit_cmd(*argv, f"train.max_steps={MAX_STEPS}"),
        capture_output=True,
        text=True,
        env=process_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"resumed from step {step}" in done.stderr
    assert_same_final_state(out, reference)
    if every == 1:
        assert_clean_metrics(out)  # step `step` validated once, by the resumed run


@pytest.mark.slow
def test_a_second_signal_stops_at_once(setup, tmp_path):
    """SIGINT, then SIGTERM before the first stop is done: SIGTERM's default action ends it."""
    config, _ = setup
    out = tmp_path / "run"
    proc = start(config, out, LONG)
    wait_for_steps(proc, out, 2)
    err = stop_with(proc, signal.SIGINT, signal.SIGTERM)
    assert proc.returncode == -signal.SIGTERM, err
    assert "stopped by" not in err, err


def test_the_second_signal_acts_as_the_previous_handler_would():
    """In-process: the first SIGINT only asks to stop; the second raises KeyboardInterrupt at once,
    and the previous handlers are back."""
    outer = {signum: signal.getsignal(signum) for signum in StopSignals.SIGNALS}
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, not a background job
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    previous = {signum: signal.getsignal(signum) for signum in StopSignals.SIGNALS}
    try:
        _second_signal(previous)
    finally:
        for signum, handler in outer.items():
            signal.signal(signum, handler)


def _second_signal(previous: dict) -> None:
    with StopSignals() as stop:
        assert stop.signum is None
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)  # the handler runs at the next bytecode boundary
        assert stop.signum == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        assert {signum: signal.getsignal(signum) for signum in StopSignals.SIGNALS} == previous
    assert {signum: signal.getsignal(signum) for signum in StopSignals.SIGNALS} == previous
