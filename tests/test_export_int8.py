"""attnkit's own int8 decoding (``Translator(quantize="int8")``, ``attnkit translate --quantize int8``).

The BLEU change and the speed against CTranslate2 int8 are measured by bench/int8.py
(docs/BENCHMARKS.md); here: the int8 layers approximate the float ones, the quantized translator
mostly agrees with the float one on a trained model, and the flag's errors are one line.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnkit.cli import main
from attnkit.errors import ConfigError
from attnkit.quantize import Int8Linear, quantize_int8
from attnkit.tasks.translation import Translator
from export_helpers import flickr_sentences, trained_checkpoint


def test_int8_linear_is_close_to_the_float_layer():
    torch.manual_seed(0)
    layer = nn.Linear(64, 96)
    x = torch.randn(5, 7, 64)
    exact = layer(x)
    approx = Int8Linear.from_linear(layer)(x)
    assert approx.shape == exact.shape
    rel = (approx - exact).norm() / exact.norm()
    assert rel < 0.02, rel.item()


def test_quantized_copy_leaves_the_model_untouched():
    from attnkit.model import Transformer, TransformerConfig

    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset("tiny")).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    q = quantize_int8(model)
    assert not any(isinstance(m, nn.Linear) for m in q.modules())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    src, tgt = torch.randint(4, 20, (2, 6)), torch.randint(4, 20, (2, 5))
    with torch.no_grad(), torch.profiler.profile() as prof:
        approx = q(src, tgt)
    float_matmuls = {e.key for e in prof.key_averages()} & {
        "aten::linear",
        "aten::addmm",
        "mkldnn::_linear_pointwise",
    }
    assert not float_matmuls, f"linear layers left in float32: {float_matmuls}"  # the tied output included
    with torch.no_grad():
        exact = model(src, tgt)
    assert ((approx - exact).norm() / exact.norm()) < 0.05


def test_int8_translator_agrees_with_float32_on_a_trained_model():
    """Teacher-forced on 30 reference translations: the int8 model's most probable next token is the
    float32 model's at >= 95% of the positions, and both translate."""
    torch.set_num_threads(1)
    ckpt = trained_checkpoint()
    exact = Translator.from_checkpoint(ckpt, device="cpu")
    approx = Translator.from_checkpoint(ckpt, device="cpu", quantize="int8")
    tok = exact.tokenizer
    sources, references = flickr_sentences(30)
    src = _padded([tok.encode(s, side="src")[:64] for s in sources])
    tgt = _padded([[1, *tok.encode(r, side="tgt")[:62]] for r in references])
    with torch.no_grad():
        a, b = exact.model(src, tgt).argmax(-1), approx.model(src, tgt).argmax(-1)
    agree = (a == b)[tgt != 0].float().mean().item()
    assert agree >= 0.95, agree
    assert all(r.text for r in approx.translate(sources[:10], beam=4))


def _padded(seqs: list[list[int]]) -> torch.Tensor:
    out = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s)
    return out


def test_translate_command_takes_quantize_int8(tmp_path, capsys):
    ckpt = trained_checkpoint()
    src = tmp_path / "in.de"
    src.write_text("Zwei Hunde spielen im Schnee.\n")
    assert (
        main(
            [
                "translate",
                "--checkpoint",
                str(ckpt),
                "--input",
                str(src),
                "--quantize",
                "int8",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip()
    with pytest.raises(SystemExit) as e:
        main(["translate", "--checkpoint", str(ckpt), "--quantize", "int4"])
    assert e.value.code == 2


def test_quantize_errors_name_the_problem():
    ckpt = trained_checkpoint()
    with pytest.raises(ConfigError, match="unknown quantization"):
        Translator.from_checkpoint(ckpt, device="cpu", quantize="int4")
    if not torch.cuda.is_available():
        return
    with pytest.raises(ConfigError, match="CPU only"):
        Translator.from_checkpoint(ckpt, device="cuda", quantize="int8")
