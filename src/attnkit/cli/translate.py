"""``attnkit translate``: stdin (or a file) to stdout (or a file), one translation per line."""

from __future__ import annotations

import sys

from ..errors import ConfigError
from .common import add_decoding_flags, positive_int, read_input
from .generate import add_sampling_flags, sampling_requested

NAME = "translate"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="translate text, stdin to stdout line by line")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", help="input file (default stdin)")
    p.add_argument("--output", help="output file (default stdout)")
    p.add_argument(
        "--nbest", type=positive_int, default=1, help="with N > 1: lines 'INDEX<TAB>SCORE<TAB>TEXT'"
    )
    add_decoding_flags(p)
    p.add_argument(
        "--sample",
        action="store_true",
        help="sample translations instead of searching (with --nbest N: N samples)",
    )
    add_sampling_flags(p)


def run(args) -> None:
    from ..decoding.sampling import SamplingConfig
    from ..translate import Translator

    if sampling_requested(args) and not args.sample:
        raise ConfigError("--temperature, --top-k and --top-p need --sample")
    sampling = None
    if args.sample:
        sampling = SamplingConfig(args.temperature or 1.0, args.top_k or 0, args.top_p or 1.0)
    translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    lines = read_input(args.input)
    results = translator.translate(
        lines, beam=max(args.beam, args.nbest), nbest=args.nbest, length_penalty=args.length_penalty,
        batch_tokens=args.batch_tokens, sampling=sampling, seed=args.seed,
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
