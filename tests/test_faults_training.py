"""Fault suite, training: kill -9 at random moments (in a step, during a checkpoint write), then
``--resume`` ends bit-identical to an uninterrupted run with no stray temporary file and each step
once in metrics.csv; two trainings into one folder; ``--overwrite`` that fails keeps the old run.

A tiny Transformer learns to reverse a synthetic corpus (no downloads, no Multi30k needed); every
step is validated and checkpointed (valid.every=1), so most random kill moments fall near a write.
Kill moments come from a seeded generator; what a kill hits still depends on the machine's speed,
so the assertions hold for any moment, not for one.
"""

from __future__ import annotations

import csv
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from fault_helpers import assert_user_error, attnkit_cmd, cli, process_env, stray_files, synthetic_sentences

MAX_STEPS = 8


def write_corpus(folder: Path) -> dict[str, Path]:
    src = synthetic_sentences(240, seed=3)
    tgt = [" ".join(reversed(s.split())) for s in src]
    paths = {}
    for name, lines in (
        ("train.src", src[:200]),
        ("train.tgt", tgt[:200]),
        ("valid.src", src[200:]),
        ("valid.tgt", tgt[200:]),
    ):
        paths[name] = folder / name
        paths[name].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return paths


def config_text(corpus: dict[str, Path], **extra: str) -> str:
    lines = {
        "data": f"{{corpus: files, train_files: ['{corpus['train.src']}', '{corpus['train.tgt']}'], "
        f"valid_files: ['{corpus['valid.src']}', '{corpus['valid.tgt']}'], max_valid_pairs: 6}}",
        "tokenizer": "{vocab_size: 64}",
        "model": "{preset: tiny, share_vocab: true, max_len: 48}",
        "train": f"{{max_steps: {MAX_STEPS}, max_tokens: 300, schedule: inverse_sqrt, lr: 0.005, "
        "warmup_steps: 4, log_every: 1, progress: false}",
        "valid": "{every: 1, keep_last: 2, max_sentences: 3}",
    }
    lines.update(extra)
    return "".join(f"{k}: {v}\n" for k, v in lines.items())


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("training")
    corpus = write_corpus(root)
    config = root / "tiny.yaml"
    config.write_text(config_text(corpus), encoding="utf-8")
    reference = root / "reference"
    done = run_train(config, reference)
    assert done.returncode == 0, done.stderr
    return root, config, reference


def train_cmd(config: Path, out: Path, *extra) -> list[str]:
    return attnkit_cmd("train", "--config", config, "--output-dir", out, *extra)


def run_train(config: Path, out: Path, *extra, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        train_cmd(config, out, *extra), capture_output=True, text=True, env=process_env(), timeout=timeout
    )


def start_train(config: Path, out: Path, *extra) -> subprocess.Popen:
    return subprocess.Popen(
        train_cmd(config, out, *extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(),
    )


def wait_for_line(proc: subprocess.Popen, fragment: str, timeout: float = 120) -> bool:
    """Read the process's stderr until a line holds ``fragment`` (False if it ended first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            return False
        if fragment in line:
            return True
    raise AssertionError(f"no {fragment!r} within {timeout} s")


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stderr.close()


def finish(config: Path, out: Path) -> subprocess.CompletedProcess:
    """Continue a killed run the way a user would: --resume its last checkpoint, or start again."""
    last = out / "checkpoint_last.pt"
    extra = ["--resume", last] if last.exists() else ["--overwrite"]
    return run_train(config, out, *extra)


def assert_same_final_state(out: Path, reference: Path) -> None:
    got, want = load_checkpoint(out / "checkpoint_last.pt"), load_checkpoint(reference / "checkpoint_last.pt")
    assert got["step"] == want["step"] == MAX_STEPS
    for name, tensor in want["model"].items():
        assert torch.equal(got["model"][name], tensor), f"weights differ in {name}"
    for (key, a), (_, b) in zip(
        sorted(_flat(got["optimizer"])), sorted(_flat(want["optimizer"])), strict=True
    ):
        assert torch.equal(a, b), f"optimizer state differs in {key}"


def _flat(obj, prefix=""):
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flat(v, f"{prefix}/{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _flat(v, f"{prefix}/{i}")


def metrics_steps(out: Path) -> list[tuple[int, str]]:
    """(step, kind) per metrics.csv row: kind "train" or "valid"."""
    with (out / "metrics.csv").open(newline="") as f:
        return [(int(r["step"]), "valid" if r["val_loss"] else "train") for r in csv.DictReader(f)]


def assert_clean_metrics(out: Path) -> None:
    rows = metrics_steps(out)
    assert sorted(set(rows)) == sorted(rows), f"a step is logged twice: {rows}"
    assert sorted(rows) == sorted([(s, k) for s in range(1, MAX_STEPS + 1) for k in ("train", "valid")])


# -- kill -9, then resume -----------------------------------------------------------------------


@pytest.mark.slow
def test_the_uninterrupted_run_logs_each_step_once(setup):
    _, _, reference = setup
    assert_clean_metrics(reference)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.slow
def test_kill_at_a_random_moment_then_resume_equals_the_uninterrupted_run(setup, tmp_path, seed):
    _, config, reference = setup
    out = tmp_path / "run"
    proc = start_train(config, out)
    started = wait_for_line(proc, "parameters")  # set-up done: data read, tokenizer trained
    if started:
        time.sleep(random.Random(seed).uniform(0.0, 3.0))
    kill(proc)
    done = finish(config, out)
    assert done.returncode == 0, done.stderr
    assert_same_final_state(out, reference)
    assert_clean_metrics(out)
    assert stray_files(out) == []


@pytest.mark.parametrize("after_step", [0, 3], ids=["first-write", "a-later-write"])
@pytest.mark.slow
def test_kill_during_a_checkpoint_write_then_resume(setup, tmp_path, after_step):
    """SIGKILL the moment a temporary checkpoint file appears: the write is cut in half."""
    _, config, reference = setup
    out = tmp_path / "run"
    proc = start_train(config, out)
    deadline, caught = time.monotonic() + 120, None
    while time.monotonic() < deadline and proc.poll() is None and not caught:
        if out.is_dir() and (not after_step or (out / f"checkpoint_step{after_step}.pt").exists()):
            caught = next((p.name for p in out.iterdir() if p.name.endswith(".tmp")), None)
        time.sleep(0.0005)
    kill(proc)
    assert caught, "never saw a checkpoint being written"
    for path in out.glob("checkpoint_*.pt"):
        load_checkpoint(path)  # every complete checkpoint is still whole
    done = finish(config, out)
    assert done.returncode == 0, done.stderr
    assert_same_final_state(out, reference)
    assert_clean_metrics(out)
    assert stray_files(out) == [], "the resumed run left the killed write's temporary file"


# -- two runs into one folder -------------------------------------------------------------------


@pytest.mark.slow
def test_a_second_training_into_the_same_folder_fails_at_once(setup, tmp_path):
    root, config, _ = setup
    slow = tmp_path / "slow.yaml"
    slow.write_text(config.read_text().replace(f"max_steps: {MAX_STEPS}", "max_steps: 100000"))
    out = tmp_path / "run"
    first = start_train(slow, out)
    try:
        assert wait_for_line(first, "parameters"), "the first run ended early"
        t0 = time.monotonic()
        second = run_train(config, out, timeout=120)
        assert second.returncode == 2, second.stderr
        assert "Traceback" not in second.stderr
        (line,) = second.stderr.strip().splitlines()
        assert str(out) in line and "in use" in line, line
        assert time.monotonic() - t0 < 60  # at once: before its own data, tokenizer and model
        assert first.poll() is None, "the first run was disturbed"
    finally:
        kill(first)


# -- --overwrite keeps the old run until the new one works ----------------------------------------


def copy_run(reference: Path, dest: Path) -> dict[str, bytes]:
    import shutil

    shutil.copytree(reference, dest, ignore=shutil.ignore_patterns(".lock"))
    return {p.name: p.read_bytes() for p in dest.iterdir() if p.is_file() and p.name != ".lock"}


def run_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("data.train_files=[/nonexistent/a.src,/nonexistent/a.tgt]", "/nonexistent/a.src"),
        ("train.device=cuda:7", "cuda:7"),
    ],
    ids=["missing-data", "missing-device"],
)
def test_overwrite_that_fails_its_checks_keeps_the_old_run(setup, tmp_path, override, fragment):
    _, config, reference = setup
    if "cuda" in override and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    out = tmp_path / "run"
    before = copy_run(reference, out)
    code, _, err = cli("train", "--config", config, "--output-dir", out, "--overwrite", override)
    assert_user_error(code, err, fragment)
    assert run_files(out) == before, "the old run was changed by a run that never started"


def test_overwrite_replaces_the_old_run_when_the_new_one_works(setup, tmp_path):
    _, config, reference = setup
    out = tmp_path / "run"
    copy_run(reference, out)
    (out / "notes.txt").write_text("mine")
    code, _, err = cli(
        "train",
        "--config",
        config,
        "--output-dir",
        out,
        "--overwrite",
        "train.max_steps=2",
        "valid.keep_last=1",
    )
    assert code == 0, err
    assert sorted(p.name for p in out.glob("checkpoint_step*.pt")) == ["checkpoint_step2.pt"]
    assert load_checkpoint(out / "checkpoint_last.pt")["step"] == 2
    assert max(step for step, _ in metrics_steps(out)) == 2
    assert (out / "notes.txt").read_text() == "mine" and not (out / ".previous-run").exists()


# -- late checks and numbers that are not numbers ------------------------------------------------


def test_a_blank_validation_set_is_refused_at_start_naming_it(setup, tmp_path):
    root, config, _ = setup
    blank = tmp_path / "blank"
    blank.write_text("\n\n\n")
    out = tmp_path / "run"
    code, _, err = cli(
        "train", "--config", config, "--output-dir", out, f"data.valid_files=[{blank},{blank}]"
    )
    assert_user_error(code, err, "validation", str(blank))
    assert not out.exists() or not any(out.glob("checkpoint_*.pt")), "it trained before checking"


@pytest.mark.parametrize("lr", ["1e30"])
def test_a_diverging_run_stops_with_a_clear_error_and_saves_no_nan(setup, tmp_path, lr):
    _, config, _ = setup
    out = tmp_path / "run"
    code, _, err = cli(
        "train", "--config", config, "--output-dir", out, f"train.lr={lr}", "train.warmup_steps=1"
    )
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]  # after the run's own progress lines
    assert last.startswith("attnkit train: error: training diverged") and "not finite" in last, last
    assert "step" in last and "train.lr" in last, last
    for path in out.glob("checkpoint_*.pt"):
        weights = load_checkpoint(path)["model"].values()
        assert all(torch.isfinite(w).all() for w in weights if w.is_floating_point()), (
            f"{path.name} holds nan"
        )


@pytest.mark.parametrize("lr", [".inf", ".nan", "-1"])
def test_a_learning_rate_that_is_not_a_positive_number_is_refused(setup, tmp_path, lr):
    _, config, _ = setup
    code, _, err = cli("train", "--config", config, "--output-dir", tmp_path / "run", f"train.lr={lr}")
    assert_user_error(code, err, "lr")


def test_validation_with_a_beam_larger_than_half_the_vocabulary(setup, tmp_path):
    _, config, _ = setup
    code, _, err = cli(
        "train",
        "--config",
        config,
        "--output-dir",
        tmp_path / "run",
        "train.max_steps=1",
        "valid.beam_size=60",
    )
    assert code == 0, err


# --- checked by subject here (they were once in a file named after the round they were written in)
FIXTURE_CKPT = Path(__file__).parent / "fixtures" / "c46ef86" / "translation_step3.pt"
FIXTURE_CONFIG = Path(__file__).parent / "fixtures" / "c46ef86" / "config.yaml"


def test_training_says_its_first_step_at_once(tmp_path, shared_data):
    config = tmp_path / "config.yaml"
    config.write_text(FIXTURE_CONFIG.read_text().replace("DATA_DIR", str(shared_data)))
    argv = ["train", "--config", config, "--output-dir", tmp_path / "run", "train.progress=true"]
    code, _, err = cli(*argv, "train.max_steps=2", "valid.every=2")
    assert code == 0, err
    assert "step 1 done after" in err  # long before step log_every (50 here)
