"""
Positional encodings
====================

Attention by itself does not know word order: shuffle the words and each one's output is shuffled
with them. The Transformer adds to each embedding a vector that depends on its position (paper section
3.5): sines and cosines of geometrically spaced frequencies. Seed 001 prints its first values.
"""

# %%
# The first values
# ----------------
import torch

from attnkit.positional import sinusoidal_encoding

pe = sinusoidal_encoding(128, 512)  # (positions, d_model)
print("pe_0_first4:", " ".join(f"{v:.4f}" for v in pe[0, :4].tolist()))
print("pe_1_first4:", " ".join(f"{v:.4f}" for v in pe[1, :4].tolist()))
print("pe_1_last2:", " ".join(f"{v:.4f}" for v in pe[1, -2:].tolist()))

# %%
# The whole table
# ---------------
# Low dimensions turn fast with the position, high ones slowly: every position gets its own pattern.
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

from attnkit.plotting import plot_positional_encoding
from attnkit.show import show

workdir = tempfile.TemporaryDirectory()  # removed when the script ends
png = plot_positional_encoding(pe, Path(workdir.name) / "pe.png")
plt.figure(figsize=(8, 5))
plt.imshow(plt.imread(png))
plt.axis("off")
show("tutorial_03_positions")  # a window, or headless a PNG in this folder

# %%
# Clock hands
# -----------
# The first (sin, cos) pair of a 32-wide encoding, position by position: one hand on a unit circle,
# turning by the same angle at every step.
import math

small = sinusoidal_encoding(16, 32)
plt.figure(figsize=(5, 5))
t = torch.linspace(0, 2 * math.pi, 200)
plt.plot(torch.cos(t), torch.sin(t), color="lightgray")
for pos in range(12):
    x, y = small[pos, 0].item(), small[pos, 1].item()
    plt.annotate(
        "",
        xy=(x, y),
        xytext=(0, 0),
        arrowprops={"arrowstyle": "->", "color": (0.1, 0.3 + pos / 20, 0.9 - pos / 20)},
    )
    plt.text(1.12 * x, 1.12 * y, str(pos), ha="center", va="center", fontsize=8)
plt.gca().set(
    xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal", xlabel="PE(pos, 0) = sin", ylabel="PE(pos, 1) = cos"
)
show("tutorial_03_clock_hands")  # a window, or headless a PNG in this folder


# %%
# Relative positions are a rotation
# ---------------------------------
# Each (sin, cos) pair is a clock hand turning at its own speed, so moving k positions on is the same
# rotation whatever the position: PE(pos + k) = M_k PE(pos). The paper chose sinusoids for this,
# hoping attention could use relative positions.
def rotation(k: int, d_model: int) -> torch.Tensor:
    w = 1.0 / torch.pow(10000.0, torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(w * k), torch.sin(w * k)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    i = torch.arange(0, d_model, 2)
    m[i, i], m[i, i + 1], m[i + 1, i], m[i + 1, i + 1] = c, s, -s, c
    return m


for k in (1, 5, 20):
    err = (pe[:-k].double() @ rotation(k, 512).T - pe[k:].double()).abs().max().item()
    print(f"rotation_error_k{k}: {err:.1e}")
