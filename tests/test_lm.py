"""The decoder-only LM behind every search: a prompt's state, then greedy, beam and sampling."""

import torch

from attnkit.decoding import beam_decode, greedy_decode
from attnkit.decoding.sampling import SamplingConfig, sample_decode
from attnkit.model import LMConfig, TransformerLM
from attnkit.tasks.language_model import start_from_prompt
from helpers import random_tokens

BOS = 1


def make_lm(**overrides) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(LMConfig.preset("tiny", **overrides)).eval()


def test_prompt_state_then_cached_steps_equal_one_full_pass():
    lm = make_lm(norm="pre")
    prompt, more = random_tokens(2, 4), random_tokens(2, 3, seed=5)
    full = lm(torch.cat([torch.full((2, 1), BOS), prompt, more], 1))  # (2, 8, V)
    state, last = start_from_prompt(lm, prompt)
    assert len(state) == 4 and torch.equal(last, prompt[:, -1:])
    steps = [lm.decode(last, state).logits] + [lm.decode(more[:, t : t + 1], state).logits for t in range(3)]
    torch.testing.assert_close(torch.cat(steps, 1), full[:, 4:], atol=1e-5, rtol=1e-5)


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
    limits = torch.full((3,), 6)

    def run(search, **kw):
        state, last = start_from_prompt(lm, prompts)
        return search(lm, state, last, limits, **kw)

    greedy = run(greedy_decode)
    beam = run(beam_decode, beam_size=1, length_penalty=0.0)
    sampled = run(sample_decode, sampling=SamplingConfig(top_k=1), seed=0)
    for i, prompt in enumerate(prompts):
        assert greedy[i].tokens == manual_greedy(lm, prompt, 5)  # the 6th token is eos at the limit
        assert beam[i][0].tokens == greedy[i].tokens
        assert sampled[i].tokens == greedy[i].tokens


def test_beam_search_on_the_lm_returns_k_distinct_continuations():
    lm = make_lm()
    state, last = start_from_prompt(lm, random_tokens(2, 3))
    out = beam_decode(lm, state, last, torch.full((2,), 5), beam_size=4, nbest=4)
    for hyps in out:
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps) >= 2
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_an_empty_prompt_starts_from_bos():
    lm = make_lm()
    state, last = start_from_prompt(lm, torch.zeros(2, 0, dtype=torch.long))
    assert len(state) == 0 and last.tolist() == [[BOS], [BOS]]
