"""Learning-rate schedules as multipliers of the optimizer's base lr (torch LambdaLR-compatible)."""

from __future__ import annotations

import math


def lr_at(
    step: int,
    *,
    schedule: str,
    lr: float,
    lr_scale: float,
    warmup_steps: int,
    d_model: int,
    max_steps: int = 0,
    cooldown_steps: int = 0,
) -> float:
    """The learning rate for optimizer step ``step`` (1-based).

    noam (paper eq. 3): lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5);
    inverse_sqrt: lr * min(step / warmup, sqrt(warmup / step)); constant: lr after linear warmup.
    A cooldown scales the last ``cooldown_steps`` steps before ``max_steps`` linearly down towards
    zero, so a fixed-budget run ends at a small lr rather than on a 1/sqrt(step) tail.
    """
    step = max(step, 1)
    return _base(step, schedule, lr, lr_scale, warmup_steps, d_model) * _cooldown(
        step, max_steps, cooldown_steps
    )


def _cooldown(step: int, max_steps: int, cooldown_steps: int) -> float:
    """1 until the cooldown starts, then (steps left + 1) / cooldown_steps: 1/cooldown_steps at max_steps."""
    if cooldown_steps <= 0:
        return 1.0
    if max_steps <= 0:
        raise ValueError(f"a cooldown of {cooldown_steps} steps needs max_steps, got {max_steps}")
    return min(1.0, max(0, max_steps - step + 1) / cooldown_steps)


def _base(step: int, schedule: str, lr: float, lr_scale: float, warmup_steps: int, d_model: int) -> float:
    if schedule == "noam":
        return lr_scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
    if schedule == "inverse_sqrt":
        return lr * min(step / warmup_steps, math.sqrt(warmup_steps / step))
    if schedule == "constant":
        return lr * min(1.0, step / warmup_steps)
    raise ValueError(f"unknown schedule {schedule!r}")
