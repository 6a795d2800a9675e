"""``attnkit caption``: a caption for each image, with a captioner (greedy, beam or sampling).

One image prints its caption; several print ``PATH<TAB>caption`` lines, in order. ``--nbest N``
prints N ``PATH<TAB>score<TAB>caption`` lines per image: a search's best first, or, with ``--sample``
(shaped by ``--temperature``, ``--top-k``, ``--top-p``), N draws in the order drawn. A
file that is no image, too large an image or one of an unreadable pixel mode is a one-line error
(exit code 2), found before anything is decoded.
"""

from __future__ import annotations

import sys

from ..errors import ConfigError
from .common import (
    add_compile_flag,
    announcer,
    check_compile,
    device,
    finite_float,
    int_at_most,
    non_negative_int,
)
from .generate import add_sampling_flags, sampling_requested

NAME = "caption"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="caption images with a captioner (model.arch: captioner)")
    p.add_argument("--checkpoint", required=True, help="a captioner checkpoint")
    p.add_argument("--image", required=True, nargs="+", help="image file(s): PNG, JPEG, ...")
    p.add_argument("--beam", type=int_at_most(256), default=None, help="beam size; 1 = greedy (default 4)")
    p.add_argument(
        "--nbest",
        type=int_at_most(256),
        default=1,
        help="captions per image: a search's best first (at most the beam), or N samples as drawn",
    )
    p.add_argument("--length-penalty", type=finite_float, default=0.6, help="GNMT alpha (default 0.6)")
    p.add_argument(
        "--max-length", type=non_negative_int, default=0, help="pieces at most (default 0: the model's limit)"
    )
    add_sampling_flags(p)
    p.add_argument("--device", type=device, default="auto")
    add_compile_flag(p)


def run(args) -> None:
    from ..decoding import SearchOptions, check_nbest
    from ..tasks.captioning import Captioner

    sample = sampling_requested(args)
    check_compile(args)
    if sample and args.beam is not None:
        raise ConfigError("--beam is for beam search; --sample draws: choose one")
    beam = args.beam or 4
    if not sample:
        check_nbest(beam, args.nbest, name="--nbest", can_sample=True)
    captioner = Captioner.from_checkpoint(args.checkpoint, device=args.device)
    if args.compile:
        captioner.compile(announce=announcer(NAME))
    pixels = [captioner.read(path) for path in args.image]  # every image checked before decoding
    options = SearchOptions(
        beam=beam,
        nbest=args.nbest,
        length_penalty=args.length_penalty,
        sample=sample,
        temperature=args.temperature or 1.0,
        top_k=args.top_k or 0,
        top_p=args.top_p or 1.0,
        seed=args.seed,
    )
    found = captioner.caption(pixels, options, max_length=args.max_length)
    for path, c in zip(args.image, found):
        if args.nbest > 1:
            sys.stdout.write("".join(f"{path}\t{score:.4f}\t{text}\n" for text, score in c.nbest))
        elif len(args.image) == 1:
            sys.stdout.write(c.text + "\n")
        else:
            sys.stdout.write(f"{path}\t{c.text}\n")
