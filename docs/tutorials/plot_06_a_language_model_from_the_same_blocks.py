"""
A language model from the same blocks
=====================================

Drop the encoder and the cross-attention, keep the decoder's causal self-attention: a decoder-only
language model, trained to predict each next token from the ones before it (the look-ahead mask
hides the rest). Here it learns a language whose second half repeats its first: the first half is
unpredictable, the second is predictable only by looking back at the token it copies, so a model
that learned it shows that look-back in its attention.
"""

# %%
# Sequences that repeat themselves
# --------------------------------
import torch

from attnkit.loss import label_smoothed_cross_entropy
from attnkit.model import LMConfig, TransformerLM

torch.set_num_threads(1)
PAD, BOS, EOS, SEP, FIRST, VOCAB, HALF = 0, 1, 2, 3, 4, 20, 6


def sequences(n: int, g: torch.Generator) -> torch.Tensor:
    """(n, 2 * HALF + 2): bos, HALF random tokens, sep, the same HALF tokens again."""
    first = torch.randint(FIRST, VOCAB, (n, HALF), generator=g)
    return torch.cat([torch.full((n, 1), BOS), first, torch.full((n, 1), SEP), first], dim=1)


# %%
# Train it to predict the next token
# ----------------------------------
torch.manual_seed(0)
model = TransformerLM(LMConfig.preset("tiny", vocab_size=VOCAB, n_layers=2, max_len=32))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
g = torch.Generator().manual_seed(0)
for _ in range(600):
    seq = sequences(64, g)
    out = label_smoothed_cross_entropy(model(seq[:, :-1]), seq[:, 1:], epsilon=0.0, pad_id=PAD)
    opt.zero_grad()
    (out.loss / out.n_tokens).backward()
    opt.step()
model.eval()

# %%
# What it predicts, half by half
# ------------------------------
# Next-token accuracy over 500 new sequences: in the first half there is nothing to know (chance is
# one in 16), in the second everything is known from the first.
seq = sequences(500, torch.Generator().manual_seed(1))
with torch.no_grad():
    predicted = model(seq[:, :-1]).argmax(-1)  # (B, T - 1): the token predicted after each position
right = predicted == seq[:, 1:]
print(f"first_half_accuracy: {right[:, 1:HALF].float().mean().item():.3f}")
print(f"second_half_accuracy: {right[:, HALF + 1 :].float().mean().item():.3f}")

# %%
# Generating with the cache
# -------------------------
# A prompt goes through once; then each new token is one step that reads the keys and values the
# cache keeps from the steps before (greedy: the most probable token each time).
prompt = torch.tensor([[BOS, 9, 4, 17, 12, 5, 11, SEP]])
state = model.init_state(1)
with torch.no_grad():
    logits = model.decode(prompt, state).logits[:, -1]  # (1, V): after the whole prompt
    generated = []
    for _ in range(HALF):
        token = logits.argmax(-1, keepdim=True)  # (1, 1)
        generated.append(int(token))
        logits = model.decode(token, state).logits[:, -1]  # one step, the cache grows by one
print("prompt_tokens:", *prompt[0, 1 : HALF + 1].tolist())
print("generated_tokens:", *generated)

# %%
# Where each position looks
# -------------------------
# Every layer's and head's self-attention over one sequence: above the diagonal is the future,
# masked to zero. From the separator on, the token to predict sits HALF positions back (the one after
# the first copy of the current token): one head learns to look exactly there.
import matplotlib.pyplot as plt

from attnkit.show import show

with torch.no_grad():
    weights = model.decode(seq[:1, :-1], model.init_state(1), need_weights=True).self_attn
assert weights is not None
maps = torch.stack(weights)[:, 0]  # (L, H, T, T)
second = torch.arange(HALF + 1, 2 * HALF + 1)  # query positions from the separator on
look_back = maps[:, :, second, second - HALF].mean(-1)  # (L, H): each head's weight HALF back
layer, head = divmod(int(look_back.argmax()), maps.size(1))
print(f"look_back_weight_best_head: {look_back.max().item():.3f}")
print(f"look_back_weight_mean_head: {look_back.mean().item():.3f}")
fig, axes = plt.subplots(maps.size(0), maps.size(1), figsize=(10, 5), layout="constrained")
for (i, j), ax in zip(((i, j) for i in range(maps.size(0)) for j in range(maps.size(1))), axes.flat):
    shown = ax.imshow(maps[i, j], cmap="Blues", vmin=0, vmax=1)
    ax.set_title(f"layer {i + 1}, head {j + 1}" + (" *" if (i, j) == (layer, head) else ""), fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
fig.supxlabel("key: the earlier token attended to", fontsize=9)
fig.supylabel("query: the token attending", fontsize=9)
fig.colorbar(shown, ax=axes, shrink=0.8, label="attention weight")
show("tutorial_06_self_attention")  # a window, or headless a PNG in this folder
