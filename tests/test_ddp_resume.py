"""Exact resume in every rank: a 2-process gloo run killed after a seeded step and resumed ends with the
weights of the run that was never stopped, bit for bit (dropout on, so every rank's stream matters)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attnkit.checkpoint import load_checkpoint
from attnkit.data.prepare import prepare
from attnkit.errors import ConfigError
from attnkit.train import load_config, train

STEPS = 8
TINY = [
    "data.max_train_pairs=300",
    "data.max_valid_pairs=10",
    "tokenizer.vocab_size=300",
    "model.preset=tiny",
    "model.share_vocab=true",
    "model.dropout=0.3",
    "train.max_tokens=600",
    "train.schedule=inverse_sqrt",
    "train.lr=0.003",
    "train.warmup_steps=5",
    "train.progress=false",
    f"train.max_steps={STEPS}",
    "valid.max_sentences=3",
    "valid.keep_last=10",
]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(out: Path, overrides: list[str], *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2"]
    cmd += ["--master_addr=127.0.0.1", f"--master_port={free_port()}", "-m", "attnkit.cli", "train"]
    cmd += ["--config", str(out.parent / "tiny.yaml"), *overrides, f"output_dir={out}", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def finish(proc: subprocess.Popen) -> str:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return err


@pytest.fixture
def setup(tmp_path, shared_data):
    """The tiny config on prepared Multi30k data (ranks map the same files), every `k` steps a checkpoint."""
    base = [f"data.data_dir={shared_data}", *TINY]
    prepare(load_config(None, base), tmp_path / "prep", log=lambda m: None)
    (tmp_path / "tiny.yaml").write_text("model:\n  arch: transformer\n")
    k = random.Random(os.environ.get("PYTEST_XDIST_WORKER", "seed")).choice([2, 3, 4, 5])
    return [*base, f"data.prepared={tmp_path / 'prep'}", f"valid.every={k}"], k


@pytest.mark.slow
def test_a_killed_two_process_run_resumes_to_the_uninterrupted_weights(tmp_path, setup):
    overrides, k = setup
    straight = torchrun(tmp_path / "straight", overrides)
    mid = tmp_path / "killed" / f"checkpoint_step{k}.pt"
    for _ in range(2):  # a second start only if the first failed before step k (a port taken meanwhile)
        killed = torchrun(tmp_path / "killed", overrides)
        deadline = time.monotonic() + 240
        while not mid.exists() and killed.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(killed.pid, signal.SIGKILL)  # the whole torchrun group, wherever it is after step k
        _, err = killed.communicate()
        if mid.exists():
            break
    assert "x2 processes" in finish(straight)
    assert mid.exists(), err[-3000:]
    finish(torchrun(tmp_path / "killed", overrides, "--resume", str(mid)))
    a = load_checkpoint(tmp_path / "straight" / "checkpoint_last.pt")
    b = load_checkpoint(tmp_path / "killed" / "checkpoint_last.pt")
    assert a["step"] == b["step"] == STEPS and a["world_size"] == 2 and len(a["rng_ranks"]) == 2
    for name, tensor in a["model"].items():
        assert np.array_equal(tensor.numpy(), b["model"][name].numpy()), name
    ranks = a["rng_ranks"]  # the ranks draw different dropout masks
    assert not np.array_equal(ranks[0]["torch"].numpy(), ranks[1]["torch"].numpy())
    with pytest.raises(ConfigError, match="2 process"):  # one process cannot continue a 2-process run
        cfg = load_config(None, [*overrides, f"output_dir={tmp_path / 'one'}"])
        train(cfg, resume=mid, log=lambda m: None)
