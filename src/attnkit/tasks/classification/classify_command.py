"""``attnkit classify``: label each input line with a classifier, ``LABEL<TAB>PROBABILITY``."""

from __future__ import annotations

import sys

from ...plugin.flags import DEVICE_NAMES, device, positive_int, read_input

NAME = "classify"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="label text with a classifier, stdin to stdout line by line")
    p.add_argument("--checkpoint", required=True, help="a classifier checkpoint (model.arch: classifier)")
    p.add_argument("--input", help="input file (default stdin)")
    p.add_argument(
        "--top-k", type=positive_int, default=1, help="the K most probable labels per line, tab-separated"
    )
    p.add_argument("--device", type=device, default="auto", help=f"{DEVICE_NAMES} (default auto)")


def run(args) -> None:
    from . import Classifier

    clf = Classifier.from_checkpoint(args.checkpoint, device=args.device)
    lines = read_input(args.input)
    for ranked in clf.predict(lines, top_k=args.top_k):
        sys.stdout.write("\t".join(f"{label}\t{p:.4f}" for label, p in ranked) + "\n")
