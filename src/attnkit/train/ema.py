"""An exponential moving average of the weights (``train.ema_decay``): Marian's exponential smoothing,
OpenNMT's ``average_decay``.

After every optimizer step ``W_ema <- decay W_ema + (1 - decay) W`` (the first step copies ``W``),
through ``torch.optim.swa_utils.AveragedModel`` with its foreach EMA update. The average is what is
validated and what the checkpoints' ``model`` holds, so translation, evaluation, averaging and export
all use it; the trained weights travel beside it as ``raw_model``, which ``--resume`` continues from.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


class WeightAverage:
    """The moving average of ``model``'s parameters (buffers are copied once: they do not train)."""

    def __init__(self, model: nn.Module, decay: float):
        self.averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))
        self.averaged.requires_grad_(False)

    @property
    def module(self) -> nn.Module:
        return self.averaged.module

    def update(self, model: nn.Module) -> None:
        self.averaged.update_parameters(model)

    def state(self, model: nn.Module) -> dict[str, Any]:
        """The checkpoint's weights: the average as ``model``, the trained ones as ``raw_model``."""
        return {
            "model": self.module.state_dict(),
            "raw_model": model.state_dict(),
            "ema": {"n_averaged": int(self.averaged.n_averaged.item())},
        }

    def load(self, state: dict[str, Any]) -> None:
        """Continue the average a checkpoint holds (``--resume``)."""
        self.module.load_state_dict(state["model"])
        self.averaged.n_averaged.fill_(state["ema"]["n_averaged"])


def weight_average(model: nn.Module, decay: float, resume_state: dict | None) -> WeightAverage | None:
    """The run's average (None when ``train.ema_decay`` is 0), restored from a resumed checkpoint."""
    if not decay:
        return None
    average = WeightAverage(model, decay)
    if resume_state is not None and "ema" in resume_state:
        average.load(resume_state)
    return average


def average_parameters(average: WeightAverage | None, model: nn.Module) -> nn.Module:
    """The weights to validate and save: the average when there is one."""
    return average.module if average is not None else model
