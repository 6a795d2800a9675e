"""The main job trains a fixed number of steps, so its losses are the same on every run: its first 100
steps here give the losses docs/BENCHMARKS.md publishes for them (README's first command)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "multi30k_de_en_tiny.yaml"


def published() -> dict[int, float]:
    """The losses docs/BENCHMARKS.md's main-job section gives for steps 50 and 100."""
    text = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    m = re.search(r"loss at steps 50 and 100 is ([\d.]+) and ([\d.]+)", text)
    assert m, "BENCHMARKS.md no longer states the main job's first losses"
    return {50: float(m.group(1)), 100: float(m.group(2))}


@pytest.mark.slow
def test_the_main_job_s_first_steps_give_the_published_losses(tmp_path, shared_data):
    from attnkit.train import load_config, train

    overrides = [
        f"data.data_dir={shared_data}",
        f"output_dir={tmp_path / 'run'}",
        "train.max_steps=100",
        "valid.max_sentences=5",  # the validation at the last step: a few sentences
    ]
    lines: list[str] = []
    train(load_config(CONFIG, overrides), log=lines.append)
    losses = {
        int(m.group(1)): float(m.group(2))
        for m in map(re.compile(r"step (\d+)/100 loss ([\d.]+)").search, lines)
        if m
    }
    for step, loss in published().items():
        # the same digits on the machine that published them; another CPU kind may sum in another order
        assert abs(losses[step] - loss) <= 0.02, (step, losses[step], loss)
