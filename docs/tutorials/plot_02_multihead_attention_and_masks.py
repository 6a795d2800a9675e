"""
Multi-head attention and masks
==============================

The Transformer runs several attentions side by side, each on its own projection of the words (paper
section 3.2.2), and hides from each word what it may not see: padding, and in the decoder the words
that come after it. This page builds both with attnkit's :class:`~attnkit.attention.MultiHeadAttention`
and its one mask convention (True = may attend).
"""

# %%
# Seed 000's eight heads
# ----------------------
# The seed gives each of 8 heads its own 16 x 16 key matrix. attnkit's heads are d_model / H wide,
# so 8 heads of width 16 make a 128-wide layer: the words are zero-padded to 128 and head h's block of
# the key projection holds the seed's matrix. The key of word 2 in head 3 is the seed's number.
import torch

from attnkit.attention import KVCache, MultiHeadAttention

torch.manual_seed(123)
x = torch.nn.Embedding(10, 16)(torch.tensor([0, 7, 1, 2, 5, 6, 4, 3])).detach()  # (8, 16)
torch.manual_seed(123)
T, d, H = 8, 16, 8
torch.rand(d, d), torch.rand(H, d, d)  # the seed draws the query matrices first
keys_per_head = torch.rand(H, d, d)
mha = MultiHeadAttention(H * d, H, bias=False).eval()
with torch.no_grad():
    w_key = torch.zeros(H * d, H * d)
    for h in range(H):
        w_key[h * d : (h + 1) * d, :d] = keys_per_head[h]
    rows = mha.kv_proj.weight if hasattr(mha, "kv_proj") else mha.in_proj.weight[H * d :]
    rows[: H * d] = w_key  # the key rows of the projection
    wide = torch.zeros(1, T, H * d)
    wide[0, :, :d] = x
    cache = KVCache()
    mha(wide, wide, wide, cache=cache)
print("multihead_key_word2_head3:", " ".join(f"{v:.4f}" for v in cache.k[0, 2, 1].tolist()))

# %%
# Padding and look-ahead masks
# ----------------------------
# Sentences of different lengths share a batch by padding the short ones; a padding mask keeps every
# word from attending to the padding. In the decoder a causal mask also keeps word i from the words
# after it, so that training on a whole sentence at once (teacher forcing) teaches what decoding one
# word at a time will do.
import matplotlib.pyplot as plt

from attnkit.attention import causal_mask, combine_masks, padding_mask
from attnkit.show import show

tokens = torch.tensor([[5, 6, 7, 8, 0, 0]])  # one sentence of 4 words and 2 pads (pad id 0)
pad = padding_mask(tokens, pad_id=0)  # (1, 1, 1, 6): True = may attend
both = combine_masks(pad, causal_mask(6))  # (1, 1, 6, 6)
fig, axes = plt.subplots(1, 2, figsize=(8, 4), layout="constrained")
for ax, mask, title in zip(
    axes, (pad.expand(1, 1, 6, 6), both), ("padding", "padding + look-ahead"), strict=True
):
    shown = ax.imshow(mask[0, 0].int(), cmap="Blues", vmin=0, vmax=1)
    ax.set(title=title, xlabel="key position", ylabel="query position")
fig.colorbar(shown, ax=axes, ticks=[0, 1], shrink=0.8, label="1 = may attend, 0 = masked")
show("tutorial_02_masks")  # a window, or headless a PNG in this folder
print("may attend (padding + look-ahead), row 2:", both[0, 0, 2].int().tolist())
