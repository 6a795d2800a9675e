"""``attnkit generate``: continue prompts with a language model (greedy, beam or sampling).

The search's flags are translate's and caption's (:func:`.common.add_search_flags`), with a language
model's defaults (``attnkit.tasks.language_model.generator.SEARCH``: greedy, 40 new tokens).
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
    read_input,
    search_options,
)

NAME = "generate"


def add_parser(sub) -> None:
    from . import SEARCH

    p = sub.add_parser(NAME, help="continue prompts with a language model")
    p.add_argument("--checkpoint", required=True, help="a language-model checkpoint (model.arch: lm)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="one prompt (may be empty: generate from nothing)")
    src.add_argument("--input", help="a file of prompts, one per line ('-' for stdin)")
    add_search_flags(p, SEARCH, aliases={"nbest": "--num-samples", "max_len_b": "--max-new-tokens"})
    p.add_argument("--device", type=device, default="auto", help=f"{DEVICE_NAMES} (default auto)")
    add_compile_flag(p)


def run(args) -> None:
    from . import LanguageModel

    options = search_options(args)  # every flag checked before the checkpoint is read
    check_compile(args)
    prompts = (
        [args.prompt] if args.prompt is not None else read_input(None if args.input == "-" else args.input)
    )
    lm = LanguageModel.from_checkpoint(args.checkpoint, device=args.device)
    if args.compile:
        lm.compile(announce=announcer(NAME))
    for i, gens in enumerate(lm.generate(prompts, options)):
        for g in gens:
            if len(prompts) == 1 and options.nbest == 1:
                sys.stdout.write(g.text + "\n")
            else:
                sys.stdout.write(f"{i}\t{g.score:.4f}\t{g.text}\n")
