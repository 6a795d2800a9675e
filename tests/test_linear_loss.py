"""The chunked output layer + label-smoothed loss (attnkit.linear_loss) equals the plain one: the same
loss, NLL and token count, and the same gradients for the hidden states, the weight and the bias,
whatever the chunk; padding gets no gradient; its backward only scales what the forward computed."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnkit.linear_loss import linear_label_smoothed_cross_entropy
from attnkit.loss import label_smoothed_cross_entropy

PAD = 0


def case(dtype=torch.float64, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    B, T, D, V = 3, 7, 16, 50
    hidden = torch.randn(B, T, D, generator=g, dtype=dtype, requires_grad=True)
    weight = torch.randn(V, D, generator=g, dtype=dtype, requires_grad=True)
    b = torch.randn(V, generator=g, dtype=dtype, requires_grad=True) if bias else None
    target = torch.randint(1, V, (B, T), generator=g)
    target[0, 5:] = PAD  # padding at the end of a sentence
    target[2, 3:] = PAD
    return hidden, weight, b, target


@pytest.mark.parametrize("chunk", [1, 4, 8, 21, 4096])
@pytest.mark.parametrize("bias", [True, False])
def test_loss_and_gradients_equal_the_plain_path(chunk, bias):
    hidden, weight, b, target = case(bias=bias)
    plain = label_smoothed_cross_entropy(F.linear(hidden, weight, b), target, epsilon=0.1, pad_id=PAD)
    (plain.loss / plain.n_tokens).backward()
    want = [p.grad.clone() for p in (hidden, weight, b) if p is not None]
    for p in (hidden, weight, b):
        if p is not None:
            p.grad = None
    fused = linear_label_smoothed_cross_entropy(
        hidden, weight, target, epsilon=0.1, pad_id=PAD, bias=b, chunk=chunk
    )
    (fused.loss / fused.n_tokens).backward()
    got = [p.grad for p in (hidden, weight, b) if p is not None]
    assert fused.n_tokens == plain.n_tokens
    # float64 throughout: equal to rounding (the plain path's log-softmax runs in float32)
    torch.testing.assert_close(fused.loss, plain.loss.double(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(fused.nll, plain.nll.double(), rtol=1e-6, atol=1e-6)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    assert hidden.grad[0, 5:].abs().max() == 0 and hidden.grad[2, 3:].abs().max() == 0  # padding


def test_float32_and_bf16_hidden_states_follow_the_plain_path():
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
        hidden, weight, b, target = case(dtype=torch.float32)
        h = hidden.detach().to(dtype).requires_grad_()
        plain = label_smoothed_cross_entropy(
            F.linear(h, weight.to(dtype), b.to(dtype)), target, epsilon=0.1, pad_id=PAD
        )
        fused = linear_label_smoothed_cross_entropy(
            h, weight, target, epsilon=0.1, pad_id=PAD, bias=b, chunk=5
        )
        torch.testing.assert_close(fused.loss, plain.loss.float(), rtol=tol, atol=tol)
        fused.loss.backward()
        assert h.grad.dtype == dtype and weight.grad.dtype == torch.float32


def test_epsilon_zero_is_the_cross_entropy():
    hidden, weight, b, target = case()
    fused = linear_label_smoothed_cross_entropy(
        hidden, weight, target, epsilon=0.0, pad_id=PAD, bias=b, chunk=3
    )
    logits = F.linear(hidden, weight, b).reshape(-1, weight.size(0))
    want = F.cross_entropy(logits, target.reshape(-1), ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(fused.loss.double(), want.double())
    torch.testing.assert_close(fused.nll.double(), want.double())
