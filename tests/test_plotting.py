"""Plotting: every figure is a readable PNG; bad inputs fail with a clear message."""

import math

import matplotlib
import matplotlib.image
import pytest
import torch

from attnkit import plotting
from attnkit.errors import DataError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _sinusoid(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))  # (D/2,)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe  # (max_len, D)


def _check_png(path, min_w=200, min_h=150):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    img = matplotlib.image.imread(path)  # (height, width, channels)
    assert img.shape[0] >= min_h and img.shape[1] >= min_w
    assert img.std() > 0  # not a blank canvas
    return img


def test_plotting_leaves_pyplot_alone(tmp_path):
    """A notebook's backend and open figures must survive attnkit's plots."""
    import matplotlib.pyplot as plt

    previous = matplotlib.get_backend()
    plt.switch_backend("svg")
    try:
        open_figures = plt.get_fignums()
        plotting.plot_positional_encoding(_sinusoid(8, 4), tmp_path / "pe.png")
        plotting.plot_attention(torch.rand(3, 3), list("abc"), list("xyz"), tmp_path / "a.png")
        assert matplotlib.get_backend() == "svg"
        assert plt.get_fignums() == open_figures
    finally:
        plt.switch_backend(previous)


def test_positional_encoding(tmp_path):
    out = plotting.plot_positional_encoding(_sinusoid(100, 64), tmp_path / "pe.png")
    img = _check_png(out)
    assert img.shape[:2] == (600, 1000)  # 10 x 6 inches at 100 dpi
    with pytest.raises(ValueError, match="max_len, d_model"):
        plotting.plot_positional_encoding(torch.zeros(3, 4, 5), tmp_path / "bad.png")


@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (4, 5, 7), (5, 7)])
def test_attention_grid_shapes(tmp_path, shape):
    w = torch.softmax(torch.randn(shape), dim=-1)
    src = ["▁Der", "▁Mann", "▁läuft", "▁über", "▁die", "▁Straße", "."]
    tgt = ["▁The", "▁man", "▁runs", "▁across", "."]
    out = plotting.plot_attention(w, src, tgt, tmp_path / "sub" / "attn.png", title="cross-attention")
    img = _check_png(out)
    if len(shape) == 4:  # 2 layers x 3 heads is bigger than a single map
        assert img.shape[1] > 600 and img.shape[0] > 400


def test_self_attention_same_tokens(tmp_path):
    toks = ["▁a", "▁b", "▁c", "</s>"]
    w = torch.softmax(torch.randn(1, 2, 4, 4), dim=-1)
    _check_png(plotting.plot_attention(w, toks, toks, tmp_path / "self.png"))


def test_attention_bad_shapes(tmp_path):
    with pytest.raises(ValueError, match=r"\(L, H, Tq, Tk\)"):
        plotting.plot_attention(torch.rand(7), ["a"], ["b"], tmp_path / "x.png")
    with pytest.raises(ValueError, match="5 queries x 7 keys"):
        plotting.plot_attention(torch.rand(5, 7), ["a"] * 6, ["b"] * 5, tmp_path / "x.png")


def test_learning_curve(tmp_path):
    csv_path = tmp_path / "metrics.csv"
    lines = ["step,train_loss,val_loss,val_bleu,lr,note"]
    for step in range(0, 1000, 50):
        val = f"{5 - step / 400:.3f},{step / 50:.1f}" if step % 200 == 0 else ","
        lines.append(f"{step},{6 - step / 300:.3f},{val},{1e-4 * step / 1000:.2e},warmup")
    csv_path.write_text("\n".join(lines) + "\n")
    _check_png(plotting.plot_learning_curve(csv_path, tmp_path / "curve.png"))
    # before the first validation there is no BLEU: still a figure
    csv_path.write_text("step,train_loss,val_loss,val_bleu\n10,5.0,,\n20,4.0,,\n")
    _check_png(plotting.plot_learning_curve(csv_path, tmp_path / "early.png"))


def test_learning_curve_bad_files(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("epoch,loss\n1,2\n")
    with pytest.raises(DataError, match="'step'"):
        plotting.plot_learning_curve(bad, tmp_path / "x.png")
    bad.write_text("step,train_loss\n1,2\n2,oops\n")
    with pytest.raises(DataError, match="line 3.*train_loss"):
        plotting.plot_learning_curve(bad, tmp_path / "x.png")
    with pytest.raises(DataError, match="cannot read"):
        plotting.plot_learning_curve(tmp_path / "missing.csv", tmp_path / "x.png")


def test_bleu_curves(tmp_path):
    curves = {
        "transformer-base": [(0, 0.0), (10, 12.5), (20, 25.1), (30, 31.0)],
        "rnn-attention": [(0, 0.0), (15, 8.0), (30, 18.4)],
    }
    _check_png(plotting.plot_bleu_curves(curves, tmp_path / "bleu.png"))
    with pytest.raises(ValueError, match="empty"):
        plotting.plot_bleu_curves({}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="'broken'"):
        plotting.plot_bleu_curves({"broken": [(1, 2, 3)]}, tmp_path / "x.png")
