"""train.tensorboard: curves, validation metrics and the attention picture as TensorBoard events,
beside metrics.csv and the PNG curve (which stay)."""

import sys

import pytest

from attnkit.errors import ConfigError
from attnkit.train import train
from test_train import tiny_config  # noqa: F401  (a fixture)

pytest.importorskip("tensorboard")


def read_events(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"images": 0, "scalars": 0})
    events.Reload()
    return events


@pytest.mark.slow
def test_a_run_writes_its_curves_metrics_and_attention_picture(tmp_path, tiny_config):  # noqa: F811
    cfg = tiny_config(tmp_path, "train.max_steps=10", "valid.every=5", "train.tensorboard=true")
    result = train(cfg, log=lambda m: None)
    events = read_events(tmp_path / "tensorboard")
    tags = events.Tags()
    for name in (
        "train/train_loss",
        "train/lr",
        "train/grad_norm",
        "train/tokens_per_s",
        "valid/loss",
        "valid/bleu",
    ):
        assert name in tags["scalars"], (name, tags["scalars"])
    assert [e.step for e in events.Scalars("valid/bleu")] == [5, 10]
    losses = [e.value for e in events.Scalars("train/train_loss")]
    assert [e.step for e in events.Scalars("train/train_loss")] == [5, 10] and all(v > 0 for v in losses)
    assert all(e.value > 0 for e in events.Scalars("train/grad_norm"))  # measured although clip_norm is 0
    (first, *_) = events.Images("attention/cross")
    assert first.step == 5 and first.width > 50 and first.height > 50
    assert result.metrics_csv.is_file() and (tmp_path / "learning_curve.png").is_file()


def test_without_tensorboard_installed_it_is_one_line(tmp_path, tiny_config, monkeypatch):  # noqa: F811
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'attnkit\[tensorboard\]'"):
        train(tiny_config(tmp_path, "train.max_steps=1", "train.tensorboard=true"), log=lambda m: None)
