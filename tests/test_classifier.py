"""The encoder classifier: the three poolings, padding invariance, attention-pooling weights, learning."""

import pytest
import torch

from attnkit.errors import ConfigError
from attnkit.model import ClassifierConfig, TransformerClassifier
from helpers import random_tokens

POOLINGS = ["mean", "first", "attention"]
KEYWORDS = (3, 4, 5)  # the class is which of these appears once among filler tokens 6..19


def make(pooling: str, **overrides) -> TransformerClassifier:
    torch.manual_seed(0)
    return TransformerClassifier(
        ClassifierConfig.preset("tiny", n_classes=3, pooling=pooling, **overrides)
    ).eval()


@pytest.mark.parametrize("pooling", POOLINGS)
def test_prediction_ignores_padding_and_batch_neighbours(pooling):
    clf = make(pooling)
    x = random_tokens(3, 7)
    x[1, 3:] = 0  # a shorter sentence in the batch
    logits = clf(x)
    padded = torch.cat([x, torch.zeros(3, 4, dtype=torch.long)], 1)
    torch.testing.assert_close(clf(padded), logits, atol=1e-5, rtol=1e-5)
    alone = clf(x[1:2, :3])  # the short sentence without any padding
    torch.testing.assert_close(alone[0], logits[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pooling", POOLINGS)
def test_token_weights_sum_to_one_over_real_tokens_and_are_zero_on_padding(pooling):
    clf = make(pooling)
    x = random_tokens(3, 6)
    x[0, 2:] = 0
    x[2, 5:] = 0
    w = clf.classify(x, need_weights=True).token_weights  # (B, T)
    assert w.shape == (3, 6)
    torch.testing.assert_close(w.sum(-1), torch.ones(3))
    assert torch.all(w[x == 0] == 0)
    assert torch.all(w[x != 0] > 0)


def test_attention_pooling_weights_differ_from_the_mean():
    w = make("attention").classify(random_tokens(2, 6)).token_weights
    assert not torch.allclose(w, torch.full_like(w, 1 / 6))  # one weight per token, not uniform


def test_unknown_pooling_is_a_config_error_naming_the_field():
    with pytest.raises(ConfigError, match="pooling"):
        ClassifierConfig.preset("tiny", pooling="max")
    with pytest.raises(ConfigError, match="cls_id"):
        ClassifierConfig.preset("tiny", cls_id=0)


def keyword_batch(n: int, g: torch.Generator, T: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    """Filler tokens with one keyword at a random position; lengths vary, the rest is padding."""
    x = torch.randint(6, 20, (n, T), generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    lengths = torch.randint(4, T + 1, (n,), generator=g)
    pos = (torch.rand(n, generator=g) * lengths).long()
    x[torch.arange(n), pos] = torch.tensor(KEYWORDS)[y]
    x[torch.arange(T)[None, :] >= lengths[:, None]] = 0
    return x, y


@pytest.mark.parametrize("pooling", POOLINGS)
def test_learns_a_keyword_rule_to_95_percent(pooling):
    torch.set_num_threads(1)
    clf = make(pooling).train()
    opt = torch.optim.Adam(clf.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(150):
        x, y = keyword_batch(64, g)
        loss = torch.nn.functional.cross_entropy(clf(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    clf.eval()
    x, y = keyword_batch(500, torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = clf.classify(x, need_weights=True)
    accuracy = (out.logits.argmax(-1) == y).float().mean().item()
    assert accuracy >= 0.95, accuracy
    if pooling == "attention":  # the deciding word carries more than its even share of the weight
        on_keyword = out.token_weights[(x >= 3) & (x <= 5)]
        share = 1.0 / (x != 0).sum(-1).float()
        assert on_keyword.mean() > 2 * share.mean()
