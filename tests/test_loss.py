"""Label-smoothed cross entropy, readable (attnkit.loss) and fused (attnkit.fast): both equal
PyTorch's, ignore padding and reduce to NLL at epsilon 0; the fused gradient is checked by hand."""

import pytest
import torch
import torch.nn.functional as F

from attnkit import fast, loss

BOTH = pytest.mark.parametrize(
    "ls_ce", [loss.label_smoothed_cross_entropy, fast.label_smoothed_cross_entropy]
)
label_smoothed_cross_entropy = fast.label_smoothed_cross_entropy


@BOTH
def test_matches_torch_cross_entropy_with_label_smoothing_and_ignores_padding(ls_ce):
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, requires_grad=True)
    target = torch.randint(1, 11, (3, 5))
    target[1, 3:] = 0
    out = ls_ce(logits, target, epsilon=0.1, pad_id=0)
    ref = F.cross_entropy(
        logits.view(-1, 11), target.view(-1), ignore_index=0, label_smoothing=0.1, reduction="sum"
    )
    torch.testing.assert_close(out.loss, ref)
    nll = F.cross_entropy(logits.view(-1, 11), target.view(-1), ignore_index=0, reduction="sum")
    torch.testing.assert_close(out.nll, nll.detach())
    assert out.n_tokens == 13
    out.loss.backward()
    (grad,) = torch.autograd.grad(ref, logits)
    torch.testing.assert_close(logits.grad, grad)
    assert torch.all(logits.grad[1, 3:] == 0)  # padding positions get no gradient


@BOTH
def test_epsilon_zero_is_plain_nll(ls_ce):
    logits, target = torch.randn(4, 7), torch.tensor([1, 2, 3, 4])
    out = ls_ce(logits, target, epsilon=0.0, pad_id=0)
    torch.testing.assert_close(out.loss, out.nll)


def test_handwritten_gradient_matches_finite_differences():
    torch.manual_seed(0)
    logits = torch.randn(6, 9, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([1, 2, 0, 4, 8, 0])

    def loss(x):
        return label_smoothed_cross_entropy(x, target, epsilon=0.2, pad_id=0).loss

    (3.0 * loss(logits)).backward()  # an upstream gradient other than 1
    numeric = torch.zeros_like(logits)
    h = 1e-6
    with torch.no_grad():
        for i in range(logits.size(0)):
            for j in range(logits.size(1)):
                step = torch.zeros_like(logits)
                step[i, j] = h
                numeric[i, j] = 3.0 * (loss(logits + step) - loss(logits - step)) / (2 * h)
    torch.testing.assert_close(logits.grad, numeric, atol=1e-7, rtol=1e-6)


@BOTH
def test_bfloat16_logits_get_a_bfloat16_gradient_computed_in_float32(ls_ce):
    torch.manual_seed(0)
    logits = torch.randn(5, 13, dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(1, 13, (5,))
    out = ls_ce(logits, target, epsilon=0.1, pad_id=0)
    assert out.loss.dtype == torch.float32
    out.loss.backward()
    assert logits.grad.dtype == torch.bfloat16
    ref = logits.detach().float().requires_grad_()
    F.cross_entropy(ref, target, label_smoothing=0.1, reduction="sum").backward()
    torch.testing.assert_close(logits.grad.float(), ref.grad, atol=1e-2, rtol=1e-2)


def test_second_backward_is_refused_not_wrong():
    logits = torch.randn(3, 7, requires_grad=True)
    out = label_smoothed_cross_entropy(logits, torch.tensor([1, 2, 3]), epsilon=0.1, pad_id=0)
    out.loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="only once"):
        out.loss.backward()
