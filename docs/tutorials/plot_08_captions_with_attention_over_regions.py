"""
Captions with attention over image regions
==========================================

Seed 002's third example, "Show, Attend and Tell" with the Transformer's attention: an image is cut
into regions (8 x 8 patches here, as a Vision Transformer does), an encoder reads them, and the
decoder writes the caption word by word with cross-attention over the regions instead of over a
sentence. On generated pictures of two coloured shapes, each with a known box, we can check what
the seed's figures suggest: while writing a colour or a shape, the decoder looks at that object.
"""

# %%
# Pictures with known boxes, and the ordinary trainer
# ---------------------------------------------------
# ``make_shapes`` draws 32 x 32 pictures with captions such as "a red square above a blue circle"
# and keeps each object's box; the captioner trains through the same trainer as a translator.
import json
import tempfile
from pathlib import Path

import torch

from attnkit.tasks.captioning import Captioner, make_shapes, region_mass
from attnkit.train import load_config, train

torch.set_num_threads(1)
workdir = tempfile.TemporaryDirectory()  # the data and the run, removed when the script ends
root = Path(workdir.name)
make_shapes(root / "data", n_train=2000, n_valid=50, n_test=100, seed=1)
overrides = [
    "data.corpus=tsv",
    f"data.train_files=[{root}/data/train.tsv]",
    f"data.valid_files=[{root}/data/valid.tsv]",
    f"data.test_files=[{root}/data/test.tsv]",
    "tokenizer.vocab_size=80",
    "tokenizer.model_type=bpe",
    "model.arch=captioner",
    "model.preset=tiny",  # 32x32 images, 4-pixel patches: 64 regions; d_model 32
    "model.n_encoder_layers=1",
    "train.max_steps=600",
    "train.max_tokens=2048",  # 32 images of 64 regions
    "train.schedule=inverse_sqrt",
    "train.lr=0.005",
    "train.warmup_steps=50",
    "train.label_smoothing=0",
    "train.clip_norm=1.0",
    "train.progress=false",
    "valid.every=600",
    "valid.beam_size=1",
    "valid.keep_last=1",
    f"output_dir={root}/run",
]
result = train(load_config(None, overrides), log=lambda message: None)
captioner = Captioner.from_checkpoint(result.last_checkpoint, device="cpu")

# %%
# Where the colour and shape words look
# -------------------------------------
# For each test picture, the caption with every word's attention over the 64 regions (last layer,
# mean over heads). A colour or shape word that is right puts some mass on the regions over its
# object's box; looking everywhere alike would put there about the box's share of the picture.
rows = [json.loads(line) for line in (root / "data" / "test.objects.jsonl").read_text().splitlines()]
refs = [line.split("\t")[1].split() for line in (root / "data" / "test.tsv").read_text().splitlines()]
found = captioner.caption([root / "data" / r["image"] for r in rows], beam=1, return_attention=True)
grid, regions = captioner.model.grid, captioner.model.grid[0] * captioner.model.grid[1]
right = total = 0
mass, even = [], []
for row, ref, cap in zip(rows, refs, found, strict=True):
    words = cap.text.split()
    first, second = row["objects"]
    for i, obj in ((1, first), (2, first), (-2, second), (-1, second)):  # a COLOUR SHAPE ... a COLOUR SHAPE
        total += 1
        if len(words) >= 5 and words[i] == ref[i]:
            right += 1
            box = tuple(obj["box"])
            mass.append(region_mass(cap.attention[i % len(words)], box, grid, 32))
            even.append(region_mass(torch.full((regions,), 1 / regions), box, grid, 32))
print(f"colour_and_shape_words_right: {right / total:.3f}")
print(f"attention_on_the_object: {sum(mass) / len(mass):.3f}")
print(f"attention_if_even: {sum(even) / len(even):.3f}")

# %%
# One picture, one panel per word
# -------------------------------
# A small model after 600 steps: a word may be wrong and still look at the object it describes.
from attnkit.plotting import plot_caption_attention

image = captioner.read(root / "data" / rows[0]["image"])  # (C, S, S) the pixels the model read
plot_caption_attention(image, found[0].pieces, found[0].attention, grid, root / "caption.png")
import matplotlib.image
import matplotlib.pyplot as plt

from attnkit.show import show

plt.figure(figsize=(12, 2.5))
plt.imshow(matplotlib.image.imread(root / "caption.png"))
plt.axis("off")
show("tutorial_08_caption_attention")  # a window, or headless a PNG in this folder
