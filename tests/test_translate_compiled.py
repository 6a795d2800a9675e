"""``Translator.compile()`` and ``attnkit translate --compile``: the fixed-layout step compiled whole
gives the eager searches' translations, falls back to them for what it does not do, and refuses
models it cannot decode in one line."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from attnkit.decoding.continuous import BeamPool
from attnkit.errors import ConfigError
from attnkit.tasks.translation import TranslationStream, Translator
from cli_helpers import SENTENCES, assert_user_error, cli_stdin

MORE = [*SENTENCES, "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.", "Ein Hund rennt."]


def compile_with(backend):
    """``torch.compile`` through ``backend``, whatever Inductor options the caller passes."""
    original = torch.compile

    def compile(fn, *, fullgraph: bool = False, dynamic: bool | None = None, **_):
        return original(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend)

    return compile


def same_translations(got, want) -> None:
    assert [t.text for t in got] == [t.text for t in want]
    assert [t.tokens for t in got] == [t.tokens for t in want]
    for g, w in zip(got, want, strict=True):
        assert g.score == pytest.approx(w.score, abs=1e-5)
        assert [s for _, s in g.nbest] == pytest.approx([s for _, s in w.nbest], abs=1e-5)


def test_compiled_translations_equal_the_eager_ones(runs):
    eager = Translator.from_checkpoint(runs.ckpt, device="cpu")
    counter = CompileCounter()
    compiled = Translator.from_checkpoint(runs.ckpt, device="cpu").compile(backend=counter)
    for kwargs in (dict(beam=4), dict(beam=4, nbest=3, length_penalty=1.0), dict(beam=1)):
        same_translations(compiled.translate(MORE, **kwargs), eager.translate(MORE, **kwargs))
        for sentence in MORE[:2]:  # one at a time, as an interactive user sends them
            same_translations(compiled.translate(sentence, **kwargs), eager.translate(sentence, **kwargs))
    assert counter.frame_count > 0  # the compiled step ran
    # What the fixed-layout step does not do runs eagerly: no new graph, the eager results.
    frames = counter.frame_count
    for kwargs in (
        dict(beam=4, no_repeat_ngram_size=2),
        dict(beam=4, min_length=3),
        dict(beam=2, prefix="A"),
        dict(beam=1, return_attention=True),
    ):
        got = compiled.translate(MORE, **kwargs)
        same_translations(got, eager.translate(MORE, **kwargs))
        if "min_length" in kwargs:
            assert all(len(t.tokens) >= 3 for t in got)
        if "return_attention" in kwargs:
            assert all(t.attention is not None for t in got)
        if "prefix" in kwargs:
            assert all(t.text.startswith("A") for t in got)
        if "no_repeat_ngram_size" in kwargs:
            for t in got:
                bigrams = list(zip(t.tokens, t.tokens[1:]))
                assert len(bigrams) == len(set(bigrams))
    assert counter.frame_count == frames


def test_compile_refuses_what_the_step_cannot_decode(runs):
    with pytest.raises(ConfigError, match="Transformer with sinusoidal or learned positions"):
        Translator.from_checkpoint(runs.rnn_ckpt, device="cpu").compile()
    with pytest.raises(ConfigError, match="int8"):
        Translator.from_checkpoint(runs.ckpt, device="cpu", quantize="int8").compile()
    with pytest.raises(ConfigError, match="ensemble"):
        Translator.from_checkpoints([runs.ckpt, runs.ckpt], device="cpu").compile()


def test_cli_compile_streams_the_same_lines(capsys, monkeypatch, runs):
    # Inductor would compile for tens of seconds here: the same graphs through aot_eager.
    import attnkit.decoding.static as static

    monkeypatch.setattr(static.torch, "compile", compile_with("aot_eager"))
    data = "\n".join(MORE).encode() + b"\n"
    args = ("translate", "--checkpoint", runs.ckpt, "--device", "cpu", "--beam", "3")
    code, plain, err = cli_stdin(capsys, monkeypatch, data, *args)
    assert code == 0, err
    code, compiled, err = cli_stdin(capsys, monkeypatch, data, *args, "--compile")
    assert code == 0, err
    assert compiled == plain and len(plain.splitlines()) == len(MORE)


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [(("--engine", "ctranslate2"), "--compile is for --engine torch"), (("--quantize", "int8"), "int8")],
)
def test_cli_compile_refusals_are_one_line(capsys, monkeypatch, runs, extra, fragment):
    code, _, err = cli_stdin(
        capsys, monkeypatch, b"Ein Hund.\n", "translate", "--checkpoint", runs.ckpt, "--compile", *extra
    )
    assert_user_error(code, err, fragment)


def _stream_all(stream, requests):
    """Each request's texts join the running stream before a step; every result by request."""
    got, pending, n = {}, list(enumerate(requests)), 0
    while pending or len(stream):
        if pending:
            i, texts = pending.pop(0)
            stream.add([((i, j), t) for j, t in enumerate(texts)])
        got.update(stream.step())
        n += 1
        assert n < 1000
    return [[got[(i, j)] for j in range(len(texts))] for i, texts in enumerate(requests)]


def test_served_compiled_model_streams_without_recompiling(runs, monkeypatch):
    # attnkit serve --compile: beam requests join one running search through the compiled step
    # (continuous batching over its buffers); once a bucket's graph exists, joins, leaves and
    # later requests compile nothing more. Greedy requests decode as whole batches.
    import attnkit.decoding.static as static
    from attnkit.serve.decoder import Call, functions
    from attnkit.serve.tasks import load_models

    counter = CompileCounter()
    monkeypatch.setattr(static.torch, "compile", compile_with(counter))
    (served,) = load_models([str(runs.ckpt)], device="cpu", compile=True)
    eager = Translator.from_checkpoint(runs.ckpt, device="cpu")
    call = Call.of(served.name, "translate", beam=4, nbest=1, length_penalty=0.6)
    batch_fn, start = functions(served, call, max_batch_tokens=4000)
    assert batch_fn is None and start is not None  # continuous batching under --compile
    requests = [MORE[:3], MORE[3:], [MORE[1]], [MORE[4]], [MORE[4], MORE[2], MORE[0], MORE[1]]]
    for texts, got in zip(requests, _stream_all(start(), requests), strict=True):
        same_translations(got, eager.translate(texts, beam=4))
    frames = counter.frame_count
    assert frames >= 1
    again = [texts[::-1] for texts in requests]  # each in another order: the same buckets
    for texts, got in zip(again, _stream_all(start(), again), strict=True):
        same_translations(got, eager.translate(texts, beam=4))
    assert counter.frame_count == frames
    greedy = Call.of(served.name, "translate", beam=1, nbest=1, length_penalty=0.6)
    batch_fn, start = functions(served, greedy, max_batch_tokens=4000)
    assert batch_fn is not None and start is None
    same_translations(batch_fn(MORE), eager.translate(MORE, beam=1))
    frames = counter.frame_count  # the greedy step's graphs
    # What the compiled step does not do streams eagerly, with the eager answers, and no graph.
    for extra in (dict(min_length=3), dict(prefix="A")):
        options = dict(beam=4, nbest=1, length_penalty=0.6, **extra)
        _, start = functions(served, Call.of(served.name, "translate", **options), max_batch_tokens=4000)
        assert start is not None
        stream = start()
        assert isinstance(stream.pool, BeamPool)
        (got,) = _stream_all(stream, [MORE])
        same_translations(got, eager.translate(MORE, beam=4, **extra))
    assert counter.frame_count == frames


def test_a_compiler_failure_in_a_stream_is_one_line(runs, monkeypatch):
    import attnkit.decoding.static as static

    def no_compiler(gm, inputs):
        raise RuntimeError("no C++ compiler found\nand a long compiler log")

    monkeypatch.setattr(static.torch, "compile", compile_with(no_compiler))
    translator = Translator.from_checkpoint(runs.ckpt, device="cpu").compile()
    stream = TranslationStream.start(translator, beam=4)
    stream.add([("a", MORE[0])])
    with pytest.raises(ConfigError, match="compiled decoding failed .*no C.. compiler") as e:
        stream.step()
    assert "\n" not in str(e.value)


def test_serve_compile_refusals_are_one_line(capsys, runs):
    from cli_helpers import cli

    code, _, err = cli(capsys, "serve", "--checkpoint", runs.ckpt, "--compile", "--engine", "ctranslate2")
    assert_user_error(code, err, "--compile is for --engine torch")
    code, _, err = cli(capsys, "serve", "--checkpoint", runs.rnn_ckpt, "--compile", "--port", "1")
    assert_user_error(code, err, "--compile", "sinusoidal or learned positions")


def test_a_compiler_failure_is_one_line(runs, monkeypatch):
    import attnkit.decoding.static as static

    def no_compiler(gm, inputs):
        raise RuntimeError("no C++ compiler found\nand a long compiler log")

    monkeypatch.setattr(static.torch, "compile", compile_with(no_compiler))
    translator = Translator.from_checkpoint(runs.ckpt, device="cpu").compile()
    with pytest.raises(ConfigError, match="compiled decoding failed .*no C.. compiler") as e:
        translator.translate(MORE[:2], beam=4)
    assert "\n" not in str(e.value) and "without --compile" in str(e.value)
