"""The training precision, read one way everywhere: ``fp32``, ``bf16`` or ``fp16`` autocast.

bf16 keeps fp32's exponent range, so it needs nothing more than autocast. fp16 does not: small
gradients underflow to zero, so its loss is scaled up before the backward pass and the gradients
scaled back before the update (``torch.amp.GradScaler``, which also skips a step whose gradients
overflowed). fp16 is for GPUs without bf16 (V100, T4); on a CPU it is refused.
"""

from __future__ import annotations

import contextlib

import torch

from .errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_precision(setting: str, device: torch.device) -> str:
    """``auto`` is bf16 on a GPU and fp32 elsewhere; fp16 anywhere but a CUDA GPU is a ConfigError."""
    if setting not in PRECISIONS:
        raise ConfigError(f"train.precision: must be one of {', '.join(PRECISIONS)}, got {setting!r}")
    if setting == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    if setting == "fp16" and device.type != "cuda":
        raise ConfigError(
            f"train.precision=fp16 needs a CUDA GPU (its loss scaling is for GPUs without bf16); on "
            f"{device.type} use train.precision=fp32 or bf16"
        )
    return setting


def amp_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype of a resolved precision (None: fp32, no autocast)."""
    return _DTYPES[precision]


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """Autocast to ``dtype`` on ``device``; a no-op for None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler | None:
    """fp16's loss scaler (None for fp32 and bf16, which need none)."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None
