"""The seeds' worked examples, run through attnkit's public API, with the positional-encoding figures.

    python examples/seed_walkthrough.py --out-dir seed_figures

Prints (seed 000) the basic self-attention context vector of word 2, omega_23, the scaled attention
weights and context vector of word 2, the key of word 2 in head 3 through attnkit's
MultiHeadAttention; (seed 001) the positional-encoding values of positions 0 and 1, and the
softmax-saturation example that motivates 1/sqrt(d_k); then draws the positional-encoding heatmap,
the "clock hands" of one frequency pair, and checks that PE(pos + k) is one fixed rotation of PE(pos).

Every printed vector is one line ``name: v1 v2 ...`` so that tests/test_seed_walkthrough.py can read
it back and compare it with the numbers printed in the seeds.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from attnkit.attention import (
    KVCache,
    MultiHeadAttention,
    attention_scores,
    basic_self_attention,
    scaled_dot_product_attention,
)
from attnkit.plotting import plot_positional_encoding
from attnkit.positional import sinusoidal_encoding

# "can you help me to translate this sentence", as seed 000 maps it to integers.
SENTENCE = torch.tensor([0, 7, 1, 2, 5, 6, 4, 3])


def show(name: str, values: torch.Tensor | float, fmt: str = "{:.4f}") -> None:
    """One line per value or vector: ``name: v1 v2 ...``."""
    flat = torch.as_tensor(values).flatten().tolist()
    print(f"{name}: " + " ".join(fmt.format(v) for v in flat))


def seed_embedding() -> torch.Tensor:
    """Seed 000, cell [7]: an nn.Embedding(10, 16) drawn under torch.manual_seed(123)."""
    torch.manual_seed(123)
    embed = torch.nn.Embedding(10, 16)
    return embed(SENTENCE).detach()  # (T=8, d=16)


def section_basic_self_attention(x: torch.Tensor) -> None:
    print("== seed 000: basic self-attention (no parameters): z_i = sum_j softmax_j(x_i . x_j) x_j")
    z, alpha = basic_self_attention(x)  # (8, 16), (8, 8)
    show("basic_context_2", z[1])
    show("basic_weights_row_sums", alpha.sum(dim=1))


def section_scaled_attention(x: torch.Tensor) -> None:
    print("== seed 000: scaled dot-product attention with U_q, U_k, U_v = torch.rand(d, d) under seed 123")
    torch.manual_seed(123)
    d = x.shape[1]
    U_query, U_key, U_value = torch.rand(d, d), torch.rand(d, d), torch.rand(d, d)
    # The seed writes q_i = U_q x_i for column vectors; for rows of X that is X U_q^T.
    q, k, v = x @ U_query.T, x @ U_key.T, x @ U_value.T  # (8, 16) each
    omega = attention_scores(q, k)  # (8, 8): omega_ij = q_i . k_j
    show("omega_23", omega[1, 2])
    show("omega_2", omega[1])
    context, weights = scaled_dot_product_attention(q, k, v)  # softmax(omega / sqrt(d_k)) V
    show("attention_weights_2", weights[1], "{:.4e}")
    show("context_vector_2", context[1])
    unscaled = torch.softmax(omega[1], dim=0)
    print(
        f"without 1/sqrt(d_k) word 2 puts {unscaled.max():.4f} of its attention on one word "
        f"(scaled: {weights[1].max():.4f})"
    )


def section_multihead_key(x: torch.Tensor) -> None:
    """Seed 000 cells [27]-[35]: 8 heads, each with its own 16 x 16 U_k, through MultiHeadAttention.

    attnkit's heads are Dh = D / H wide, so 8 heads of the seed's width 16 make a D = 128 model: the
    16-wide words are zero-padded to 128, and head h's block of W^K holds U_k_h in its first 16 columns.
    The keys come back in the self-attention cache, split into heads: (B, H, T, Dh).
    """
    print("== seed 000: multi-head attention, 8 heads of width 16 (U_k of head h = torch.rand(8, d, d)[h])")
    torch.manual_seed(123)
    T, d = x.shape
    H = 8
    torch.rand(d, d)  # one_U_query, drawn first in the seed
    torch.rand(H, d, d)  # multihead_U_query
    multihead_U_key = torch.rand(H, d, d)
    D = H * d
    mha = MultiHeadAttention(D, H, bias=False).eval()
    with torch.no_grad():
        w_key = torch.zeros(D, D)
        for h in range(H):
            w_key[h * d : (h + 1) * d, :d] = multihead_U_key[h]  # rows of head h: k_h = U_k_h x
        set_key_weight(mha, w_key)
        x_wide = torch.zeros(1, T, D)
        x_wide[0, :, :d] = x  # (1, T, D)
        cache = KVCache()
        mha(x_wide, x_wide, x_wide, cache=cache)
    keys = cache.k[0]  # (H, T, Dh)
    show("multihead_key_word2_head3", keys[2, 1])


def set_key_weight(mha: MultiHeadAttention, w_key: torch.Tensor) -> None:
    """Write W^K (D, D) into the attention's key projection."""
    D = mha.d_model
    if hasattr(mha, "kv_proj"):  # rows [W^K; W^V]
        mha.kv_proj.weight[:D] = w_key
    else:  # packed rows [W^Q; W^K; W^V]
        mha.in_proj.weight[D : 2 * D] = w_key


def section_positional(pe: torch.Tensor) -> None:
    print("== seed 001: sinusoidal positional encoding, d_model = 512, max_len = 128")
    show("pe_0_first4", pe[0, :4])
    show("pe_1_first4", pe[1, :4])
    show("pe_1_last2", pe[1, -2:])


def section_softmax_saturation() -> None:
    print("== seed 001: why 1/sqrt(d_k): scores ten times larger saturate the softmax")
    s1 = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    p1, p2 = torch.softmax(s1, 0), torch.softmax(s1 * 10, 0)
    show("softmax_s1", p1, "{:.8e}")
    show("softmax_s2", p2, "{:.8e}")
    # d softmax_i / d s_i = p_i (1 - p_i): the largest gradient entry collapses once saturated.
    show("max_gradient_s1", (p1 * (1 - p1)).max())
    show("max_gradient_s2", (p2 * (1 - p2)).max(), "{:.4e}")
    # q . k of unit-variance entries has variance d_k; dividing by sqrt(d_k) brings it back to 1.
    g = torch.Generator().manual_seed(0)
    d_k = 512
    q, k = torch.randn(10000, d_k, generator=g), torch.randn(10000, d_k, generator=g)
    dots = (q * k).sum(dim=1)
    print(
        f"d_k = {d_k}: variance of q . k = {dots.var():.1f}, "
        f"of q . k / sqrt(d_k) = {(dots / math.sqrt(d_k)).var():.3f}"
    )


def rotation_for_offset(k: int, d_model: int) -> torch.Tensor:
    """M_k (D, D) with PE(pos + k) = M_k PE(pos) for every pos: one 2x2 rotation per (sin, cos) pair.

    With w_i = 1 / 10000^(2i/D): sin(w(p+k)) = sin(wp) cos(wk) + cos(wp) sin(wk) and
    cos(w(p+k)) = cos(wp) cos(wk) - sin(wp) sin(wk); M_k depends on k only, never on pos.
    """
    w = 1.0 / torch.pow(10000.0, torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    c, s = torch.cos(w * k), torch.sin(w * k)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    idx = torch.arange(0, d_model, 2)
    m[idx, idx], m[idx, idx + 1] = c, s
    m[idx + 1, idx], m[idx + 1, idx + 1] = -s, c
    return m


def section_rotation(pe: torch.Tensor) -> None:
    print("== seed 001: PE(pos + k) is a fixed rotation of PE(pos) (a linear function, independent of pos)")
    for k in (1, 5, 20):
        m = rotation_for_offset(k, pe.shape[1]).float()
        predicted = pe[:-k] @ m.T  # (T - k, D): M_k applied to every PE(pos)
        err = (predicted - pe[k:]).abs().max().item()
        print(
            f"offset {k:>2}: max |M_k PE(pos) - PE(pos + k)| over all {pe.shape[0] - k} positions = {err:.2e}"
        )
        show(f"rotation_error_k{k}", err, "{:.2e}")


def draw_clock_hands(pe: torch.Tensor, out_path: Path, *, pair: int = 0, positions: int = 12) -> Path:
    """The (sin, cos) values of one frequency pair for positions 0.. as hands on a unit circle."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    t = torch.linspace(0, 2 * math.pi, 200)
    ax.plot(torch.cos(t), torch.sin(t), color="lightgray")
    colors = [(0.1, 0.3 + 0.6 * p / positions, 0.9 - 0.6 * p / positions) for p in range(positions)]
    for pos in range(positions):
        x, y = pe[pos, 2 * pair].item(), pe[pos, 2 * pair + 1].item()  # (sin, cos): hands turn clockwise
        ax.annotate("", xy=(x, y), xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=colors[pos]))
        ax.text(1.1 * x, 1.1 * y, str(pos), ha="center", va="center", fontsize=8)
    ax.set(xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal")
    ax.set_xlabel(f"PE(pos, {2 * pair}) = sin")
    ax.set_ylabel(f"PE(pos, {2 * pair + 1}) = cos")
    ax.set_title(f"Frequency pair {pair}: one clock hand per position")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=100)
    return out_path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out-dir", default="seed_figures", help="where the figures go (default seed_figures)"
    )
    args = parser.parse_args(argv)
    out = Path(args.out_dir)

    x = seed_embedding()
    section_basic_self_attention(x)
    section_scaled_attention(x)
    section_multihead_key(x)
    pe = sinusoidal_encoding(128, 512)
    section_positional(pe)
    section_softmax_saturation()
    section_rotation(pe)
    for path in (
        plot_positional_encoding(pe, out / "positional_heatmap_512.png"),
        plot_positional_encoding(sinusoidal_encoding(16, 32), out / "positional_heatmap_32.png"),
        draw_clock_hands(sinusoidal_encoding(16, 32), out / "positional_clock_pair0.png", pair=0),
        draw_clock_hands(sinusoidal_encoding(16, 32), out / "positional_clock_pair1.png", pair=1),
    ):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
