"""The output layer and the label-smoothed loss together, a chunk of target tokens at a time.

The plain path materialises the (N, V) logits of a whole batch (25,000 tokens × 37,000 words is 3.7 GB
in float32 for the paper's base model) and reads them several times. Here each chunk of C tokens
computes its logits, its loss and, at once, its gradients with respect to the hidden states and the
output weights (as Liger-Kernel's fused linear cross-entropy does), so at most (C, V) logits exist at
any time; the backward pass only scales the gradients it was given. The loss is
:func:`attnkit.loss.label_smoothed_cross_entropy` of ``hidden @ weight.T + bias``, to float tolerance.

Legend: N target tokens, D model width, V vocabulary, C tokens per chunk.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .checkpoint import unwrap
from .errors import ConfigError
from .loss import LossOutput

CHUNK = 4096  # tokens per chunk: (C, V) float32 logits, 0.6 GB at V = 37,000


class _LinearSmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, target, real, epsilon: float, chunk: int):
        N, V = hidden.size(0), weight.size(0)
        acc = torch.promote_types(hidden.dtype, torch.float32)  # float32 for bf16/fp16, else as given
        grad_hidden = torch.zeros(hidden.shape, dtype=acc, device=hidden.device)  # (N, D)
        grad_weight = torch.zeros(weight.shape, dtype=acc, device=weight.device)  # (V, D)
        grad_bias = torch.zeros(V, dtype=acc, device=weight.device) if bias is not None else None
        w = weight.to(hidden.dtype)
        loss = hidden.new_zeros((), dtype=acc)
        nll_sum = hidden.new_zeros((), dtype=acc)
        for start in range(0, N, chunk):
            h, t, r = (
                hidden[start : start + chunk],
                target[start : start + chunk],
                real[start : start + chunk],
            )
            z = F.linear(h, w, None if bias is None else bias.to(h.dtype)).to(acc)  # (C, V)
            logp = F.log_softmax(z, dim=-1)  # (C, V)
            nll = -logp.gather(1, t[:, None]).squeeze(1)  # (C,)
            uniform = -logp.sum(dim=-1) / V  # (C,)
            keep = r.to(acc)
            loss += (((1.0 - epsilon) * nll + epsilon * uniform) * keep).sum()
            nll_sum += (nll * keep).sum()
            # d loss / d z = softmax(z) - q (q: 1 - epsilon on the gold token, epsilon / V everywhere)
            g = logp.exp_().sub_(epsilon / V)  # (C, V), in place of the log-probabilities
            g.scatter_add_(1, t[:, None], torch.full_like(g[:, :1], epsilon - 1.0))
            g.mul_(keep[:, None])  # padding gives no gradient
            grad_hidden[start : start + chunk] = g @ w.to(acc)  # (C, D)
            grad_weight.addmm_(g.t(), h.to(acc))  # (V, D)
            if grad_bias is not None:
                grad_bias += g.sum(0)
        ctx.save_for_backward(grad_hidden, grad_weight, *([grad_bias] if grad_bias is not None else []))
        ctx.dtypes = (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        ctx.mark_non_differentiable(nll_sum)  # for logging only
        return loss, nll_sum

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor):
        saved = ctx.saved_tensors
        h_dtype, w_dtype, b_dtype = ctx.dtypes
        grad_hidden = (saved[0] * grad_loss).to(h_dtype)
        grad_weight = (saved[1] * grad_loss).to(w_dtype)
        grad_bias = (saved[2] * grad_loss).to(b_dtype) if b_dtype is not None else None
        return grad_hidden, grad_weight, grad_bias, None, None, None, None


def linear_label_smoothed_cross_entropy(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    *,
    epsilon: float,
    pad_id: int,
    bias: Tensor | None = None,
    chunk: int = CHUNK,
) -> LossOutput:
    """hidden (B, T, D) or (N, D), the output layer's weight (V, D) and bias (V,), target (B, T) or
    (N,) -> the label-smoothed loss of ``hidden @ weight.T + bias``, summed over non-pad tokens."""
    D = hidden.size(-1)
    target = target.reshape(-1)  # (N,)
    real = target != pad_id  # (N,)
    loss, nll = _LinearSmoothedCrossEntropy.apply(
        hidden.reshape(-1, D), weight, bias, target, real, float(epsilon), int(chunk)
    )
    return LossOutput(loss, nll, real.sum())


@dataclass(frozen=True)
class ChunkedLoss:
    """``train.output_loss_chunk``: the label-smoothed loss with the output layer inside it, ``chunk``
    tokens at a time (the trainer passes it as a task's ``loss_fn``; :func:`output_loss` tells it
    from a loss of logits)."""

    chunk: int = CHUNK

    @torch.compiler.disable  # its loop over chunks would compile once per token count: eager
    def __call__(self, hidden: Tensor, output: nn.Linear, target: Tensor, *, epsilon: float, pad_id: int):
        return linear_label_smoothed_cross_entropy(
            hidden, output.weight, target, epsilon=epsilon, pad_id=pad_id, bias=output.bias, chunk=self.chunk
        )


def output_loss(
    model: nn.Module,
    inputs: tuple[Tensor, ...],
    target: Tensor,
    loss_fn: Callable[..., LossOutput],
    *,
    epsilon: float,
    pad_id: int,
) -> LossOutput:
    """A task's loss of ``model(*inputs)`` against target (B, T): a loss of its logits (B, T, V), or,
    when ``loss_fn`` is a :class:`ChunkedLoss`, of its last hidden states (B, T, D) and its output
    layer, which the loss applies a chunk at a time (the model must take ``project=False``)."""
    if isinstance(loss_fn, ChunkedLoss):
        hidden = model(*inputs, project=False)  # (B, T, D): through the wrappers, so DDP syncs
        output = unwrap(model).output_proj
        assert isinstance(output, nn.Linear)
        return loss_fn(hidden, output, target, epsilon=epsilon, pad_id=pad_id)
    return loss_fn(model(*inputs), target, epsilon=epsilon, pad_id=pad_id)


def chunked_loss(model: nn.Module, chunk: int) -> ChunkedLoss:
    """``train.output_loss_chunk``'s loss for ``model``, or one ConfigError when the model cannot
    give its hidden states before an output layer (the RNN, the classifier)."""
    takes = "project" in inspect.signature(model.forward).parameters
    if not takes or not isinstance(getattr(model, "output_proj", None), nn.Linear):
        raise ConfigError(
            f"train.output_loss_chunk: a {type(model).__name__} cannot give its hidden states before its "
            "output layer; set it to 0"
        )
    return ChunkedLoss(chunk)
