"""Continuous batching: sentences that join a running decoder get what they get alone.

The contract under test: ``join_states`` lets sentences at different steps decode in one
batch with every row's logits equal to decoding it alone; ``BeamPool`` (sentences join and leave
at every step) returns for each sentence exactly ``beam_search``'s result for it alone; the packed
linears keep plain sgemm for the encoder's inputs.
"""

from __future__ import annotations

import pytest
import torch

from attnkit.decoding import beam_search
from attnkit.decoding.continuous import BeamPool, join_states, trim
from attnkit.model import TransformerState
from helpers import make_model, random_tokens

pytestmark = pytest.mark.usefixtures("one_thread")


def _sources(n: int, seed: int = 7) -> list[torch.Tensor]:
    """n sources (1, S) of different lengths, no padding."""
    g = torch.Generator().manual_seed(seed)
    return [random_tokens(1, int(torch.randint(2, 9, (1,), generator=g)), seed=seed + i) for i in range(n)]


def _pad(srcs: list[torch.Tensor]) -> torch.Tensor:
    width = max(s.size(1) for s in srcs)
    return torch.cat([torch.nn.functional.pad(s, (0, width - s.size(1))) for s in srcs])  # (B, S)


@pytest.mark.parametrize("kind", ["transformer", "transformer-pre"])
def test_joined_state_decodes_each_row_as_alone(kind):
    model = make_model(kind)
    a, b = _pad(_sources(2, seed=1)), _sources(1, seed=5)[0]
    tgt_a = random_tokens(2, 3, seed=2)  # sentence group a is 3 positions ahead of b
    with torch.no_grad():
        alone_a = model.init_state(model.encode(a))
        model.decode(tgt_a[:, :3], alone_a)
        alone_b = model.init_state(model.encode(b))
        joined = model.init_state(model.encode(a))
        model.decode(tgt_a[:, :3], joined)
        join_states(joined, model.init_state(model.encode(b)))
        assert joined.start.tolist() == [0, 0, 3]
        step_b = random_tokens(1, 2, seed=4)
        for t in range(2):  # two steps together, compared with the same steps alone
            tokens = torch.cat([random_tokens(2, 1, seed=10 + t), step_b[:, t : t + 1]])  # (3, 1)
            together = model.decode(tokens, joined).logits  # (3, 1, V)
            want_a = model.decode(tokens[:2], alone_a).logits
            want_b = model.decode(tokens[2:], alone_b).logits
            assert torch.allclose(together[:2], want_a, atol=1e-5)
            assert torch.allclose(together[2:], want_b, atol=1e-5)
        # group a leaves: the cache drops the positions only it used, b's positions start at 0 again
        joined.select(torch.tensor([2]))
        trim(joined)
        assert joined.start is None and len(joined) == len(alone_b)
        last = model.decode(step_b[:, 1:], joined).logits
        assert torch.allclose(last, model.decode(step_b[:, 1:], alone_b).logits, atol=1e-5)


def test_join_needs_the_same_group():
    model = make_model("transformer")
    src = random_tokens(2, 5)
    with torch.no_grad():
        s1, s2 = model.init_state(model.encode(src)), model.init_state(model.encode(src))
    s1.expand(3)
    with pytest.raises(ValueError, match="rows per sentence"):
        join_states(s1, s2)


@pytest.mark.parametrize(("beam", "nbest", "alpha"), [(3, 2, 0.6), (4, 1, 1.0)])
def test_pool_gives_each_sentence_what_beam_search_gives_it_alone(beam, nbest, alpha):
    model = make_model("transformer")
    srcs = _sources(12)
    opts = dict(beam_size=beam, nbest=nbest, length_penalty=alpha, max_len_a=1.0, max_len_b=4)
    alone = [beam_search(model, s, **opts)[0] for s in srcs]
    pool = BeamPool(model, **opts)
    got, nxt, steps = {}, 0, 0
    while len(got) < len(srcs):
        if nxt < len(srcs) and steps % 2 == 0:  # 1, 2, 3, 1, ... sentences join every other step
            group = srcs[nxt : nxt + 1 + (steps // 2) % 3]
            pool.add(_pad(group), list(range(nxt, nxt + len(group))))
            nxt += len(group)
        for tag, hyps in pool.step():
            assert tag not in got
            got[tag] = hyps
        steps += 1
        assert steps < 500
    assert len(pool) == 0 and pool.state is None
    for i, want in enumerate(alone):
        assert [h.tokens for h in got[i]] == [h.tokens for h in want], i
        assert [h.score for h in got[i]] == pytest.approx([h.score for h in want], abs=1e-4)


def test_pool_refuses_what_it_cannot_join():
    with pytest.raises(ValueError, match="use beam_search"):
        BeamPool(make_model("rnn"), beam_size=2).add(random_tokens(1, 4), ["a"])
    with pytest.raises(ValueError, match="half the vocabulary"):
        BeamPool(make_model("transformer"), beam_size=64).add(random_tokens(1, 4), ["a"])
    pool = BeamPool(make_model("transformer"), beam_size=2)
    with pytest.raises(ValueError, match="tags"):
        pool.add(random_tokens(2, 4), ["only one"])


def test_rotary_positions_cannot_decode_joined_sentences():
    model = make_model("transformer", positional="rotary")
    with torch.no_grad():
        state = model.init_state(model.encode(random_tokens(1, 4)))
        model.decode(torch.ones(1, 2, dtype=torch.long), state)
        join_states(state, model.init_state(model.encode(random_tokens(1, 3))))
        assert isinstance(state, TransformerState) and state.start is not None
        with pytest.raises(ValueError, match="absolute positions"):
            model.decode(torch.ones(2, 1, dtype=torch.long), state)


def test_joined_sentences_cannot_ask_for_attention_histories():
    from attnkit.decoding import decode_step

    model = make_model("transformer")
    pool = BeamPool(model, beam_size=2)
    pool.add(random_tokens(1, 4), ["a"])
    pool.step()
    pool.add(random_tokens(1, 3), ["b"])
    with pytest.raises(ValueError, match="started together"):
        decode_step(model, pool.state, pool.search, need_weights=True)
