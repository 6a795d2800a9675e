"""Learning-rate schedules as multipliers of the optimizer's base lr (torch LambdaLR-compatible)."""

from __future__ import annotations

import math


def lr_at(step: int, *, schedule: str, lr: float, lr_scale: float, warmup_steps: int, d_model: int) -> float:
    """The learning rate for optimizer step ``step`` (1-based).

    noam (paper eq. 3): lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5);
    inverse_sqrt: lr * min(step / warmup, sqrt(warmup / step)); constant: lr after linear warmup.
    """
    step = max(step, 1)
    if schedule == "noam":
        return lr_scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
    if schedule == "inverse_sqrt":
        return lr * min(step / warmup_steps, math.sqrt(warmup_steps / step))
    if schedule == "constant":
        return lr * min(1.0, step / warmup_steps)
    raise ValueError(f"unknown schedule {schedule!r}")
