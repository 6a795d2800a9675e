"""attnkit.decoding.static: the fixed-layout step equals today's cached decoder, its searches give
today's tokens and scores, and a compiled step is one graph for every position and sentence of a bucket.
"""

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from attnkit.attention import KVCache
from attnkit.decoding import beam_search, greedy_search, step_log_probs
from attnkit.decoding.static import (
    SlotCache,
    StaticDecoder,
    StaticStep,
    beam_search_static,
    greedy_search_static,
    length_bucket,
    row_bucket,
    start_static,
)
from helpers import make_model, random_tokens


def padded_source(B: int = 6, S: int = 7, seed: int = 3) -> torch.Tensor:
    src = random_tokens(B, S, seed=seed)
    src[2, 3:] = 0  # one short sentence: padding in the source
    return src


def same_hypotheses(got, want, tol: float = 1e-5) -> None:
    assert [h.tokens for h in got] == [h.tokens for h in want]
    for g, w in zip(got, want, strict=True):
        assert g.log_prob == pytest.approx(w.log_prob, abs=tol)
        assert g.score == pytest.approx(w.score, abs=tol)


def same_beams(got, want, tol: float = 1e-5) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        same_hypotheses(g, w, tol)


def test_buckets():
    assert [row_bucket(n) for n in (1, 2, 3, 5, 64, 65, 256, 257)] == [1, 2, 4, 8, 64, 128, 256, 512]
    assert [length_bucket(n) for n in (0, 1, 32, 33)] == [32, 32, 32, 64]


@pytest.mark.parametrize("kind", ["transformer", "transformer-pre"])
def test_step_equals_the_cached_decoder_step(kind):
    # The same tokens through both: the static step's log-probabilities (rules included) are
    # step_log_probs' over the model's own decode, at every position, with rows at their limit.
    model = make_model(kind)
    src = padded_source()
    state, first, limits = start_static(model, src, spacing=1, max_len_a=1.5, max_len_b=10)
    limits = torch.tensor([3, 20, 5, 20, 4, 20])
    state.caches.limits[:6] = limits
    eager = model.init_state(model.encode(src))
    step = StaticStep(model, min_len=2)
    tokens = first[:, 0]
    for t in range(5):
        got = state.step(step, tokens)
        want, _ = step_log_probs(model, tokens[:, None], eager, step=t, limits=limits, min_len=2)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        assert torch.equal(got.isinf(), want.isinf())
        tokens = random_tokens(6, 1, seed=10 + t)[:, 0]


def test_embedding_equals_the_models():
    model = make_model("transformer")
    tokens = random_tokens(4, 1)[:, 0]
    got = StaticStep(model).embed(tokens, torch.tensor([5]))
    torch.testing.assert_close(got, model.tgt_embed(tokens[:, None], 5), atol=0, rtol=0)


@pytest.mark.parametrize("kind", ["transformer", "transformer-pre"])
def test_greedy_equals_greedy_search(kind):
    model = make_model(kind)
    for src, min_len in ((padded_source(), 0), (padded_source(5, 4, seed=8), 3), (padded_source()[:1], 0)):
        same_hypotheses(
            greedy_search_static(model, src, min_len=min_len), greedy_search(model, src, min_len=min_len)
        )


@pytest.mark.parametrize(
    ("kind", "beam", "alpha"), [("transformer", 1, 0.0), ("transformer", 4, 0.6), ("transformer-pre", 5, 1.0)]
)
def test_beam_equals_beam_search(kind, beam, alpha):
    model = make_model(kind)
    src = padded_source()
    kwargs = dict(beam_size=beam, length_penalty_alpha=alpha, nbest=beam)
    same_beams(beam_search_static(model, src, **kwargs), beam_search(model, src, **kwargs))


def test_refuses_other_models_and_positions():
    with pytest.raises(TypeError, match="Transformer"):
        StaticDecoder(make_model("rnn"))
    with pytest.raises(ValueError, match="absolute positions"):
        StaticDecoder(make_model("transformer", positional="rotary"))
    with pytest.raises(ValueError, match="eval mode"):
        StaticDecoder(make_model("transformer").train())


def test_compiled_step_is_one_graph_for_every_position_and_sentence_of_a_bucket():
    model = make_model("transformer")
    counter = CompileCounter()
    decoder = StaticDecoder(model).compile(backend=counter)
    for seed in range(3):  # 5 and 6 sentences of up to 7 tokens: the same buckets (8 rows, 32, 32)
        src = padded_source(5 + seed % 2, 7, seed=seed)
        same_hypotheses(decoder.greedy(src), greedy_search(model, src))
    assert counter.frame_count == 1
    for seed in range(2):  # beam 4 of 6 sentences: 32 rows, one more graph; reorders add none
        src = padded_source(6, 6, seed=seed)
        same_beams(decoder.beam(src), beam_search(model, src))
    assert counter.frame_count == 2


def test_beams_rank_inside_one_graph_per_bucket():
    # The ranking and the beam moves are in the compiled beam step: one graph serves every position,
    # sentence and beam reorder of a bucket, the first step (one live row per sentence) included.
    model = make_model("transformer-pre")
    counter = CompileCounter()
    decoder = StaticDecoder(model).compile(backend=counter)
    for B in (3, 4, 3):  # 3 or 4 sentences x beam 4: 16 rows, 4 sentence places, one graph
        src = padded_source(B, 6, seed=B)
        same_beams(decoder.beam(src, nbest=4), beam_search(model, src, nbest=4))
    assert counter.frame_count == 1
    src = padded_source(3, 6, seed=7)  # beam 5: 16 rows hold 3 places and one spare row
    same_beams(decoder.beam(src, beam_size=5, nbest=2), beam_search(model, src, beam_size=5, nbest=2))
    assert counter.frame_count == 2
    same_beams(decoder.beam(src, beam_size=1), beam_search(model, src, beam_size=1))
    assert counter.frame_count == 3  # another beam size: another shape of the running scores


def test_inductor_beam_step_gives_the_same_beams():
    # Inductor, not only a tracer: the cache moves and writes of one graph must keep their order.
    model = make_model("transformer")
    decoder = StaticDecoder(model).compile()
    src = padded_source(3, 5)
    same_beams(decoder.beam(src, beam_size=3, nbest=3), beam_search(model, src, beam_size=3, nbest=3))


def test_more_buckets_than_dynamos_default_limit_of_eight_graphs():
    # Batches of 1 to 33 sentences and two source lengths: 12 buckets, one graph each, all served.
    model = make_model("transformer")
    counter = CompileCounter()
    decoder = StaticDecoder(model).compile(backend=counter)
    for B in (1, 2, 3, 5, 9, 17):
        for S in (5, 40):
            src = random_tokens(B, S, seed=B + S)
            same_hypotheses(decoder.greedy(src, max_len_b=4), greedy_search(model, src, max_len_b=4))
    assert counter.frame_count == 12


def test_aot_eager_graph_gives_the_same_searches():
    # A real graph: in-place cache writes go through functionalization and are written back.
    model = make_model("transformer-pre")
    decoder = StaticDecoder(model).compile(backend="aot_eager")
    src = padded_source()
    same_hypotheses(decoder.greedy(src), greedy_search(model, src))
    same_beams(decoder.beam(src, beam_size=2), beam_search(model, src, beam_size=2))


def test_kept_buffers_serve_batch_after_batch():
    # The CUDA-graph path's buffers (capture=False on the CPU): every batch of a bucket is copied into
    # the same caches, so nothing of one batch (its source, its limits, its keys) may leak into the next.
    model = make_model("transformer")
    decoder = StaticDecoder(model).cuda_graphs(capture=False)
    batches = [padded_source(6, 7, seed=s) for s in range(3)] + [padded_source(6, 5, seed=9)[:2]]
    for src in batches + batches[:1]:
        limit = 4 + src.size(0)  # different limits per batch, one length bucket
        same_hypotheses(decoder.greedy(src, max_len_b=limit), greedy_search(model, src, max_len_b=limit))
        same_beams(decoder.beam(src, beam_size=3), beam_search(model, src, beam_size=3))
    graphed = decoder.run
    # rows 8 (greedy of 6 sentences, and beam 3 of 2 sentences: one bucket), 32 (beam of 6), 2 (greedy of 2)
    assert len(graphed.buckets) == 3
    fresh = start_static(model, batches[0], spacing=1, max_len_a=1.5, max_len_b=10)[0].caches
    with pytest.raises(ValueError, match="adopt"):
        graphed(torch.zeros(8, dtype=torch.long), torch.tensor([0]), fresh)


def test_trained_model_gives_the_same_translations():
    from attnkit.checkpoint import load_checkpoint, model_from_checkpoint
    from attnkit.data.tokenizer import SubwordTokenizer
    from export_helpers import flickr_sentences, trained_checkpoint

    state = load_checkpoint(trained_checkpoint())
    model = model_from_checkpoint(state).eval()
    tok = SubwordTokenizer.from_state_dict(state["tokenizer"])
    ids = [tok.encode(s, side="src") for s in flickr_sentences(24)[0]]
    width = max(len(s) for s in ids)
    src = torch.tensor([s + [model.config.pad_id] * (width - len(s)) for s in ids])
    same_hypotheses(greedy_search_static(model, src), greedy_search(model, src))
    same_beams(beam_search_static(model, src, beam_size=4), beam_search(model, src, beam_size=4))


def test_kv_cache_contract():
    # SlotCache is a KVCache the attention layers accept, written at its position only.
    cache = SlotCache(torch.zeros(2, 1, 4, 3), torch.zeros(2, 1, 4, 3), torch.tensor([2]))
    assert isinstance(cache, KVCache)
    k, _ = cache.append(torch.ones(2, 1, 1, 3), torch.ones(2, 1, 1, 3))
    assert k[:, :, 2].eq(1).all() and k[:, :, [0, 1, 3]].eq(0).all()


def tiny_lm(**overrides):
    from attnkit.model import LMConfig, TransformerLM

    torch.manual_seed(0)
    return TransformerLM(LMConfig.preset("tiny", **overrides)).eval()


def eager_continuations(lm, prompt, limit, beam: int = 0, min_len: int = 0):
    """What the generator runs today: start_from_prompt, then greedy_decode or beam_decode."""
    from attnkit.decoding import beam_decode, greedy_decode
    from attnkit.tasks.language_model import start_from_prompt

    state, _ = start_from_prompt(lm, prompt)
    bos = torch.full((prompt.size(0), 1), lm.config.bos_id)
    last, limits = torch.cat([bos, prompt], dim=1), torch.full((prompt.size(0),), limit)
    if beam:
        return beam_decode(lm, state, last, limits, beam_size=beam, nbest=beam, min_len=min_len)
    return greedy_decode(lm, state, last, limits, min_len=min_len)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_language_model_continuations_equal_the_generators(norm):
    # Prompts of one length (the generator batches them so), the empty prompt included: the prompt's
    # keys and values are copied into the buffers and the step counts new tokens from its length.
    lm = tiny_lm(norm=norm)
    for P, limit, min_len in ((5, 12, 0), (0, 8, 0), (3, 9, 4)):
        prompt = random_tokens(3, P, seed=P + 1)
        decoder = StaticDecoder(lm, min_len=min_len)
        same_hypotheses(
            decoder.continue_greedy(prompt, limit), eager_continuations(lm, prompt, limit, min_len=min_len)
        )
        same_beams(
            decoder.continue_beam(prompt, limit, beam_size=3, nbest=3),
            eager_continuations(lm, prompt, limit, beam=3, min_len=min_len),
        )
    with pytest.raises(TypeError, match="language model"):
        decoder.greedy(random_tokens(2, 4))
    with pytest.raises(TypeError, match="language model"):
        StaticDecoder(make_model("transformer")).continue_greedy(random_tokens(2, 4), 5)


def test_a_compiled_lm_step_is_one_graph_for_every_prompt_length_of_a_bucket():
    lm = tiny_lm()
    counter = CompileCounter()
    decoder = StaticDecoder(lm).compile(backend=counter)
    for P in (2, 4, 7):  # 3 prompts, 4 rows, 32 positions: the position and the offset are tensors
        prompt = random_tokens(3, P, seed=P)
        same_hypotheses(decoder.continue_greedy(prompt, 10), eager_continuations(lm, prompt, 10))
    assert counter.frame_count == 1
    kept = StaticDecoder(lm).cuda_graphs(capture=False)  # the CUDA-graph path's buffers take LM caches too
    for P in (2, 4):
        prompt = random_tokens(3, P, seed=P)
        same_beams(kept.continue_beam(prompt, 10, nbest=4), eager_continuations(lm, prompt, 10, beam=4))
