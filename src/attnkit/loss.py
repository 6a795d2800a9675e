"""Label-smoothed cross entropy (paper section 5.4, epsilon_ls = 0.1) that ignores padding.

Legend: N target tokens (B * T), V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass
class LossOutput:
    """loss: summed smoothed loss (backpropagate loss / n_tokens); nll: summed plain NLL, for perplexity."""

    loss: Tensor
    nll: Tensor
    n_tokens: int


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Loss and plain NLL from one log-softmax, with the gradient written out.

    d loss / d logits = softmax(logits) - q for a real token, where q is the smoothed target
    (1 - epsilon on the gold token, epsilon / V everywhere); 0 for padding. Autograd would take
    this through the gather, the sum and the log-softmax backward, three more passes over the
    (N, V) logits: on a CPU the loss's backward took twice as long as here. The backward pass
    turns the saved log-probabilities into the gradient in place, so it can run only once.
    """

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, real: Tensor, epsilon: float):  # type: ignore[override]
        V = logits.size(-1)
        x = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
        logp = F.log_softmax(x, dim=-1)  # (N, V) in float32 (or float64)
        nll = -logp.gather(1, target[:, None]).squeeze(1)  # (N,)  -log p(gold)
        uniform = -logp.sum(dim=-1) / V  # (N,)  cross entropy with the uniform distribution
        loss = ((1.0 - epsilon) * nll + epsilon * uniform).masked_fill_(~real, 0.0).sum()
        ctx.save_for_backward(logp, target, real)
        ctx.epsilon, ctx.in_dtype, ctx.spent = epsilon, logits.dtype, False
        nll_sum = nll.masked_fill_(~real, 0.0).sum()
        ctx.mark_non_differentiable(nll_sum)  # for logging only
        return loss, nll_sum

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor):  # type: ignore[override]
        if ctx.spent:
            raise RuntimeError("label_smoothed_cross_entropy: backward can run only once per loss")
        ctx.spent = True
        logp, target, real = ctx.saved_tensors
        eps, V = ctx.epsilon, logp.size(-1)
        # In place: a fresh (N, V) buffer costs as much as the pass itself (page faults on a CPU).
        grad = logp.exp_().sub_(eps / V)  # (N, V) softmax - epsilon / V
        grad.scatter_add_(
            1, target[:, None], torch.full_like(logp[:, :1], eps - 1.0)
        )  # gold: - (1 - epsilon)
        grad.mul_((real.to(grad.dtype) * grad_loss)[:, None])  # padding rows get no gradient
        return grad.to(ctx.in_dtype), None, None, None


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, *, epsilon: float = 0.1, pad_id: int = 0
) -> LossOutput:
    """logits (B, T, V) or (N, V), target (B, T) or (N,) -> sums over the non-pad target tokens.

    The smoothed target puts 1 - epsilon on the gold token and spreads epsilon uniformly over the
    vocabulary (Szegedy et al., 2016), as ``F.cross_entropy(label_smoothing=epsilon)`` does; written
    out so the plain NLL (for perplexity) comes from the same log-softmax.
    """
    V = logits.size(-1)
    logits = logits.reshape(-1, V)  # (N, V)
    target = target.reshape(-1)  # (N,)
    real = target != pad_id  # (N,)
    loss, nll = _SmoothedCrossEntropy.apply(logits, target, real, epsilon)
    return LossOutput(loss, nll, int(real.sum()))
