"""Greedy and beam search: beam 1 equals greedy, beams are ranked, limits hold, cache is used."""

import pytest
import torch

from attnkit.decoding import beam_search, greedy_search, length_penalty
from helpers import make_model, random_tokens


@pytest.mark.parametrize("kind", ["transformer", "transformer-pre", "rnn"])
def test_beam_size_one_equals_greedy(kind):
    model = make_model(kind)
    src = random_tokens(6, 7, seed=3)
    src[2, 3:] = 0
    greedy = greedy_search(model, src)
    beam = beam_search(model, src, beam_size=1, length_penalty=0.0)
    assert [h.tokens for h in greedy] == [b[0].tokens for b in beam]
    for g, (b,) in zip(greedy, beam, strict=True):
        assert g.log_prob == pytest.approx(b.log_prob, abs=1e-4)


def test_greedy_scores_are_the_sum_of_token_log_probs():
    model = make_model("transformer")
    src = random_tokens(3, 5)
    for i, hyp in enumerate(greedy_search(model, src)):
        tgt_in = torch.tensor([[1] + hyp.tokens])
        tgt_out = torch.tensor(hyp.tokens + [2])
        logp = model(src[i : i + 1], tgt_in).log_softmax(-1)[0]
        assert hyp.log_prob == pytest.approx(logp.gather(1, tgt_out[:, None]).sum().item(), abs=1e-4)


@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_beam_returns_ranked_nbest_with_consistent_scores(kind):
    model = make_model(kind)
    src = random_tokens(4, 6, seed=5)
    results = beam_search(model, src, beam_size=4, nbest=3, length_penalty=0.6)
    assert len(results) == 4
    for i, hyps in enumerate(results):
        assert len(hyps) == 3
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            assert h.score == pytest.approx(h.log_prob / length_penalty(len(h.tokens) + 1, 0.6), rel=1e-5)
            tgt_in = torch.tensor([[1] + h.tokens])
            logp = model(src[i : i + 1], tgt_in).log_softmax(-1)[0]
            gold = torch.tensor(h.tokens + [2])
            assert h.log_prob == pytest.approx(logp.gather(1, gold[:, None]).sum().item(), abs=1e-3)


def test_beam_search_is_at_least_as_good_as_greedy_in_model_score():
    model = make_model("transformer")
    src = random_tokens(8, 6, seed=7)
    greedy = greedy_search(model, src)
    beam = beam_search(model, src, beam_size=5, length_penalty=0.0)
    better_or_equal = sum(b[0].log_prob >= g.log_prob - 1e-4 for g, b in zip(greedy, beam, strict=True))
    assert better_or_equal == len(greedy)


def test_max_length_is_a_function_of_source_length():
    model = make_model("transformer")
    src = random_tokens(3, 6)
    src[1, 2:] = 0  # 2 real tokens
    for h in greedy_search(model, src, max_len_a=1.0, max_len_b=1):
        assert len(h.tokens) <= 6  # at most a * |src| + b - 1 tokens before the forced eos
    short = greedy_search(model, src, max_len_a=1.0, max_len_b=1)[1]
    assert len(short.tokens) <= 2
    for hyps in beam_search(model, src, beam_size=3, max_len_a=0.0, max_len_b=4):
        assert len(hyps[0].tokens) <= 3


def test_attention_of_the_chosen_hypothesis_is_returned():
    model = make_model("transformer")
    src = random_tokens(2, 6)
    src[1, 4:] = 0
    for hyps in beam_search(model, src, beam_size=3, return_attention=True):
        h = hyps[0]
        assert h.attention.shape == (len(h.tokens) + 1, 6)
        torch.testing.assert_close(h.attention.sum(-1), torch.ones(len(h.tokens) + 1))
    g = greedy_search(model, src, return_attention=True)[1]
    assert torch.all(g.attention[:, 4:] == 0)  # padding gets no attention


def test_decoding_uses_the_cache_one_position_per_step():
    """Each decoder call sees only the newest token: the prefix is never re-run."""
    model = make_model("transformer")
    seen = []
    original = model.decode

    def spy(tgt, state, **kw):
        seen.append(tgt.size(1))
        return original(tgt, state, **kw)

    model.decode = spy
    beam_search(model, random_tokens(2, 5), beam_size=3)
    greedy_search(model, random_tokens(2, 5))
    assert seen and set(seen) == {1}


def test_nbest_larger_than_beam_is_rejected():
    with pytest.raises(ValueError, match="nbest"):
        beam_search(make_model("transformer"), random_tokens(1, 4), beam_size=2, nbest=3)


@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_min_len_bans_eos_until_then_and_the_limit_forces_it(kind):
    model = make_model(kind)
    src = random_tokens(3, 5, seed=7)
    for hyp in greedy_search(model, src, min_len=6, max_len_a=0, max_len_b=7):
        assert len(hyp.tokens) == 6
    for hyps in beam_search(model, src, beam_size=3, min_len=6, max_len_a=0, max_len_b=7):
        assert all(len(h.tokens) == 6 for h in hyps)


@pytest.mark.parametrize("beam", [11, 20, 30])
def test_beam_wider_than_half_the_vocabulary_decodes(beam):
    """A beam of 11..30 over a 20-token vocabulary (17 generable) must search, not crash."""
    model = make_model("transformer")
    src = random_tokens(2, 5, seed=8)
    found = beam_search(model, src, beam_size=beam, nbest=3)
    greedy = greedy_search(model, src)
    for hyps, g in zip(found, greedy):
        assert 1 <= len(hyps) <= 3 and all(3 <= t < 20 for h in hyps for t in h.tokens)
        assert hyps[0].log_prob >= g.log_prob - 1e-4 or hyps[0].score >= g.score - 1e-4


@pytest.mark.parametrize("beams", [1, 4])
def test_ranking_by_vocabulary_blocks_equals_plain_topk(monkeypatch, beams):
    """The block shortcut finds exactly the C best extensions that one top-k over all tokens finds."""
    from attnkit.decoding import topk

    assert [topk.block_size(V) for V in (4000, 1024, 8000, 4099, 500)] == [50, 64, 64, None, None]
    g = torch.Generator().manual_seed(0)
    for trial in range(40):
        B, V = 1 + trial % 9, (4000, 1024, 8000, 4096)[trial % 4]
        logp = torch.log_softmax(torch.randn(B * beams, V, generator=g) * 3, dim=-1)
        scores = torch.randn(B, beams, generator=g) * 5
        if trial % 5 == 0:
            scores[:, 1:] = float("-inf")  # a sentence's first step: one live row
        if trial % 7 == 0:
            logp[:, 5:] = float("-inf")  # rows at their length limit: only a few tokens possible
        C = min(8, beams * V)
        blocks = topk.top_extensions(scores, logp, C)
        with monkeypatch.context() as m:
            m.setattr(topk, "block_size", lambda V: None)
            plain = topk.top_extensions(scores, logp, C)
        assert torch.equal(blocks[0], plain[0])
        finite = torch.isfinite(plain[0])  # impossible (-inf) candidates may be any of their ties
        assert torch.equal(blocks[1][finite], plain[1][finite])
        assert torch.equal(blocks[2][finite], plain[2][finite])


def test_beam_search_over_a_large_vocabulary_is_unchanged_by_the_block_ranking(monkeypatch):
    from attnkit.decoding import topk

    model = make_model("transformer", src_vocab_size=30, tgt_vocab_size=1200)
    src = random_tokens(5, 6, vocab=30, seed=4)
    src[1, 4:] = 0
    assert topk.block_size(1200) == 60
    fast = beam_search(model, src, beam_size=4, nbest=3)
    monkeypatch.setattr(topk, "block_size", lambda V: None)
    plain = beam_search(model, src, beam_size=4, nbest=3)

    def outputs(results):
        return [[(h.tokens, h.score) for h in hyps] for hyps in results]

    assert outputs(fast) == outputs(plain)
