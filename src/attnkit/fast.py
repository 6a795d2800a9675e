"""Opt-in speed on CPUs, applied at the edges: the Translator and the trainer, never the model files.

The model files read like the paper (``nn.Linear``, ``nn.Dropout``, :mod:`attnkit.loss`). These
swap in faster equivalents for the length of a ``with`` block, each tested equal to the readable
version (tests/test_fast.py):

- :func:`packed_linears`: decoding multiplies small batches (one new position per sentence) by the
  same weights at every step, where MKL's plain sgemm reaches ~65% of the matmul peak. oneDNN can
  reorder a weight once into its blocked layout (what CTranslate2 does with MKL's packed GEMM) and
  then runs the same products 15-35% faster. A weight is reordered at its first packed product in
  the block, not on entry: a translate() call of one sentence packs the vocabulary projection alone.
  Only inside the block, where weights cannot change, and only for decoding steps (one position
  per row, x (N, 1, D)): oneDNN builds, and keeps, a primitive for every new row count (a few ms
  each; a server's memory grew with every new shape), so the encoder's (B, S, D) inputs, whose
  B * S changes with every batch, go through plain sgemm.
  A packed product also costs ~10-40 us more per call, which small products do not earn back: a
  server's step of 4-64 rows through a 128 x 128 weight ran 1.4-3x slower packed. So only products
  with an output of ``_PACK_MIN_OUT`` features (the vocabulary projection), an input of
  ``_PACK_MIN_IN`` features (the feed-forward's second matrix when d_ff >= 1024: plain sgemm ran it
  at 0.6-0.8x the packed speed at 8-28 rows) or ``_PACK_MIN_WORK`` output values are packed
  (development timings on the 2-core CI-like machine, one thread).
- :func:`fast_dropout`: on a CPU ``F.dropout`` draws its mask with ``bernoulli_``, about 7 times the
  cost of four 15-bit masks cut from each 64-bit draw; in a training step of the benchmark model the
  masks took 7% of the time, and 10% of the en->de recipe's step in bf16 with ``rand >= p``.
- :func:`label_smoothed_cross_entropy`: the loss with its gradient written out (autograd's path
  takes three more passes over the (N, V) logits; on a CPU the backward took twice as long).
- :func:`attnkit.denormals.denormals_flushed`: denormals as zero inside the loops that only compute
  (12% fewer CPU-seconds translating 500 test_2016_flickr sentences, the same tokens; 8% in 300
  training steps of the main job's model, AMD EPYC, one thread); never process-wide.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .loss import LossOutput

_TYPICAL_ROWS = 64  # rows per product the blocked layout is tuned for (a decoding batch)
_PACK_MIN_OUT = 1024  # output features from which packing pays at any row count
_PACK_MIN_IN = 1024  # input features from which it pays at any row count
_PACK_MIN_WORK = 65536  # rows x output features from which it pays for the smaller weights
_PACKING = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")

M = TypeVar("M", bound=nn.Module)


@contextlib.contextmanager
def _patched(modules: Sequence[M], make_forward: Callable[[M], Callable[[Tensor], Tensor]]) -> Iterator[None]:
    """Give each module an instance-level ``forward`` for the block; modules already patched by an
    outer block keep theirs."""
    patched = [m for m in modules if "forward" not in m.__dict__]
    for m in patched:
        m.forward = make_forward(m)
    try:
        yield
    finally:
        for m in patched:
            del m.forward


def packs(rows: int, out_features: int, in_features: int) -> bool:
    """Whether a decoding step of ``rows`` rows through an ``in_features`` -> ``out_features``
    weight runs packed."""
    return (
        out_features >= _PACK_MIN_OUT or in_features >= _PACK_MIN_IN or rows * out_features >= _PACK_MIN_WORK
    )


def _packed_forward(m: nn.Linear) -> Callable[[Tensor], Tensor]:
    packed: Tensor | None = None  # reordered at the first packed product: most weights never need it

    def forward(x: Tensor) -> Tensor:
        nonlocal packed
        if (
            torch.is_grad_enabled()
            or x.dtype != torch.float32
            or x.dim() != 3
            or x.size(1) != 1
            or torch.is_autocast_enabled("cpu")
            or not packs(x.size(0), m.out_features, m.in_features)
        ):
            return F.linear(x, m.weight, m.bias)
        if packed is None:
            packed = torch.ops.mkldnn._reorder_linear_weight(m.weight.detach(), _TYPICAL_ROWS)
        return torch.ops.mkldnn._linear_pointwise(x, packed, m.bias, "none", [], "")

    return forward


@contextlib.contextmanager
def packed_linears(model: nn.Module) -> Iterator[None]:
    """Inside the block, every float32 CPU ``nn.Linear`` of ``model`` runs through a packed weight
    under ``torch.no_grad()`` (autograd, autocast and other devices fall back to ``F.linear``).

    The weights must not change inside the block: fused optimizers update them in place without
    moving version counters, so a packed copy kept beyond it could go stale.
    """
    linears = [
        m
        for m in model.modules()
        if type(m) is nn.Linear and m.weight.device.type == "cpu" and m.weight.dtype == torch.float32
    ]
    if not _PACKING:
        linears = []
    with _patched(linears, _packed_forward):
        yield


def _keep_mask(shape: torch.Size, p: float) -> Tensor:
    """(shape) bool, True with probability 1 - p (p rounded to a multiple of 1/32768).

    Four masks come out of one 64-bit draw: its four 16-bit pieces, 15 uniform bits each (``random_``
    on int64 leaves the top bit 0). ``rand`` spends a 32-bit draw and a float conversion per element,
    ``bernoulli_`` more: this costs ~1/2 of ``rand >= p`` and ~1/7 of ``bernoulli_``.
    """
    n = math.prod(shape)
    bits = torch.empty((n + 3) // 4, dtype=torch.int64).random_().view(torch.int16)[:n]  # (n,) 16-bit pieces
    return ((bits & 0x7FFF) >= round(p * 32768)).view(shape)


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """``F.dropout`` with a cheaper mask on CPUs (:func:`_keep_mask`): the same distribution (keep
    with probability 1 - p, up to p's rounding to 1/32768) and the same expected value."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0 or torch.compiler.is_compiling():  # a compiler draws its own
        return F.dropout(x, p, training=True)
    keep = _keep_mask(x.shape, p).to(x.dtype).mul_(1.0 / (1.0 - p))  # (x.shape) 0 or 1 / (1 - p)
    return x * keep  # autograd keeps `keep` for the backward pass: grad * keep


@contextlib.contextmanager
def fast_dropout(model: nn.Module) -> Iterator[None]:
    """Inside the block, every ``nn.Dropout`` of ``model`` draws its mask with :func:`dropout`."""

    def make(m: nn.Dropout) -> Callable[[Tensor], Tensor]:
        return lambda x: dropout(x, m.p, m.training)

    with _patched([m for m in model.modules() if type(m) is nn.Dropout], make):
        yield


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Loss and plain NLL from one log-softmax, with the gradient written out.

    d loss / d logits = softmax(logits) - q for a real token, where q is the smoothed target
    (1 - epsilon on the gold token, epsilon / V everywhere); 0 for padding. The backward pass turns
    the saved log-probabilities into the gradient in place, so it can run only once.
    """

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, real: Tensor, epsilon: float):
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
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor):
        if ctx.spent:
            raise RuntimeError("label_smoothed_cross_entropy: backward can run only once per loss")
        ctx.spent = True
        logp, target, real = ctx.saved_tensors
        eps, V = ctx.epsilon, logp.size(-1)
        # In place: a fresh (N, V) buffer costs as much as the pass itself (page faults on a CPU).
        grad = logp.exp_().sub_(eps / V)  # (N, V) softmax - epsilon / V
        grad.scatter_add_(1, target[:, None], torch.full_like(logp[:, :1], eps - 1.0))  # gold: -(1 - eps)
        grad.mul_((real.to(grad.dtype) * grad_loss)[:, None])  # padding rows get no gradient
        return grad.to(ctx.in_dtype), None, None, None


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, *, epsilon: float, pad_id: int
) -> LossOutput:
    """:func:`attnkit.loss.label_smoothed_cross_entropy` with the hand-written gradient."""
    V = logits.size(-1)
    target = target.reshape(-1)  # (N,)
    real = target != pad_id  # (N,)
    loss, nll = _SmoothedCrossEntropy.apply(logits.reshape(-1, V), target, real, epsilon)
    return LossOutput(loss, nll, real.sum())
