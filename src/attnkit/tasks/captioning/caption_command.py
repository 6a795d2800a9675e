"""``attnkit caption``: a caption for each image, with a captioner (greedy, beam or sampling).

One image prints its caption; several print ``PATH<TAB>caption`` lines, in order. ``--nbest N``
prints N ``PATH<TAB>score<TAB>caption`` lines per image: a search's best first, or, with ``--sample``
(shaped by ``--temperature``, ``--top-k``, ``--top-p``), N draws in the order drawn. The search's
flags are translate's (:func:`.common.add_search_flags`), with a captioner's defaults
(``attnkit.tasks.captioning.captioner.SEARCH``). A file that is no image, too large an image or one
of an unreadable pixel mode is a one-line error (exit code 2), found before anything is decoded.
"""

from __future__ import annotations

import sys

from ...plugin.flags import (
    DEVICE_NAMES,
    add_compile_flag,
    add_search_flags,
    announcer,
    check_compile,
    device,
    search_options,
)

NAME = "caption"


def add_parser(sub) -> None:
    from . import SEARCH

    p = sub.add_parser(NAME, help="caption images with a captioner (model.arch: captioner)")
    p.add_argument("--checkpoint", required=True, help="a captioner checkpoint")
    p.add_argument("--image", required=True, nargs="+", help="image file(s): PNG, JPEG, ...")
    add_search_flags(p, SEARCH)
    p.add_argument("--device", type=device, default="auto", help=f"{DEVICE_NAMES} (default auto)")
    add_compile_flag(p)


def run(args) -> None:
    from . import Captioner

    options = search_options(args)  # every flag checked before the checkpoint is read
    check_compile(args)
    captioner = Captioner.from_checkpoint(args.checkpoint, device=args.device)
    if args.compile:
        captioner.compile(announce=announcer(NAME))
    pixels = [captioner.read(path) for path in args.image]  # every image checked before decoding
    found = captioner.caption(pixels, options)
    for path, c in zip(args.image, found):
        if options.nbest > 1:
            sys.stdout.write("".join(f"{path}\t{score:.4f}\t{text}\n" for text, score in c.nbest))
        elif len(args.image) == 1:
            sys.stdout.write(c.text + "\n")
        else:
            sys.stdout.write(f"{path}\t{c.text}\n")
