"""attnkit's dropout: the distribution and gradient of nn.Dropout, identity in eval mode."""

import pytest
import torch

from attnkit.dropout import Dropout, dropout


def test_keeps_one_minus_p_and_preserves_the_mean():
    torch.manual_seed(0)
    x = torch.ones(400_000)
    y = dropout(x, 0.1)
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - 0.1) < 0.003  # binomial std ~ 0.0005
    kept = y[y != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / 0.9))
    assert abs(y.mean().item() - 1.0) < 0.01


def test_gradient_is_the_forward_mask():
    torch.manual_seed(0)
    x = torch.randn(8, 16, requires_grad=True)
    y = dropout(x, 0.3)
    y.backward(torch.ones_like(y))
    mask = (y != 0).float() / 0.7
    torch.testing.assert_close(x.grad, mask)


def test_eval_mode_and_p_zero_are_identity_and_p_one_drops_all():
    x = torch.randn(4, 5)
    module = Dropout(0.5).eval()
    assert module(x) is x
    assert dropout(x, 0.0) is x
    assert torch.all(dropout(x, 1.0) == 0)
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(1.5)


def test_seeded_runs_repeat():
    x = torch.randn(32, 32)
    torch.manual_seed(7)
    a = dropout(x, 0.2)
    torch.manual_seed(7)
    b = dropout(x, 0.2)
    assert torch.equal(a, b)
