"""``attnkit translate``: stdin (or a file) to stdout (or a file), one translation per line."""

from __future__ import annotations

import sys

from .common import add_decoding_flags, positive_int, read_input

NAME = "translate"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="translate text, stdin to stdout line by line")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", help="input file (default stdin)")
    p.add_argument("--output", help="output file (default stdout)")
    p.add_argument(
        "--nbest", type=positive_int, default=1, help="with N > 1: lines 'INDEX<TAB>SCORE<TAB>TEXT'"
    )
    p.add_argument("--quantize", choices=("int8",), help="int8 weights for the linear layers (CPU only)")
    add_decoding_flags(p)


def run(args) -> None:
    from ..translate import Translator

    translator = Translator.from_checkpoint(args.checkpoint, device=args.device, quantize=args.quantize)
    lines = read_input(args.input)
    results = translator.translate(
        lines, beam=max(args.beam, args.nbest), nbest=args.nbest, length_penalty=args.length_penalty,
        batch_tokens=args.batch_tokens,
    )  # fmt: skip
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for i, r in enumerate(results):
            if args.nbest == 1:
                out.write(r.text + "\n")
            else:
                # Exactly N lines per input, even where fewer hypotheses exist (an empty input has one).
                for k in range(args.nbest):
                    text, score = r.nbest[min(k, len(r.nbest) - 1)]
                    out.write(f"{i}\t{score:.4f}\t{text}\n")
    finally:
        if args.output:
            out.close()
