"""train.precision=fp16: autocast with loss scaling. fp16 is for CUDA GPUs, so on a CPU it is a
one-line error; the mechanics (scaled backward, unscaled clipping, the scaler's state in the
checkpoint, exact resume) run here on the CPU by letting the build resolve fp16 anyway."""

import sys

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.errors import ConfigError
from attnkit.precision import resolve_precision
from attnkit.train import train
from test_train import straight_and_resumed, tiny_config  # noqa: F401  (a fixture)


def test_fp16_on_a_cpu_is_a_config_error_that_names_the_choices(tmp_path, tiny_config):  # noqa: F811
    with pytest.raises(ConfigError, match="fp16 needs a CUDA GPU.*fp32 or bf16"):
        train(tiny_config(tmp_path, "train.max_steps=1", "train.precision=fp16"), log=lambda m: None)
    assert not (tmp_path / "checkpoint_last.pt").exists()


def test_precision_names_resolve_per_device():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_precision("auto", cpu) == "fp32" and resolve_precision("auto", cuda) == "bf16"
    assert resolve_precision("fp16", cuda) == "fp16" and resolve_precision("bf16", cpu) == "bf16"
    with pytest.raises(ConfigError, match="must be one of"):
        resolve_precision("fp8", cpu)


@pytest.fixture
def fp16_on_cpu(monkeypatch):
    """The build resolves fp16 on the CPU (CPU autocast has float16 and GradScaler('cpu') exists)."""
    build_module = sys.modules["attnkit.train.build"]
    monkeypatch.setattr(build_module, "resolve_precision", lambda setting, device: setting)


@pytest.mark.slow
def test_fp16_resume_is_exact_and_keeps_the_loss_scale(tmp_path, tiny_config, fp16_on_cpu):  # noqa: F811
    a, b = straight_and_resumed(
        tiny_config,
        tmp_path,
        ["model.dropout=0.1", "valid.every=4", "train.precision=fp16", "train.clip_norm=1.0"],
    )
    assert {t.dtype for t in a["model"].values() if t.is_floating_point()} == {torch.float32}
    assert a["grad_scaler"] == b["grad_scaler"] and a["grad_scaler"]["scale"] > 0


def test_an_overflowing_fp16_step_is_skipped_and_the_scale_lowered(
    tmp_path,
    tiny_config,  # noqa: F811
    fp16_on_cpu,
    monkeypatch,
):
    """A loss scale of 2^100 overflows fp16 gradients: the scaler skips those updates (the weights
    stay as they were) and halves the scale each time; fp32 runs carry no scaler state at all."""
    init = 2.0**100
    real = torch.amp.GradScaler

    def huge(device, **kw):
        return real(device, init_scale=init)

    monkeypatch.setattr(sys.modules["attnkit.precision"].torch.amp, "GradScaler", huge)
    cfg = tiny_config(tmp_path / "fp16", "train.max_steps=2", "valid.every=2", "train.precision=fp16")
    last = load_checkpoint(train(cfg, log=lambda m: None).last_checkpoint)
    assert last["grad_scaler"]["scale"] == init * 0.5**2  # two overflows, two halvings
    start = tiny_config(tmp_path / "init", "train.max_steps=1", "valid.every=1", "train.lr=1e-12")
    monkeypatch.undo()
    plain = load_checkpoint(train(start, log=lambda m: None).last_checkpoint)
    assert "grad_scaler" not in plain
    moved = [n for n, t in last["model"].items() if not torch.allclose(t, plain["model"][n], atol=1e-9)]
    assert moved == [], moved  # same seed, same initial weights, no update taken
