"""The one mask convention of attnkit: boolean, True = may attend.

Masks broadcast to the attention scores' shape (B, H, Tq, Tk). They are built here and nowhere else,
and applied only inside the models' ``encode``/``decode``.

Legend: B batch, H heads, Tq query length, Tk key length.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Key mask that hides padding: (B, Tk) token ids -> (B, 1, 1, Tk), True where the key is real."""
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, Tk)


def causal_mask(T: int, *, device: torch.device | str | None = None) -> Tensor:
    """Look-ahead mask: query i may attend to keys 0..i. Returns (T, T), lower triangle True."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of the given masks (None = no constraint); the result broadcasts like its inputs."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out
