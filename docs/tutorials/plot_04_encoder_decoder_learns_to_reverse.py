"""
The encoder-decoder, with attention old and new
===============================================

An encoder reads the source; a decoder writes the target one token at a time, looking back at the
source through attention. Before the Transformer, the encoder and decoder were recurrent networks and
the attention additive (Bahdanau et al., 2015); the Transformer keeps the encoder-decoder and attention
and drops the recurrence. Here both learn to reverse sequences of symbols, a task whose right answer
is known: output word i must look at source word n - i, so a model that learned it shows an
anti-diagonal in its cross-attention.
"""

# %%
# The task and one training loop for both models
# ----------------------------------------------
# Teacher forcing: the decoder reads the target shifted right (bos first) and learns to predict it,
# with the paper's label-smoothed cross entropy.
import torch

from attnkit.decoding import greedy_search
from attnkit.loss import label_smoothed_cross_entropy
from attnkit.model import RNNConfig, RNNSeq2Seq, Transformer, TransformerConfig

PAD, BOS, EOS, FIRST, VOCAB = 0, 1, 2, 3, 13
torch.set_num_threads(1)


def batch(size: int, g: torch.Generator, n_max: int = 8):
    """Random symbol sequences (right-padded) and their reversals: (source, decoder input, target)."""
    n = torch.randint(3, n_max + 1, (size,), generator=g)
    src, tgt = torch.full((size, n_max), PAD), torch.full((size, n_max + 1), PAD)
    for i, length in enumerate(n.tolist()):
        seq = torch.randint(FIRST, VOCAB, (length,), generator=g)
        src[i, :length], tgt[i, :length], tgt[i, length] = seq, seq.flip(0), EOS
    tgt_in = torch.cat([torch.full((size, 1), BOS), tgt[:, :-1].masked_fill(tgt[:, :-1] == EOS, PAD)], 1)
    return src, tgt_in, tgt


def train(model, steps: int, lr: float):
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    for _ in range(steps):
        src, tgt_in, tgt_out = batch(64, g)
        out = label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, epsilon=0.1, pad_id=PAD)
        opt.zero_grad()
        (out.loss / out.n_tokens).backward()
        opt.step()
    return model.eval()


def exact_match(model) -> float:
    src, _, tgt = batch(200, torch.Generator().manual_seed(123))
    hyps = [h.tokens for h in greedy_search(model, src, max_len_a=1.0, max_len_b=2)]
    refs = [[t for t in row.tolist() if t not in (PAD, EOS)] for row in tgt]
    return sum(h == r for h, r in zip(hyps, refs, strict=True)) / len(refs)


# %%
# The RNN with additive attention, and the Transformer
# ----------------------------------------------------
torch.manual_seed(0)
rnn = train(RNNSeq2Seq(RNNConfig.preset("tiny", src_vocab_size=VOCAB, tgt_vocab_size=VOCAB)), 600, 3e-3)
torch.manual_seed(0)
cfg = TransformerConfig.preset(
    "tiny", d_model=64, n_heads=4, d_ff=128, src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, share_vocab=True
)
transformer = train(Transformer(cfg), 750, 2e-3)
print(
    f"reversed exactly, greedy search: RNN {exact_match(rnn):.0%}, Transformer {exact_match(transformer):.0%}"
)

# %%
# Where each output word looks
# ----------------------------
# The decoder's attention over the source while it reverses one sequence: for the RNN its one
# additive attention, for the Transformer the last layer's cross-attention averaged over the heads.
import matplotlib.pyplot as plt

from attnkit.show import show

src = torch.tensor([[3, 4, 5, 6, 7, 8, 9, 10]])
fig, axes = plt.subplots(1, 2, figsize=(9, 4.5), layout="constrained")
for ax, (name, model) in zip(
    axes, (("RNN + additive attention", rnn), ("Transformer", transformer)), strict=True
):
    out = greedy_search(model, src, max_len_a=1.0, max_len_b=2)[0].tokens
    tgt_in = torch.tensor([[BOS, *out]])
    with torch.no_grad():
        state = model.init_state(model.encode(src))
        cross = model.decode(tgt_in, state, need_weights=True).cross_attn[-1]  # (1, H, T, S)
    shown = ax.imshow(cross[0].mean(0)[: len(out)], cmap="Blues", vmin=0, vmax=1)
    ax.set(title=name, xlabel="source position (key)", ylabel="output position (query)")
fig.colorbar(shown, ax=axes, shrink=0.8, label="attention weight, the heads' mean")
show("tutorial_04_cross_attention")  # a window, or headless a PNG in this folder
