"""One optimizer update after the backward passes: fp16's loss scale undone, the gradient norm
clipped (or only measured), Adam's step, and the moving average of the weights moved on."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .ema import WeightAverage


class Update:
    """The pieces of a step that come after the loss: the optimizer and what wraps it."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        scaler: torch.amp.GradScaler | None,
        average: WeightAverage | None,
        clip_norm: float,
    ):
        self.optimizer, self.scaler, self.average, self.clip_norm = optimizer, scaler, average, clip_norm

    def backward(self, loss: Tensor) -> None:
        """fp16: the loss scaled up first, so small gradients do not underflow."""
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def apply(self, model: nn.Module, *, measure: bool = False) -> float | None:
        """Update ``model``; returns the gradient norm when clipping (or ``measure``) computed it."""
        norm = None
        if self.scaler:  # the true gradients, for clipping and the update
            self.scaler.unscale_(self.optimizer)
        if self.clip_norm > 0 or measure:  # an infinite bound measures without clipping
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), self.clip_norm or math.inf))
        if self.scaler:  # skips the update when a gradient overflowed, and adapts the scale
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.average:
            self.average.update(model)
        return norm
