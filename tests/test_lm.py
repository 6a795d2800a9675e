"""The decoder-only LM: causal, cached == full, and every search (greedy, beam, sampling) drives it."""

import pytest
import torch

from attnkit.decoding import beam_search, greedy_search
from attnkit.decoding.sampling import sample_search
from attnkit.model import LMConfig, TransformerLM
from helpers import random_tokens

BOS = 1


def make_lm(**overrides) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(LMConfig.preset("tiny", **overrides)).eval()


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_prompt_then_cached_steps_equal_one_full_pass(norm):
    lm = make_lm(norm=norm)
    prompt, more = random_tokens(2, 4), random_tokens(2, 3, seed=5)
    full = lm(torch.cat([torch.full((2, 1), BOS), prompt, more], 1))  # (2, 8, V)
    enc = lm.encode(prompt)
    cache = lm.init_cache(enc)
    first = lm.decode(torch.full((2, 1), BOS), enc, cache=cache).logits  # bos + prompt: (2, 5, V)
    steps = [lm.decode(more[:, t : t + 1], enc, cache=cache).logits for t in range(3)]
    torch.testing.assert_close(torch.cat([first, *steps], 1), full, atol=1e-5, rtol=1e-5)


def test_tied_output_is_the_embedding_matrix():
    lm = make_lm()
    assert lm.output_proj.weight is lm.embed.embedding.weight and lm.output_proj.bias is None
    untied = make_lm(tie_output=False)
    assert untied.output_proj.weight is not untied.embed.embedding.weight


def manual_greedy(lm, prompt, n):
    """Argmax continuation recomputing the whole sequence every step (no cache, no search code)."""
    seq = torch.cat([torch.tensor([BOS]), prompt])[None]
    out = []
    for _ in range(n):
        logits = lm(seq)[0, -1].clone()
        logits[[0, 1]] = float("-inf")  # the searches never produce pad or bos
        tok = int(logits.argmax())
        if tok == lm.config.eos_id:
            break
        out.append(tok)
        seq = torch.cat([seq, torch.tensor([[tok]])], 1)
    return out


def test_greedy_beam_1_and_top_k_1_continue_a_prompt_alike():
    lm = make_lm()
    prompts = random_tokens(3, 4)
    kw = dict(max_len_a=0.0, max_len_b=6)
    greedy = greedy_search(lm, prompts, **kw)
    beam = beam_search(lm, prompts, beam_size=1, length_penalty_alpha=0.0, **kw)
    sampled = sample_search(lm, prompts, top_k=1, seed=0, **kw)
    for i, prompt in enumerate(prompts):
        assert greedy[i].tokens == manual_greedy(lm, prompt, 5)  # the 6th token is eos at the limit
        assert beam[i][0].tokens == greedy[i].tokens
        assert sampled[i][0].tokens == greedy[i].tokens


def test_beam_search_on_the_lm_returns_k_distinct_continuations():
    lm = make_lm()
    out = beam_search(lm, random_tokens(2, 3), beam_size=4, nbest=4, max_len_a=0.0, max_len_b=5)
    for hyps in out:
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps) >= 2
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_padded_prompts_in_one_batch_are_refused():
    lm = make_lm()
    prompts = random_tokens(2, 4)
    prompts[1, 3] = 0
    with pytest.raises(ValueError, match="same length"):
        lm.encode(prompts)
