"""train.ema_decay: an exponential moving average of the weights, validated and saved as ``model``
beside the trained ``raw_model``; resume stays exact; decay 0 is the plain weights."""

import pytest
import torch
from torch import nn

from attnkit.errors import ConfigError
from attnkit.train import train
from attnkit.train.ema import WeightAverage
from test_train import straight_and_resumed, tiny_config  # noqa: F401  (a fixture)


def test_the_average_follows_its_formula():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    average = WeightAverage(model, 0.9)
    first = model.weight.detach().clone()
    average.update(model)  # the first update copies
    assert torch.equal(average.module.weight, first)
    with torch.no_grad():
        model.weight.add_(1.0)
    average.update(model)
    expected = 0.9 * first + 0.1 * model.weight.detach()
    assert torch.allclose(average.module.weight, expected, atol=1e-6)
    assert average.module.weight.requires_grad is False


def test_decay_zero_equals_the_plain_weights_step_for_step():
    """A decay of 0 keeps nothing of the past: after each optimizer step the average is the weights,
    bit for bit (lerp with weight 1 returns its end exactly)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    average = WeightAverage(model, 0.0)
    for _ in range(5):
        loss = model(torch.randn(16, 4)).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        average.update(model)
        for mine, theirs in zip(average.module.parameters(), model.parameters(), strict=True):
            assert torch.equal(mine, theirs)


@pytest.mark.slow
def test_resume_with_an_average_is_exact_and_checkpoints_hold_both(tmp_path, tiny_config):  # noqa: F811
    a, b = straight_and_resumed(
        tiny_config, tmp_path, ["model.dropout=0.1", "valid.every=4", "train.ema_decay=0.9"]
    )
    assert a["ema"] == b["ema"] == {"n_averaged": 8}
    for name, tensor in a["raw_model"].items():
        assert torch.equal(tensor, b["raw_model"][name]), name
    assert any(not torch.equal(a["model"][n], a["raw_model"][n]) for n in a["model"])  # a real average


def test_validation_scores_the_average(tmp_path, tiny_config):  # noqa: F811
    """The logged validation loss is the average's: a decay near 1 keeps the first step's weights,
    whose loss is far above the trained model's."""
    common = ("train.max_steps=10", "valid.every=10")
    lines: list[str] = []
    train(tiny_config(tmp_path / "a", *common), log=lines.append)
    slow: list[str] = []
    train(tiny_config(tmp_path / "b", *common, "train.ema_decay=0.999"), log=slow.append)

    def loss(log):
        (line,) = [x for x in log if x.startswith("validation at step 10")]
        return float(line.split("loss ")[1].split(",")[0])

    assert loss(slow) > loss(lines) + 0.3


@pytest.mark.parametrize("value", ["-0.1", "1.0", "1.5"])
def test_bad_decay_is_a_config_error(tmp_path, tiny_config, value):  # noqa: F811
    with pytest.raises(ConfigError, match="ema_decay"):
        tiny_config(tmp_path, f"train.ema_decay={value}")
