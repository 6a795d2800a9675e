"""The one mask convention of attnkit: boolean, True = may attend.

Masks broadcast to the attention scores' shape (B, H, Tq, Tk). They are built here and nowhere else,
and applied only inside the models' ``encode``/``decode``.

Legend: B batch, H heads, Tq query length, Tk key length.
"""

from __future__ import annotations

import torch
from torch import Tensor


def real_tokens(tokens: Tensor, pad_id: int) -> Tensor:
    """(B, T) token ids -> (B, T), True where the token is not padding."""
    return tokens != pad_id


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Key mask that hides padding: (B, Tk) token ids -> (B, 1, 1, Tk), True where the key is real."""
    return real_tokens(tokens, pad_id)[:, None, None, :]  # (B, 1, 1, Tk)


def causal_mask(T: int, *, n_keys: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """Look-ahead mask: query i may attend to keys up to its own position. Returns (T, n_keys).

    With a cache the T queries are the last of ``n_keys`` positions: query i sits at n_keys - T + i.
    """
    n_keys = T if n_keys is None else n_keys
    return torch.ones(T, n_keys, dtype=torch.bool, device=device).tril(n_keys - T)


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of the given masks (None = no constraint); the result broadcasts like its inputs."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out
