"""``attnkit translate``: stdin (or a file) to stdout (or a file), one translation per line."""

from __future__ import annotations

import sys

from .common import add_decoding_flags, int_at_most, read_input

NAME = "translate"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="translate text, stdin to stdout line by line")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", help="input file (default stdin)")
    p.add_argument("--output", help="output file (default stdout); written whole or not at all")
    p.add_argument(
        "--nbest", type=int_at_most(256), default=1,
        help="with N > 1 (at most 256): lines 'INDEX<TAB>SCORE<TAB>TEXT'",
    )  # fmt: skip
    add_decoding_flags(p)


def run(args) -> None:
    from ..files import atomic_write, check_output_path
    from ..translate import Translator

    if args.output:  # checked before the decoding, not after it
        check_output_path(args.output, what="--output")
    translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    lines = read_input(args.input)
    results = translator.translate(
        lines, beam=max(args.beam, args.nbest), nbest=args.nbest, length_penalty=args.length_penalty,
        batch_tokens=args.batch_tokens,
    )  # fmt: skip
    if args.output:
        with atomic_write(args.output) as out:
            _write(out, results, args.nbest)
    else:
        _write(sys.stdout, results, args.nbest)


def _write(out, results, nbest: int) -> None:
    for i, r in enumerate(results):
        if nbest == 1:
            out.write(r.text + "\n")
        else:
            # Exactly N lines per input, even where fewer hypotheses exist (an empty input has one).
            for k in range(nbest):
                text, score = r.nbest[min(k, len(r.nbest) - 1)]
                out.write(f"{i}\t{score:.4f}\t{text}\n")
