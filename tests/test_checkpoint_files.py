"""A validation's checkpoints: the state is serialized once (checkpoint_last.pt); the best and step
checkpoints of the same step are byte-identical, independent copies that load and pass their CRCs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.errors import CheckpointError
from attnkit.train.checkpoint_files import CheckpointFiles

FIXTURE = Path(__file__).parent / "fixtures" / "c46ef86" / "translation_step3.pt"


def test_best_and_step_checkpoints_are_independent_copies_of_the_last(tmp_path):
    files = CheckpointFiles(tmp_path, keep_last=2, average_last=0)
    state = load_checkpoint(FIXTURE)
    files.save(state, 3, improved=True)
    step = tmp_path / "checkpoint_step3.pt"
    for copy in (files.best, step):
        assert copy.read_bytes() == files.last.read_bytes()
        assert copy.stat().st_ino != files.last.stat().st_ino  # not a link: a later write leaves it be
        loaded = load_checkpoint(copy)  # its CRCs checked
        assert all(torch.equal(loaded["model"][k], v) for k, v in state["model"].items())
    files.save({**state, "step": 99}, 99, improved=False)
    assert load_checkpoint(files.best)["step"] == state["step"] and load_checkpoint(files.last)["step"] == 99


def test_a_copy_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    files = CheckpointFiles(tmp_path, keep_last=0, average_last=0)
    files.save({"step": 1}, 1, improved=False)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("shutil.copyfileobj", full)
    with pytest.raises(CheckpointError, match="cannot write checkpoint .*checkpoint_best.pt: .*space"):
        files.save({"step": 2}, 2, improved=True)
    assert not list(tmp_path.glob(".checkpoint_best.pt.*"))  # no half-written copy
