"""``attnkit attention``: every attention of one input, drawn by the checkpoint's task
(``TaskInfo.attention``; ``TaskInfo.attention_flags`` says whether it reads ``--text`` or
``--image`` and whether it writes ``--html``).

Translation models: ``--out map.png`` draws PNG grids of cross-, encoder self- and decoder
self-attention; ``--html view.html`` writes the server's attention page as one self-contained file
with the data embedded (every layer and head, zoom, lines, words; no server).
Language models (``--out``): the causal self-attention of every layer and head over the text.
Classifiers (``--out``): the seeds' review picture (each word shaded by its pooling weight) as
OUT.html and OUT.png, and the encoder self-attention beside it.
Captioners (``--image``, ``--out``): seed 002's caption picture, the image with each word's
cross-attention over its regions (one panel per word), and OUT_heads.png with every layer and head;
``--html`` the server's page of it (every layer and head, a panel per word) with the image embedded.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import ConfigError
from .common import device, int_at_most

NAME = "attention"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="plot attention heatmaps for one sentence")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--text", help="the source sentence (or the text, for an LM or a classifier)")
    p.add_argument("--image", help="the image to caption (captioners)")
    p.add_argument(
        "--out",
        help="PNG for cross-attention (self-attention goes beside it); "
        "a classifier writes OUT.html and OUT.png",
    )
    p.add_argument(
        "--html",
        help="the interactive attention page as one static HTML file (translation models, captioners)",
    )
    p.add_argument("--beam", type=int_at_most(256), default=4)
    p.add_argument("--device", type=device, default="auto")


def run(args) -> None:
    from ..checkpoint import load_checkpoint
    from ..tasks import task_of, tasks

    state = load_checkpoint(args.checkpoint)
    task = task_of(state, args.checkpoint)
    if task.attention is None:
        raise ConfigError(f"{task.noun} has no attention to draw")
    if "--html" not in task.attention_flags and not args.out:
        takers = " and ".join(t.noun for t in tasks() if "--html" in t.attention_flags)
        raise ConfigError(f"{task.noun} needs --out (--html is for {takers})")
    needs, other = ("--image", "--text") if "--image" in task.attention_flags else ("--text", "--image")
    if getattr(args, needs[2:]) is None or getattr(args, other[2:]) is not None:
        raise ConfigError(f"{task.noun} needs {needs} (not {other})")
    module, _, function = task.attention.partition(":")
    getattr(importlib.import_module(module), function)(args, state)


def self_attention_path(out: Path, name: str) -> Path:
    return out.with_name(f"{out.stem}_{name}{out.suffix}")
