"""Continuous batching over the fixed layout: sentences that join and leave a running beam search
through the fixed-layout step each get what ``beam_search`` gives them alone, and once a bucket's
graph exists, joins, leaves and every step of every sentence reuse it (no recompilation)."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from attnkit.decoding import beam_search
from attnkit.decoding.static import StaticDecoder
from attnkit.decoding.static_pool import StaticBeamPool
from attnkit.model.config import LMConfig
from attnkit.model.lm import TransformerLM
from helpers import make_model, random_tokens

pytestmark = pytest.mark.usefixtures("one_thread")


def _sources(n: int, seed: int = 7, longest: int = 9) -> list[torch.Tensor]:
    """n sources (1, S) of different lengths, no padding."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, longest, (n,), generator=g).tolist()
    return [random_tokens(1, S, seed=seed + i) for i, S in enumerate(lengths)]


def _pad(srcs: list[torch.Tensor]) -> torch.Tensor:
    width = max(s.size(1) for s in srcs)
    return torch.cat([torch.nn.functional.pad(s, (0, width - s.size(1))) for s in srcs])  # (B, S)


def _run(pool: StaticBeamPool, srcs: list[torch.Tensor], schedule: list[int]) -> tuple[dict, list]:
    """Join ``schedule[i]`` sentences before step i (while any are left); results and each step's buckets."""
    got, nxt, steps, buckets = {}, 0, 0, []
    while len(got) < len(srcs):
        n = schedule[steps % len(schedule)]
        if nxt < len(srcs) and n:
            group = srcs[nxt : nxt + n]
            pool.add(_pad(group), list(range(nxt, nxt + len(group))))
            nxt += len(group)
        buckets.append(pool.buckets)
        for tag, hyps in pool.step():
            assert tag not in got
            got[tag] = hyps
        steps += 1
        assert steps < 500
    assert len(pool) == 0 and pool.caches is None  # an empty pool keeps no buffers
    return got, buckets


def _same_as_alone(model, srcs, got, opts) -> None:
    for i, src in enumerate(srcs):
        want = beam_search(model, src, **opts)[0]
        assert [h.tokens for h in got[i]] == [h.tokens for h in want], i
        assert [h.score for h in got[i]] == pytest.approx([h.score for h in want], abs=1e-4)
        assert [h.log_prob for h in got[i]] == pytest.approx([h.log_prob for h in want], abs=1e-4)


@pytest.mark.parametrize(
    ("kind", "positional", "beam", "nbest", "alpha"),
    [("transformer", "sinusoidal", 4, 1, 0.6), ("transformer-pre", "learned", 3, 2, 1.0)],
)
def test_each_sentence_gets_what_beam_search_gives_it_alone(kind, positional, beam, nbest, alpha):
    model = make_model(kind, positional=positional)
    srcs = _sources(14)
    srcs[9:9] = [random_tokens(1, 36, seed=40), random_tokens(1, 34, seed=41)]  # a larger source bucket
    opts = dict(beam_size=beam, nbest=nbest, length_penalty_alpha=alpha, max_len_a=1.0, max_len_b=4)
    pool = StaticBeamPool(StaticDecoder(model), **opts)
    got, buckets = _run(pool, srcs, [3, 0, 1, 2, 0, 0, 5])
    _same_as_alone(model, srcs, got, opts)
    rows = [R for R, _, _ in buckets]
    grew = any(b > a for a, b in zip(rows, rows[1:]))
    shrank = any(b < a for a, b in zip(rows, rows[1:]))
    assert grew and shrank, rows  # the buffers followed the load both ways
    assert {Sb for _, _, Sb in buckets} == {32, 64}  # the long sources came and went
    assert {Tb for _, Tb, _ in buckets} == {32, 64}  # the cache grew with their long hypotheses


def test_joins_and_leaves_reuse_each_buckets_graph():
    # One graph per bucket of (rows, cache positions, source positions), whatever joins or leaves:
    # the same schedule again, other sentences, compiles nothing more.
    model = make_model("transformer")
    counter = CompileCounter()
    decoder = StaticDecoder(model).compile(backend=counter)
    opts = dict(beam_size=4, max_len_a=1.0, max_len_b=4)
    srcs = _sources(12)
    got, buckets = _run(StaticBeamPool(decoder, **opts), srcs, [2, 1, 0, 3])
    _same_as_alone(model, srcs, got, opts)
    assert counter.frame_count == len(set(buckets)) >= 2
    frames = counter.frame_count
    more = [s.flip(1) for s in srcs]  # the same lengths, other tokens: the same buckets
    got, again = _run(StaticBeamPool(decoder, **opts), more, [2, 1, 0, 3])
    assert set(again) <= set(buckets)
    _same_as_alone(model, more, got, opts)
    assert counter.frame_count == frames


def test_free_rows_stay_within_the_cache():
    # A place left free for more than a cache's length keeps decoding, unread: its rows' positions
    # stop at the cache's last one (and the embeddings'), never past the buffers.
    model = make_model("transformer")
    opts = dict(beam_size=4, max_len_a=1.0, max_len_b=4)
    srcs = [random_tokens(1, 3, seed=100 + i) for i in range(30)]
    schedule = [3, 0, 0] + [1, 0, 0] * 30  # two or three live: the fourth place stays free
    got, buckets = _run(StaticBeamPool(StaticDecoder(model), **opts), srcs, schedule)
    _same_as_alone(model, srcs, got, opts)
    assert len(buckets) > 40 and {Tb for _, Tb, _ in buckets} == {32}


def test_a_step_out_of_graphs_decodes_eagerly(monkeypatch):
    # A long-lived server may meet more buckets than one compiled step may hold: the pool warns and
    # goes on with the same step uncompiled, with the same results.
    import attnkit.decoding.static as static

    monkeypatch.setattr(static, "GRAPHS_PER_STEP", 1)
    model = make_model("transformer")
    opts = dict(beam_size=2, max_len_a=1.0, max_len_b=3)
    pool = StaticBeamPool(StaticDecoder(model).compile(backend=CompileCounter()), **opts)
    srcs = _sources(6, seed=5)
    with pytest.warns(UserWarning, match="most graphs"):
        got, buckets = _run(pool, srcs, [1, 2, 3])
    assert len(set(buckets)) > 1
    _same_as_alone(model, srcs, got, opts)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_graphs_write_each_rows_own_position(backend):
    # A real graph: the per-row cache writes (a scatter into the buffers) go through
    # functionalization (aot_eager) and Inductor's kernels, and are written back in place.
    model = make_model("transformer-pre")
    decoder = StaticDecoder(model).compile(backend=backend)
    opts = dict(beam_size=2, nbest=2, max_len_a=1.0, max_len_b=3)
    srcs = _sources(3, seed=11, longest=6)
    got, _ = _run(StaticBeamPool(decoder, **opts), srcs, [1, 2])  # the second and third join the first
    _same_as_alone(model, srcs, got, opts)


def test_pool_refusals():
    model = make_model("transformer")
    lm = StaticDecoder(TransformerLM(LMConfig.preset("tiny")).eval())
    with pytest.raises(TypeError, match="translate with a Transformer"):
        StaticBeamPool(lm)
    with pytest.raises(ValueError, match="half the vocabulary"):
        StaticBeamPool(StaticDecoder(model), beam_size=64)
    with pytest.raises(ValueError, match="nbest"):
        StaticBeamPool(StaticDecoder(model), beam_size=2, nbest=3)
    with pytest.raises(ValueError, match="use BeamPool"):
        StaticBeamPool(StaticDecoder(model).cuda_graphs(capture=False))
    with pytest.raises(ValueError, match="tags"):
        StaticBeamPool(StaticDecoder(model), beam_size=2).add(random_tokens(2, 4), ["only one"])
