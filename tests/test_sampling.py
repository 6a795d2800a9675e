"""Sampling: the filters keep what they promise, seeded draws repeat, top-k 1 and top-p ~0 are greedy."""

import pytest
import torch

from attnkit.decoding import greedy_search
from attnkit.decoding.sampling import SamplingConfig, filter_logits, sample_search, sample_tokens
from attnkit.errors import ConfigError
from helpers import make_model, random_tokens


def test_top_k_keeps_exactly_the_k_most_probable():
    logits = torch.randn(5, 30, generator=torch.Generator().manual_seed(0))
    kept = torch.isfinite(filter_logits(logits, SamplingConfig(top_k=4)))
    assert kept.sum(-1).tolist() == [4] * 5
    assert torch.equal(kept, torch.zeros_like(kept).scatter(1, logits.topk(4).indices, True))


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    for p, n in [(0.4, 1), (0.5, 1), (0.6, 2), (0.8, 2), (0.81, 3), (0.99, 4), (1.0, 4)]:
        kept = torch.isfinite(filter_logits(probs.log(), SamplingConfig(top_p=p)))
        assert kept.sum().item() == n, (p, kept)
        assert kept[0, :n].all()


def test_draws_follow_the_tempered_distribution():
    probs = torch.tensor([0.6, 0.3, 0.1])
    logp = probs.log().expand(40000, 3)
    g = torch.Generator().manual_seed(0)
    tok, lp = sample_tokens(logp, SamplingConfig(), g)
    freq = torch.bincount(tok, minlength=3).float() / tok.numel()
    torch.testing.assert_close(freq, probs, atol=0.01, rtol=0)
    torch.testing.assert_close(lp, probs.log()[tok])  # scores are the model's own log-probabilities
    tok, _ = sample_tokens(logp, SamplingConfig(temperature=0.5), g)
    sharpened = probs**2 / (probs**2).sum()
    torch.testing.assert_close(
        torch.bincount(tok, minlength=3).float() / tok.numel(), sharpened, atol=0.01, rtol=0
    )


@pytest.mark.parametrize("bad", [dict(temperature=0.0), dict(top_k=-1), dict(top_p=0.0), dict(top_p=1.5)])
def test_bad_sampling_settings_are_config_errors(bad):
    with pytest.raises(ConfigError):
        SamplingConfig(**bad)


@pytest.mark.parametrize("kind", ["transformer", "rnn"])
@pytest.mark.parametrize("filters", [dict(top_k=1), dict(top_p=1e-6), dict(top_k=1, temperature=3.0)])
def test_top_k_1_and_top_p_near_0_equal_greedy(kind, filters):
    model = make_model(kind)
    src = random_tokens(4, 6)
    greedy = greedy_search(model, src, max_len_a=1.0, max_len_b=4)
    sampled = sample_search(model, src, seed=3, max_len_a=1.0, max_len_b=4, **filters)
    for g, (s,) in zip(greedy, sampled, strict=True):
        assert s.tokens == g.tokens
        assert s.log_prob == pytest.approx(g.log_prob, abs=1e-4)


def test_same_seed_same_samples_other_seed_other_samples():
    model = make_model("transformer")
    src = random_tokens(3, 5)
    kw = dict(temperature=2.0, num_samples=4, max_len_a=1.0, max_len_b=5)
    a = sample_search(model, src, seed=7, **kw)
    b = sample_search(model, src, seed=7, **kw)
    c = sample_search(model, src, seed=8, **kw)
    tokens = lambda out: [[h.tokens for h in hyps] for hyps in out]  # noqa: E731
    assert tokens(a) == tokens(b)
    assert tokens(a) != tokens(c)
    assert all(len(hyps) == 4 for hyps in a)
    assert len({tuple(t) for hyps in tokens(a) for t in hyps}) > 1  # samples differ from each other


def test_min_len_bans_an_early_end():
    model = make_model("transformer")
    src = random_tokens(6, 4)
    out = sample_search(
        model, src, seed=0, temperature=2.0, num_samples=3, min_len=3, max_len_a=1.0, max_len_b=6
    )
    assert all(len(h.tokens) >= 3 for hyps in out for h in hyps)
