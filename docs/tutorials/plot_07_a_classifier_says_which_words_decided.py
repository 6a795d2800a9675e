"""
A classifier that says which words decided
==========================================

The same blocks without a decoder: the encoder reads a sentence, a pooling turns its vectors into one,
and a linear layer scores the classes. With *attention pooling* (seed 002's hotel reviews; Bahdanau's
additive attention with a learned query) each word gets one weight, a = softmax(v^T tanh(W h + b)),
and the weights are read as which words the decision rests on. Here the answer is known: each
sentence is filler words plus one word of praise or of complaint, and its label is that word's. How
far do the weights point at it?
"""

# %%
# Sentences with one deciding word
# --------------------------------
import torch
import torch.nn.functional as F

from attnkit.model import ClassifierConfig, TransformerClassifier

torch.set_num_threads(1)
PAD, FIRST = 0, 3
GOOD = ["great", "clean", "friendly", "quiet"]
BAD = ["dirty", "rude", "noisy", "broken"]
FILLER = ["the", "room", "was", "staff", "and", "our", "stay", "very", "bed", "hotel", "view", "food"]
WORDS = GOOD + BAD + FILLER
ID = {w: FIRST + i for i, w in enumerate(WORDS)}


def sentences(n: int, g: torch.Generator):
    """n sentences of 4-9 filler words with one good or bad word at a random place; label 1 = good."""
    tokens, labels, where = [], [], []
    for _ in range(n):
        length = int(torch.randint(4, 10, (1,), generator=g))
        words = [FILLER[int(i)] for i in torch.randint(len(FILLER), (length,), generator=g)]
        good = bool(torch.randint(2, (1,), generator=g))
        pool = GOOD if good else BAD
        at = int(torch.randint(length + 1, (1,), generator=g))
        words.insert(at, pool[int(torch.randint(len(pool), (1,), generator=g))])
        tokens.append([ID[w] for w in words])
        labels.append(int(good))
        where.append(at)
    batch = torch.full((n, max(map(len, tokens))), PAD)
    for i, ids in enumerate(tokens):
        batch[i, : len(ids)] = torch.tensor(ids)
    return batch, torch.tensor(labels), torch.tensor(where)


# %%
# Train it
# --------
torch.manual_seed(0)
config = ClassifierConfig.preset(
    "tiny", vocab_size=FIRST + len(WORDS), n_layers=1, n_classes=2, pooling="attention", pad_id=PAD
)
model = TransformerClassifier(config)
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
g = torch.Generator().manual_seed(0)
for _ in range(150):
    tokens, labels, _ = sentences(64, g)
    loss = F.cross_entropy(model(tokens), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()

# %%
# Where the weight went
# ---------------------
# On 500 new sentences: how often the label is right, how much of the pooling weight falls on the
# deciding word (evenly spread it would be one word's share, about 1/7), and how often that word gets
# the largest weight.
tokens, labels, where = sentences(500, torch.Generator().manual_seed(1))
with torch.no_grad():
    out = model.classify(tokens)
accuracy = (out.logits.argmax(-1) == labels).float().mean().item()
assert out.token_weights is not None
on_word = out.token_weights.gather(1, where[:, None]).mean().item()
even = (1 / (tokens != PAD).sum(-1).float()).mean().item()
print(f"accuracy: {accuracy:.3f}")
print(f"weight_on_deciding_word: {on_word:.3f}")
top = (out.token_weights.argmax(-1) == where).float().mean().item()
print(f"weight_if_even: {even:.3f}")
print(f"deciding_word_weighted_most: {top:.3f}")

# %%
# The label is always right, yet the weights point at the deciding word in only part of the
# sentences: the encoder's self-attention has already carried that word's information into its
# neighbours' vectors, so the pooling can read it from several places. Attention weights are a hint
# about what a model used, not a proof (Jain and Wallace, 2019; Wiegreffe and Pinter, 2019): the
# pictures that follow are worth reading with that in mind.

# %%
# Three sentences, their weights drawn under their words:
import matplotlib.pyplot as plt

from attnkit.show import show

fig, axes = plt.subplots(3, 1, figsize=(8, 4), layout="constrained")
for ax, row in zip(axes, range(3), strict=True):
    n = int((tokens[row] != PAD).sum())
    words = [WORDS[int(t) - FIRST] for t in tokens[row, :n]]
    shown = ax.imshow(out.token_weights[row, :n][None], cmap="Blues", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(n), words)
    ax.set_yticks([])
    ax.set_title("good" if out.logits[row].argmax() == 1 else "bad", fontsize=9, loc="left")
fig.supxlabel("the review's words", fontsize=9)
fig.colorbar(shown, ax=axes, shrink=0.8, label="pooling weight")
show("tutorial_07_word_weights")  # a window, or headless a PNG in this folder
