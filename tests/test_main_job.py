"""The main job trains a fixed number of steps, so its losses are the same on every run: its first 50
steps here give the loss docs/BENCHMARKS.md publishes for them (README's first command)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "multi30k_de_en_tiny.yaml"


def published() -> float:
    """The loss docs/BENCHMARKS.md's main-job section gives for step 50."""
    text = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    m = re.search(r"loss at step 50 is ([\d.]+)", text)
    assert m, "BENCHMARKS.md no longer states the main job's first loss"
    return float(m.group(1))


@pytest.mark.slow
def test_the_main_job_s_first_steps_give_the_published_losses(tmp_path, shared_data):
    from attnkit.train import load_config, train

    overrides = [
        f"data.data_dir={shared_data}",
        f"output_dir={tmp_path / 'run'}",
        "train.max_steps=50",
        "valid.max_sentences=5",  # the validation at the last step: a few sentences
    ]
    lines: list[str] = []
    train(load_config(CONFIG, overrides), log=lines.append)
    (line,) = [line for line in lines if line.startswith("step 50/50 loss ")]
    loss = float(line.split()[3])
    # the same digits on the machine that published them; another CPU kind may sum in another order
    assert abs(loss - published()) <= 0.02, (line, published())
