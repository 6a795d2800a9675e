"""
Training a translator, and reading its attention
================================================

The whole path of a translator: sentence pairs in files, a subword vocabulary, the paper's
Transformer trained with its schedule and label smoothing, a search, BLEU, and the cross-attention
of what it wrote. Real data takes minutes (the README's main job trains on Multi30k for 2,000 steps);
here a small German-like language whose right alignment is known lets a tiny model learn in seconds:
"der hund hat den roten ball gesehen" is "the dog has seen the red ball", so the participle at the
end of the German must be read second, and the attention must cross to get it.
"""

# %%
# Pairs in files
# --------------
import random
import tempfile
from pathlib import Path

import torch

from attnkit.tasks.translation import Translator, attention_maps, evaluate
from attnkit.train import load_config, train

torch.set_num_threads(1)
SUBJECTS = {"der hund": "the dog", "die frau": "the woman", "der mann": "the man", "das kind": "the child"}
OBJECTS = {"den ball": "the ball", "die katze": "the cat", "das buch": "the book", "den apfel": "the apple"}
ADJECTIVES = {"": "", "roten": "red", "kleinen": "small", "alten": "old", "neuen": "new"}
VERBS = {"gesehen": "seen", "gekauft": "bought", "gefunden": "found", "gegessen": "eaten"}
PLACES = {"": "", "im park": "in the park", "zu hause": "at home"}


def pair(rng: random.Random) -> tuple[str, str]:
    """SUBJECT hat [ADJ] OBJECT [PLACE] PARTICIPLE -> SUBJECT has PARTICIPLE [ADJ] OBJECT [PLACE]."""
    (s, s_en), (o, o_en), (a, a_en), (v, v_en), (p, p_en) = (
        rng.choice(list(d.items())) for d in (SUBJECTS, OBJECTS, ADJECTIVES, VERBS, PLACES)
    )
    article, noun = o.split()
    src = " ".join(w for w in (s, "hat", article, a, noun, p, v) if w)
    article_en, noun_en = o_en.split()
    tgt = " ".join(w for w in (s_en, "has", v_en, article_en, a_en, noun_en, p_en) if w)
    return src, tgt


workdir = tempfile.TemporaryDirectory()  # the data and the run, removed when the script ends
root = Path(workdir.name)
rng = random.Random(0)
for split, n in (("train", 3000), ("valid", 50), ("test", 200)):
    lines = ["\t".join(pair(rng)) for _ in range(n)]
    (root / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
print((root / "train.tsv").read_text(encoding="utf-8").splitlines()[0])

# %%
# Train with the ordinary trainer
# -------------------------------
# The config keys are the ones of ``configs/*.yaml`` (docs: Reference, Configuration): here a tiny
# Transformer, one shared vocabulary of SentencePiece pieces, the paper's label smoothing of 0.1.
overrides = [
    "data.corpus=tsv",
    f"data.train_files=[{root}/train.tsv]",
    f"data.valid_files=[{root}/valid.tsv]",
    f"data.test_files=[{root}/test.tsv]",
    "tokenizer.vocab_size=120",
    "tokenizer.model_type=bpe",  # a small shared vocabulary: most words one piece, a few split
    "model.preset=tiny",
    "model.share_vocab=true",
    "model.dropout=0.0",
    "train.max_tokens=1500",
    "train.max_steps=400",
    "train.schedule=inverse_sqrt",
    "train.lr=0.003",
    "train.warmup_steps=50",
    "train.progress=false",
    "valid.every=400",
    "valid.keep_last=1",
    f"output_dir={root}/run",
]
result = train(load_config(None, overrides), log=lambda message: None)
translator = Translator.from_checkpoint(result.last_checkpoint, device="cpu")

# %%
# Translate and score
# -------------------
# Beam search of 4 on the 200 test pairs, scored by sacreBLEU as ``attnkit evaluate`` scores them.
test = [line.split("\t") for line in (root / "test.tsv").read_text(encoding="utf-8").splitlines()]
scores = evaluate(translator, [s for s, _ in test], [t for _, t in test], beam=4).scores
print(f"test_bleu: {scores.bleu:.2f}")
for text in ("die frau hat das alten buch zu hause gekauft", "das kind hat den apfel gegessen"):
    print(text, "->", translator.translate(text)[0].text)

# %%
# Reading the attention, in the domain and out of it
# --------------------------------------------------
# The last layer's cross-attention, averaged over the heads: which source piece each output piece
# read. In the domain it follows the alignment, participle first. Out of it (a word never seen, a
# sentence twice as long as any in training) the translation goes astray and so does the attention:
# the main job's model does the same with the seeds' sentence, far from Multi30k's captions.
import matplotlib.pyplot as plt

from attnkit.show import show

examples = {
    "in the domain": "der mann hat den kleinen ball im park gefunden",
    "an unseen word": "der mann hat den kleinen hut im park gefunden",
    "twice as long": "der hund hat die katze gesehen und die frau hat das buch gekauft",
}
fig, axes = plt.subplots(1, 3, figsize=(13, 4.5), layout="constrained")
for ax, (title, text) in zip(axes, examples.items(), strict=True):
    maps = attention_maps(translator, text, beam=4)
    cross = maps.cross[-1].mean(0)  # (T, S)
    shown = ax.imshow(cross, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(maps.src_pieces)), maps.src_pieces, rotation=90, fontsize=7)
    ax.set_yticks(range(len(maps.tgt_pieces)), maps.tgt_pieces, fontsize=7)
    ax.set_title(title, fontsize=10)
    print(f"{title}: {text} -> {translator.translate(text)[0].text}")
fig.supxlabel("German source pieces (the keys)", fontsize=9)
fig.supylabel("English output pieces (the queries)", fontsize=9)
fig.colorbar(shown, ax=axes, shrink=0.8, label="cross-attention weight, last layer, heads' mean")
show("tutorial_05_cross_attention")  # a window, or headless a PNG in this folder

# %%
# How sharply it reads
# --------------------
# The largest weight of each output piece's row, averaged: 1 is reading one source piece at a
# time, 1 / S is looking everywhere alike.
for title, text in examples.items():
    cross = attention_maps(translator, text, beam=4).cross[-1].mean(0)
    key = title.replace(" ", "_")
    print(f"sharpness_{key}: {cross.max(-1).values.mean().item():.3f}")
