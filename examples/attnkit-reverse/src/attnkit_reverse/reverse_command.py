"""``attnkit reverse``: reverse sequences with a trained checkpoint, one per line."""

from __future__ import annotations

import sys

from attnkit.plugin.flags import device, read_input

NAME = "reverse"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="reverse letter sequences with a reversal model")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--text", help="one sequence (default: lines of stdin)")
    p.add_argument("--device", type=device, default="auto")


def run(args) -> None:
    from .reverser import Reverser

    texts = [args.text] if args.text is not None else read_input(None)
    for line in Reverser.from_checkpoint(args.checkpoint, device=args.device).reverse(texts):
        sys.stdout.write(line + "\n")
