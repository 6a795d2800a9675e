"""``Translator.compile()``, ``attnkit translate --compile`` and ``serve --compile``: the model's step
compiled gives the eager searches' translations for every option, a CPU is refused in one line with
what to use instead, and so are models the step cannot decode."""

from __future__ import annotations

import pytest
from torch._dynamo.testing import CompileCounter

from attnkit.decoding import SearchOptions
from attnkit.decoding.compiled import CompiledDecoding
from attnkit.errors import ConfigError
from attnkit.tasks.translation import Translator
from cli_helpers import SENTENCES, assert_user_error, cli_stdin

MORE = [*SENTENCES, "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.", "Ein Hund rennt."]


def compiled_on_cpu(path, backend) -> Translator:
    """What ``compile()`` makes on a GPU, here on the CPU (which ``compile()`` refuses)."""
    translator = Translator.from_checkpoint(path, device="cpu")
    translator.layout = CompiledDecoding(translator.model, backend=backend)
    return translator


def same_translations(got, want) -> None:
    assert [t.text for t in got] == [t.text for t in want]
    assert [t.tokens for t in got] == [t.tokens for t in want]
    for g, w in zip(got, want, strict=True):
        assert g.score == pytest.approx(w.score, abs=1e-5)
        assert [s for _, s in g.nbest] == pytest.approx([s for _, s in w.nbest], abs=1e-5)


@pytest.mark.slow
def test_compiled_translations_equal_the_eager_ones(runs):

    eager = Translator.from_checkpoint(runs.ckpt, device="cpu")
    counter = CompileCounter()
    compiled = compiled_on_cpu(runs.ckpt, counter)
    options = (
        dict(beam=4),
        dict(beam=4, nbest=3, length_penalty=1.0),
        dict(beam=1),
        dict(beam=4, no_repeat_ngram_size=2),
        dict(beam=4, min_length=3),
        dict(beam=2, prefix="A"),
        dict(beam=1, return_attention=True),
        dict(beam=1, nbest=2, sample=True, temperature=0.8, seed=3),
    )
    for kwargs in options:  # every option runs through the compiled step: one forward, one search
        got = compiled.translate(MORE, **kwargs)
        same_translations(got, eager.translate(MORE, **kwargs))
        if "return_attention" in kwargs:
            assert all(t.attention is not None for t in got)
        for sentence in MORE[:2]:  # one at a time, as an interactive user sends them
            same_translations(compiled.translate(sentence, **kwargs), eager.translate(sentence, **kwargs))
    frames = counter.frame_count
    assert frames > 0
    for kwargs in options[:3]:  # the same sizes again: nothing more to compile
        same_translations(compiled.translate(MORE[::-1], **kwargs), eager.translate(MORE[::-1], **kwargs))
    assert counter.frame_count == frames


def test_compile_refuses_what_it_cannot_decode_and_a_cpu(runs):
    with pytest.raises(ConfigError, match="one float Transformer"):
        Translator.from_checkpoint(runs.rnn_ckpt, device="cpu").compile()
    with pytest.raises(ConfigError, match="int8"):
        Translator.from_checkpoint(runs.ckpt, device="cpu", quantize="int8").compile()
    with pytest.raises(ConfigError, match="ensemble"):
        Translator.from_checkpoints([runs.ckpt, runs.ckpt], device="cpu").compile()
    with pytest.raises(ConfigError, match="GPU only.*--engine ctranslate2"):
        Translator.from_checkpoint(runs.ckpt, device="cpu").compile()


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (("--engine", "ctranslate2"), "--compile is for --engine torch"),
        (("--quantize", "int8"), "GPU only"),  # int8 is CPU only: the CPU refusal comes first
        ((), "--engine ctranslate2"),
    ],
)
def test_cli_compile_refusals_are_one_line(capsys, monkeypatch, runs, extra, fragment):
    code, _, err = cli_stdin(
        capsys, monkeypatch, b"Ein Hund.\n", "translate", "--checkpoint", runs.ckpt, "--compile", *extra
    )
    assert_user_error(code, err, fragment)


@pytest.mark.slow
def test_a_served_compiled_model_decodes_whole_batches(runs):
    # serve --compile on a GPU: requests decode as whole batches through the compiled step (joining
    # a running search needs growing caches), with the eager answers.
    from attnkit.plugin.http import Call
    from attnkit.serve.decoder import functions
    from attnkit.serve.tasks import load_models

    (served,) = load_models([str(runs.ckpt)], device="cpu")
    counter = CompileCounter()
    served.translator.layout = CompiledDecoding(served.translator.model, backend=counter)
    eager = Translator.from_checkpoint(runs.ckpt, device="cpu")
    for beam in (4, 1):
        call = Call.of(served.name, "translate", options=SearchOptions(beam=beam))
        batch_fn, start = functions(served, call, max_batch_tokens=4000)
        assert batch_fn is not None and start is None
        same_translations(batch_fn(MORE), eager.translate(MORE, beam=beam))
    assert counter.frame_count > 0


def test_serve_compile_refusals_are_one_line(capsys, runs):
    from cli_helpers import cli

    code, _, err = cli(capsys, "serve", "--checkpoint", runs.ckpt, "--compile", "--engine", "ctranslate2")
    assert_user_error(code, err, "--compile is for --engine torch")
    code, _, err = cli(capsys, "serve", "--checkpoint", runs.rnn_ckpt, "--compile", "--port", "1")
    assert_user_error(code, err, "--compile", "GPU only", "--engine ctranslate2")


@pytest.mark.slow
def test_a_compiled_language_model_and_captioner_give_the_eager_results():
    # generate --compile and caption --compile: the same decode dispatch, the same step compiled.
    import torch

    from attnkit.data.tokenizer import SubwordTokenizer
    from attnkit.model.captioner import CaptionTransformer
    from attnkit.model.config import CaptionerConfig
    from attnkit.tasks.captioning import Captioner
    from attnkit.tasks.language_model import LanguageModel
    from decoding_helpers import tiny_lm, tiny_tokenizer

    tok = tiny_tokenizer()
    lm, compiled_lm = (LanguageModel(tiny_lm(tok), tok, "cpu") for _ in range(2))
    counter = CompileCounter()
    compiled_lm.layout = CompiledDecoding(compiled_lm.model, backend=counter)
    for kwargs in (
        dict(max_new_tokens=8),
        dict(max_new_tokens=8, beam=3, num_samples=2, min_length=2),
        dict(max_new_tokens=8, sample=True, num_samples=2, seed=1, no_repeat_ngram_size=2),
    ):
        prompts = ["A dog", "Two men sit", ""]
        want = [[(g.text, round(g.score, 4)) for g in gens] for gens in lm.generate(prompts, **kwargs)]
        got = [
            [(g.text, round(g.score, 4)) for g in gens] for gens in compiled_lm.generate(prompts, **kwargs)
        ]
        assert got == want, kwargs
    assert counter.frame_count > 0
    captions = [f"a {c} {s}" for c in ("red", "blue", "green") for s in ("square", "circle", "triangle")]
    ctok = SubwordTokenizer.train(captions, captions, vocab_size=30, model_type="bpe")
    torch.manual_seed(0)
    model = CaptionTransformer(CaptionerConfig.preset("tiny", tgt_vocab_size=ctok.tgt_vocab_size))
    captioner = Captioner(model, ctok, "cpu")
    images = [torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8) for _ in range(3)]
    options = (
        dict(beam=1),
        dict(beam=3, nbest=2),
        dict(nbest=2, sample=True, seed=4),
        dict(beam=2, return_attention=True),
    )
    want = [captioner.caption(images, **kw) for kw in options]
    captioner.layout = CompiledDecoding(captioner.model, backend=CompileCounter())
    got = [captioner.caption(images, **kw) for kw in options]
    for g, w in zip(got, want, strict=True):
        assert [[t for t, _ in c.nbest] for c in g] == [[t for t, _ in c.nbest] for c in w]
    for g, w in zip(got[-1], want[-1], strict=True):  # (T + 1, regions): no padding positions
        torch.testing.assert_close(g.attention, w.attention, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "--prompt", "A"],
        ["caption", "--image", "x.png"],
        ["translate", "--input", "x.de"],
    ],
)
def test_compile_is_refused_on_a_cpu_before_anything_is_read(capsys, tmp_path, argv):
    from cli_helpers import cli

    command, *rest = argv
    missing = tmp_path / "missing.pt"
    code, _, err = cli(capsys, command, "--checkpoint", missing, *rest, "--compile", "--device", "cpu")
    assert_user_error(code, err, "--compile", "GPU only")
    assert "missing.pt" not in err
