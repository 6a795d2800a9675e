"""A generated captioning corpus that needs no download: two coloured shapes and where they sit.

Each image holds two objects (a colour and a shape each, never the same pair) in two cells of a
2 x 2 grid that share a row or a column, and its caption says so: "a red square above a blue
circle", "a green triangle right of a yellow circle" (the object named first is the one whose
colour comes first in red, green, blue, yellow). Every caption word is decided by the picture, so a
captioner can reach near-perfect captions, and each colour or shape word belongs to one object
whose box is known: where that word's attention should fall.

``make_shapes(out, ...)`` writes ``images/{split}_{i:05d}.png`` and, per split, ``{split}.tsv``
(``images/NAME.png<TAB>caption``, what ``data.corpus: tsv`` reads) and ``{split}.objects.jsonl``
(each image's objects, in caption order, with their pixel boxes). The same seed writes the same
bytes; each split draws from its own stream, so changing one split's size leaves the others alone.
The corpus is written beside ``out`` and swapped in when complete: a folder that is there already is
refused, or with ``overwrite`` replaced only then.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import ConfigError
from ...folders import check_new_folder, write_folder

COLOURS = {"red": (220, 40, 40), "green": (30, 160, 60), "blue": (40, 80, 230), "yellow": (235, 200, 30)}
SHAPES = ("square", "circle", "triangle")
RELATIONS = {(0, -1): "above", (0, 1): "below", (-1, 0): "left of", (1, 0): "right of"}
BACKGROUND = (255, 255, 255)
SPLITS = ("train", "valid", "test")
# what make-shapes and import-captions write: --overwrite replaces a folder holding only these
# What make-shapes and import-captions wrote in a folder from before they listed their files
# (folders.FILE_LIST): relative paths, as regular expressions. Anything else there is the user's.
CORPUS_FILES = (
    r"(train|valid|test)\.tsv",
    r"(train|valid|test)\.objects\.jsonl",
    r"images/(train|valid|test)_\d+\.(png|jpg)",
)


@dataclass(frozen=True)
class ShapeObject:
    colour: str
    shape: str
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 in pixels, inclusive


@dataclass(frozen=True)
class Scene:
    """One image's content: its objects in caption order, and the caption."""

    objects: tuple[ShapeObject, ShapeObject]
    relation: str

    @property
    def caption(self) -> str:
        a, b = self.objects
        return f"a {a.colour} {a.shape} {self.relation} a {b.colour} {b.shape}"


def draw_scene(rng: np.random.Generator, size: int):
    """A random scene and its RGB picture (a PIL image of ``size`` x ``size`` pixels).

    The caption names first the object whose colour comes first in ``COLOURS`` (for one colour,
    whose shape comes first in ``SHAPES``), so one picture has one caption; the relation says where
    that object sits from the other.
    """
    from PIL import Image, ImageDraw

    cell = size // 2
    # two neighbouring cells of the 2 x 2 grid, (column, row) each: one row or one column
    a = (int(rng.integers(2)), int(rng.integers(2)))
    b = (1 - a[0], a[1]) if rng.integers(2) else (a[0], 1 - a[1])
    kinds = [(c, s) for c in COLOURS for s in SHAPES]  # colour-major: the naming order
    k1, k2 = sorted(int(k) for k in rng.choice(len(kinds), size=2, replace=False))
    img = Image.new("RGB", (size, size), BACKGROUND)
    draw = ImageDraw.Draw(img)
    objects = []
    for (col, row), k in ((a, k1), (b, k2)):
        colour, shape = kinds[k]
        side = int(rng.integers(int(cell * 0.55), int(cell * 0.8) + 1))
        x0 = col * cell + int(rng.integers(0, cell - side + 1))
        y0 = row * cell + int(rng.integers(0, cell - side + 1))
        box = (x0, y0, x0 + side - 1, y0 + side - 1)
        fill = COLOURS[colour]
        if shape == "square":
            draw.rectangle(box, fill=fill)
        elif shape == "circle":
            draw.ellipse(box, fill=fill)
        else:
            draw.polygon([((box[0] + box[2]) / 2, box[1]), (box[0], box[3]), (box[2], box[3])], fill=fill)
        objects.append(ShapeObject(colour, shape, box))
    relation = RELATIONS[(a[0] - b[0], a[1] - b[1])]  # where the first-named object is from the other
    return Scene((objects[0], objects[1]), relation), img


def split_rng(seed: int, split: str) -> np.random.Generator:
    """The random stream of one split: its own, so the splits' sizes do not move each other."""
    return np.random.default_rng([seed, SPLITS.index(split)])


def make_shapes(
    out: str | Path,
    *,
    n_train: int = 3000,
    n_valid: int = 200,
    n_test: int = 200,
    size: int = 32,
    seed: int = 1,
    overwrite: bool = False,
) -> dict[str, Path]:
    """Write the corpus under ``out``; returns each split's TSV path.

    ``out`` must be absent or empty; with ``overwrite`` an earlier corpus there is replaced, once
    the new one is complete (it is written beside ``out``, then swapped in).
    """
    if size < 16:
        raise ConfigError(f"--size {size}: at least 16 pixels, or the shapes cannot be told apart")
    counts = {"train": n_train, "valid": n_valid, "test": n_test}
    for split, n in counts.items():
        if n < 0:
            raise ConfigError(f"--{split} {n}: a number of images must be >= 0")
    out, held = check_new_folder(out, overwrite=overwrite, owned=CORPUS_FILES, command="make-shapes")
    with write_folder(out, held, command="make-shapes") as tmp:
        (tmp / "images").mkdir()
        for split, n in counts.items():
            rng = split_rng(seed, split)
            lines, objects = [], []
            for i in range(n):
                scene, img = draw_scene(rng, size)
                name = f"images/{split}_{i:05d}.png"
                img.save(tmp / name, format="PNG")
                lines.append(f"{name}\t{scene.caption}\n")
                objects.append(
                    json.dumps(
                        {"image": name, "objects": [vars(o) | {"box": list(o.box)} for o in scene.objects]}
                    )
                    + "\n"
                )
            (tmp / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
            (tmp / f"{split}.objects.jsonl").write_text("".join(objects), encoding="utf-8")
    return {split: out / f"{split}.tsv" for split in counts}
