"""
Self-attention by hand
======================

Seed 000 builds self-attention from nothing: a sentence of eight words, each a 16-number embedding
drawn under ``torch.manual_seed(123)``. This page runs the same steps with attnkit's functions and
prints the numbers the seed prints; a test checks them digit for digit.
"""

# %%
# The sentence and its embeddings
# -------------------------------
# "can you help me to translate this sentence", mapped to integers as the seed maps it, then looked
# up in an ``nn.Embedding(10, 16)``: one row of 16 numbers per word.
import torch

from attnkit.attention import attention_scores, basic_self_attention, scaled_dot_product_attention

words = "can you help me to translate this sentence".split()
sentence = torch.tensor([0, 7, 1, 2, 5, 6, 4, 3])
torch.manual_seed(123)
x = torch.nn.Embedding(10, 16)(sentence).detach()  # (T=8, d=16)
print("embeddings:", tuple(x.shape))

# %%
# Attention without parameters
# ----------------------------
# Each word's new vector is a weighted average of all the words: the weights are the softmax of its
# dot products with them, z_i = Σ_j softmax_j(x_i · x_j) x_j.
z, alpha = basic_self_attention(x)  # (8, 16), (8, 8)
print("basic_context_2:", " ".join(f"{v:.4f}" for v in z[1].tolist()))

# %%
# Queries, keys and values
# ------------------------
# Three matrices turn each embedding into a query, a key and a value. The score of word 2 for word 3,
# ω_23, is the dot product of word 2's query and word 3's key; dividing the scores by √d_k keeps the
# softmax from saturating.
torch.manual_seed(123)
d = x.shape[1]
U_query, U_key, U_value = torch.rand(d, d), torch.rand(d, d), torch.rand(d, d)
q, k, v = x @ U_query.T, x @ U_key.T, x @ U_value.T  # (8, 16) each: q_i = U_q x_i
omega = attention_scores(q, k)  # (8, 8)
print(f"omega_23: {omega[1, 2].item():.4f}")
print("omega_2:", " ".join(f"{w:.4f}" for w in omega[1].tolist()))  # word 2's scores for every word
context, weights = scaled_dot_product_attention(q, k, v)  # softmax(ω / √d_k) V
print("attention_weights_2:", " ".join(f"{w:.4e}" for w in weights[1].tolist()))
print("context_vector_2:", " ".join(f"{c:.4f}" for c in context[1].tolist()))

# %%
# Why divide by √d_k
# ------------------
# Seed 001's example: scores ten times larger push the softmax to one word, and its gradient, the
# largest entry of p_i (1 - p_i), collapses with it. A dot product of d_k unit-variance numbers has
# variance d_k; dividing by √d_k brings it back to 1.
s1 = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
p1, p2 = torch.softmax(s1, 0), torch.softmax(s1 * 10, 0)
print("softmax_s1:", " ".join(f"{v:.8e}" for v in p1.tolist()))
print("softmax_s2:", " ".join(f"{v:.8e}" for v in p2.tolist()))
print(f"max_gradient_s1: {(p1 * (1 - p1)).max().item():.4f}")
print(f"max_gradient_s2: {(p2 * (1 - p2)).max().item():.4e}")
g = torch.Generator().manual_seed(0)
qs, ks = torch.randn(10000, 512, generator=g), torch.randn(10000, 512, generator=g)
dots = (qs * ks).sum(dim=1)
print(
    f"d_k = 512: variance of q . k = {dots.var():.1f}, of q . k / sqrt(d_k) = {(dots / 512**0.5).var():.3f}"
)

# %%
# The weights as a picture
# ------------------------
# Row i is word i's attention over the sentence; every row sums to 1. attnkit draws it as it draws a
# trained model's attention.
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

from attnkit.plotting import plot_attention
from attnkit.show import show

workdir = tempfile.TemporaryDirectory()  # removed when the script ends
png = plot_attention(weights, words, words, Path(workdir.name) / "weights.png", title="softmax(QKᵀ/√d_k)")
plt.figure(figsize=(6, 6))
plt.imshow(plt.imread(png))
plt.axis("off")
show("tutorial_01_attention")  # a window, or headless a PNG in this folder
