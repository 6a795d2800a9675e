"""Label-smoothed cross entropy (paper section 5.4, epsilon_ls = 0.1) that ignores padding.

Legend: B batch, T target length, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor


@dataclass
class LossOutput:
    """loss: summed smoothed loss (backpropagate loss / n_tokens); nll: summed plain NLL, for perplexity."""

    loss: Tensor
    nll: Tensor
    n_tokens: int


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, *, epsilon: float = 0.1, pad_id: int = 0
) -> LossOutput:
    """logits (B, T, V) or (N, V), target (B, T) or (N,) -> sums over the non-pad target tokens.

    The smoothed target puts 1 - epsilon on the gold token and spreads epsilon uniformly over the
    vocabulary (Szegedy et al., 2016), as ``F.cross_entropy(label_smoothing=epsilon)`` does.
    """
    logits = logits.reshape(-1, logits.size(-1)).float()  # (N, V)
    target = target.reshape(-1)  # (N,)
    loss = F.cross_entropy(logits, target, ignore_index=pad_id, label_smoothing=epsilon, reduction="sum")
    nll = F.cross_entropy(logits.detach(), target, ignore_index=pad_id, reduction="sum")
    return LossOutput(loss, nll, int((target != pad_id).sum()))
