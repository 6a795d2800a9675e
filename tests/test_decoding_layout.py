"""The fixed layout (attnkit.attention.layout): the model's own decode over buffers written in place
gives the growing caches' tokens and scores for every search and model with a decoder, and compiled
(attnkit.decoding.compiled) it is one graph per bucket of rows and lengths, however many batches."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from attnkit.attention import FixedLayout
from attnkit.attention.layout import length_bucket, row_bucket
from attnkit.decoding import Controls, beam_decode, beam_search, greedy_decode, greedy_search, sample_search
from attnkit.decoding.compiled import CompiledDecoding, refuse_on_cpu
from attnkit.errors import ConfigError
from attnkit.model import LMConfig, TransformerLM
from attnkit.model.captioner import CaptionTransformer
from attnkit.model.config import CaptionerConfig
from helpers import make_model, random_tokens


def padded_source(B: int = 6, S: int = 7, seed: int = 3) -> torch.Tensor:
    src = random_tokens(B, S, seed=seed)
    src[2, 3:] = 0  # one short sentence: padding in the source
    return src


def same(got, want, tol: float = 1e-5) -> None:
    """The same hypotheses (lists of hypotheses, or lists of n-best lists), scores within ``tol`` or
    a float32 sum's rounding (a few ulps of a score summed over 20 tokens: 1e-6 of it), whichever is
    wider: the two layouts add the same terms in another order, which the CPU kind decides."""
    flat = lambda hs: [h for x in hs for h in (x if isinstance(x, list) else [x])]  # noqa: E731
    got, want = flat(got), flat(want)
    assert [h.tokens for h in got] == [h.tokens for h in want]
    for g, w in zip(got, want, strict=True):
        assert g.score == pytest.approx(w.score, abs=tol, rel=1e-6)
        assert g.log_prob == pytest.approx(w.log_prob, abs=tol, rel=1e-6)


def test_buckets():
    assert [row_bucket(n) for n in (1, 2, 3, 5, 64, 65, 256, 257)] == [1, 2, 4, 8, 64, 128, 256, 512]
    assert [length_bucket(n) for n in (0, 1, 32, 33)] == [32, 32, 32, 64]


@pytest.mark.parametrize("kind", ["transformer", "transformer-pre", "learned"])
def test_every_search_over_the_fixed_layout_equals_the_growing_caches(kind):
    model = make_model("transformer", positional="learned") if kind == "learned" else make_model(kind)
    src = padded_source()
    same(greedy_search(model, src, layout=FixedLayout), greedy_search(model, src))
    for options in (dict(beam_size=4, nbest=2), dict(beam_size=3, length_penalty=1.0, min_len=3)):
        same(beam_search(model, src, layout=FixedLayout, **options), beam_search(model, src, **options))
    # controls, forced prefixes, attention outputs and sampling: the same step rules
    extra = dict(controls=Controls(2, 1.3), prefix=[[5, 6], [], [7], [], [], [8]])
    same(beam_search(model, src, layout=FixedLayout, **extra), beam_search(model, src, **extra))
    got = greedy_search(model, src, layout=FixedLayout, return_attention=True)
    want = greedy_search(model, src, return_attention=True)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.attention, w.attention, atol=1e-6, rtol=1e-5)  # the same (T + 1, S)
    sampled = sample_search(model, src, num_samples=3, seed=1, layout=FixedLayout)
    same(sampled, sample_search(model, src, num_samples=3, seed=1))


def test_an_empty_batch_and_joined_sentences():
    model = make_model("transformer")
    assert greedy_search(model, torch.zeros(0, 5, dtype=torch.long), layout=FixedLayout) == []
    state = model.init_state(model.encode(padded_source()), cache=FixedLayout(20))
    state.start = torch.zeros(6, dtype=torch.long)
    with pytest.raises(ValueError, match="no joins"):
        model.decode(torch.ones(6, 1, dtype=torch.long), state)


def test_rows_past_the_live_ones_are_never_read():
    # 5 sentences in a bucket of 8: the padding rows copy a real sentence and decode, unread; when
    # sentences finish the rows shrink to smaller buckets. Changing the padding changes nothing.
    model = make_model("transformer")
    src = padded_source(B=5)
    want = beam_search(model, src, beam_size=4)
    same(beam_search(model, src, beam_size=4, layout=FixedLayout), want)
    layout = FixedLayout(20)
    state = model.init_state(model.encode(src), cache=layout)
    assert state.src_mask.shape[0] == 8 and state.src_mask.shape[-1] == 32 and state.live == 5
    state.cross_kv = [(k.clone(), v.clone()) for k, v in state.cross_kv]
    for k, v in state.cross_kv:
        k[5:] = 1e4  # garbage in the padding sentences
        v[5:] = -1e4
    first = torch.full((5, 1), model.config.bos_id)
    limits = torch.full((5,), 20)
    garbage = beam_decode(model, state, first, limits, beam_size=4)
    clean = beam_decode(
        model, model.init_state(model.encode(src), cache=FixedLayout(20)), first, limits, beam_size=4
    )
    same(garbage, clean)


def test_a_language_model_continues_prompts_alike():
    torch.manual_seed(0)
    lm = TransformerLM(LMConfig.preset("tiny", vocab_size=20, max_len=48)).eval()
    prompt = random_tokens(3, 5, seed=2)
    bos = torch.full((3, 1), lm.config.bos_id)
    limits = torch.full((3,), 12)
    results = []
    for cache in (None, FixedLayout(5 + 12)):
        state = lm.init_state(3) if cache is None else lm.init_state(3, cache=cache)
        lm.decode(torch.cat([bos, prompt[:, :-1]], 1), state)  # the prompt in one call
        greedy = greedy_decode(lm, state, prompt[:, -1:], limits)
        results.append(greedy)
    same(results[1], results[0])
    beams = []
    for cache in (None, FixedLayout(5 + 12)):
        state = lm.init_state(3) if cache is None else lm.init_state(3, cache=cache)
        lm.decode(torch.cat([bos, prompt[:, :-1]], 1), state)
        beams.append(beam_decode(lm, state, prompt[:, -1:], limits, beam_size=3, nbest=2))
    same(beams[1], beams[0])


def test_the_captioner_decodes_alike():
    torch.manual_seed(0)
    model = CaptionTransformer(CaptionerConfig.preset("tiny")).eval()
    images = torch.rand(3, 3, 32, 32)
    first = torch.full((3, 1), model.config.bos_id)
    limits = torch.full((3,), 12)
    results = []
    for cache in (None, FixedLayout(12)):
        enc = model.encode(images)
        state = model.init_state(enc) if cache is None else model.init_state(enc, cache=cache)
        results.append(beam_decode(model, state, first, limits, beam_size=3))
    same(results[1], results[0])


@pytest.mark.parametrize("positional", ["relative", "rotary"])
def test_positions_counted_from_the_cache_are_refused_in_one_line(positional):
    model = make_model("transformer", positional=positional)
    with pytest.raises(ConfigError, match="sinusoidal or learned positions") as e:
        greedy_search(model, padded_source(), layout=FixedLayout)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="sinusoidal or learned"):
        CompiledDecoding(model)
    with pytest.raises(ConfigError, match="Transformer decoder"):
        CompiledDecoding(make_model("rnn"))


@pytest.mark.slow
def test_a_compiled_step_is_one_graph_per_bucket():
    model = make_model("transformer")
    counter = CompileCounter()
    heard: list[str] = []
    compiled = CompiledDecoding(model, backend=counter, announce=heard.append)
    src = padded_source()
    same(greedy_search(model, src, layout=compiled), greedy_search(model, src))
    same(beam_search(model, src, beam_size=4, layout=compiled), beam_search(model, src, beam_size=4))
    graphs = counter.frame_count
    # 8 rows (greedy, and beam's first step), 32 rows after expand, 16 once two sentences finish, ...
    assert 2 <= graphs <= 6
    assert sum(m.startswith("compiling the decoding step") for m in heard) == graphs
    assert sum(m.startswith("compiled the decoding step in") for m in heard) == graphs
    # Another batch of the same buckets (other sentences, other lengths within 32): no new graph,
    # and nothing announced.
    heard.clear()
    other = padded_source(seed=9, S=11)
    same(greedy_search(model, other, layout=compiled), greedy_search(model, other))
    same(beam_search(model, other, beam_size=4, layout=compiled), beam_search(model, other, beam_size=4))
    assert counter.frame_count == graphs and heard == []
    # A batch that fills its bucket exactly (no padding rows): the newest tokens are a column of the
    # beam's history, whose stride grows every step; still one graph per size.
    four = padded_source(B=4, seed=5)
    same(beam_search(model, four, beam_size=4, layout=compiled), beam_search(model, four, beam_size=4))
    assert counter.frame_count <= graphs + 4


@pytest.mark.slow
def test_inductor_gives_the_eager_tokens():
    model = make_model("transformer-pre")
    src = padded_source(B=3)
    compiled = CompiledDecoding(model)
    same(
        beam_search(model, src, beam_size=2, layout=compiled), beam_search(model, src, beam_size=2), tol=1e-4
    )


def test_a_compiler_failure_is_one_line():
    def no_compiler(gm, inputs):
        raise RuntimeError("no C++ compiler found\nand a long compiler log")

    compiled = CompiledDecoding(make_model("transformer"), backend=no_compiler)
    with pytest.raises(ConfigError, match="compiled decoding failed .*no C.. compiler") as e:
        greedy_search(make_model("transformer"), padded_source(), layout=compiled)
    assert "\n" not in str(e.value) and "without --compile" in str(e.value)


def test_a_cpu_is_refused_with_what_to_use():
    with pytest.raises(ConfigError, match="GPU only.*--engine ctranslate2") as e:
        refuse_on_cpu(torch.device("cpu"))
    assert "\n" not in str(e.value)
    refuse_on_cpu(torch.device("cuda"))  # a GPU is not refused (no device needed to say so)


def test_sizes_past_the_graph_limit_decode_eagerly(monkeypatch):
    # A long run meets more sizes than a compiled step may hold: the rest decode eagerly, announced
    # once, with the same results (never a failed run).
    import attnkit.decoding.compiled as compiled_module

    monkeypatch.setattr(compiled_module, "GRAPHS_PER_STEP", 1)
    model = make_model("transformer")
    counter, heard = CompileCounter(), []
    compiled = CompiledDecoding(model, backend=counter, announce=heard.append)
    src = padded_source()
    same(beam_search(model, src, beam_size=4, layout=compiled), beam_search(model, src, beam_size=4))
    assert counter.frame_count == 1 and compiled.full
    assert sum("further sizes decode eagerly" in m for m in heard) == 1


def test_static_buffers_are_kept_across_batches_and_moved_in_place():
    # What CUDA graphs need (the default on a GPU, forced here): one pair of buffers per layer and
    # size, kept from batch to batch at the same addresses, rows moved in place; the same results
    # and no new graph for a second batch of the same sizes.
    model = make_model("transformer")
    counter = CompileCounter()
    compiled = CompiledDecoding(model, backend=counter, static_buffers=True)
    assert compiled.pool is not None
    src = padded_source()
    for search, options in ((greedy_search, {}), (beam_search, {"beam_size": 4})):
        same(search(model, src, layout=compiled, **options), search(model, src, **options))
    graphs = counter.frame_count
    kept = {key: (k.data_ptr(), v.data_ptr()) for key, (k, v) in compiled.pool.buffers.items()}
    other = padded_source(seed=9, S=11)
    for search, options in ((greedy_search, {}), (beam_search, {"beam_size": 4})):
        same(search(model, other, layout=compiled, **options), search(model, other, **options))
    assert counter.frame_count == graphs
    assert {key: (k.data_ptr(), v.data_ptr()) for key, (k, v) in compiled.pool.buffers.items()} == kept
