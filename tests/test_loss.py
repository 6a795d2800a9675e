"""Label-smoothed cross entropy: equals PyTorch's, ignores padding, reduces to NLL at epsilon 0."""

import torch
import torch.nn.functional as F

from attnkit.loss import label_smoothed_cross_entropy


def test_matches_torch_cross_entropy_with_label_smoothing_and_ignores_padding():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, requires_grad=True)
    target = torch.randint(1, 11, (3, 5))
    target[1, 3:] = 0
    out = label_smoothed_cross_entropy(logits, target, epsilon=0.1, pad_id=0)
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


def test_epsilon_zero_is_plain_nll():
    logits, target = torch.randn(4, 7), torch.tensor([1, 2, 3, 4])
    out = label_smoothed_cross_entropy(logits, target, epsilon=0.0, pad_id=0)
    torch.testing.assert_close(out.loss, out.nll)
