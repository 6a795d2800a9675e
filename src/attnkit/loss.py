"""Label-smoothed cross entropy (paper section 5.4, epsilon_ls = 0.1) that ignores padding.

This is the readable definition; the trainer runs :func:`attnkit.fast.label_smoothed_cross_entropy`,
the same numbers with a hand-written gradient (tested equal to this one).

Legend: N target tokens (B * T), V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor


@dataclass
class LossOutput:
    """loss: summed smoothed loss (backpropagate loss / n_tokens); nll: summed plain NLL, for perplexity;
    n_tokens: the real target tokens, a 0-dim tensor on the loss's device (reading it waits for the
    device: a training step reads the batch's own count instead)."""

    loss: Tensor
    nll: Tensor
    n_tokens: Tensor


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, *, epsilon: float, pad_id: int
) -> LossOutput:
    """logits (B, T, V) or (N, V), target (B, T) or (N,) -> sums over the non-pad target tokens.

    The smoothed target puts 1 - epsilon on the gold token and spreads epsilon uniformly over the
    vocabulary (Szegedy et al., 2016), as ``F.cross_entropy(label_smoothing=epsilon)`` does; written
    out so the plain NLL (for perplexity) comes from the same log-softmax.
    """
    V = logits.size(-1)
    logp = F.log_softmax(logits.reshape(-1, V).float(), dim=-1)  # (N, V), float32 even for bf16 logits
    target = target.reshape(-1)  # (N,)
    real = target != pad_id  # (N,)
    nll = -logp.gather(1, target[:, None]).squeeze(1)  # (N,)  -log p(gold)
    uniform = -logp.mean(dim=-1)  # (N,)  cross entropy with the uniform distribution
    loss = ((1.0 - epsilon) * nll + epsilon * uniform).masked_fill(~real, 0.0).sum()
    return LossOutput(loss, nll.detach().masked_fill(~real, 0.0).sum(), real.sum())
