"""``attnkit generate``: continue prompts with a language model (greedy, beam or sampling)."""

from __future__ import annotations

import argparse
import sys

from ..errors import ConfigError
from .common import (
    add_compile_flag,
    add_control_flags,
    announcer,
    check_compile,
    device,
    int_at_most,
    positive_float,
    positive_int,
    probability,
    read_input,
)

NAME = "generate"
MAX_BEAM = 256  # as translate's --beam: a beam's rows and candidates are allocated at once
MAX_SAMPLES = 1000  # continuations per prompt: each is kept until all are printed


def seed(text: str) -> int:
    """An argparse type: an integer torch can seed a generator with (-2**63 to 2**64 - 1)."""
    from ..decoding.sampling import SEED_RANGE

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not SEED_RANGE[0] <= value <= SEED_RANGE[1]:
        raise argparse.ArgumentTypeError(f"must be from -2**63 to 2**64 - 1, got {text!r}")
    return value


def add_sampling_flags(p: argparse.ArgumentParser) -> None:
    """--sample, --temperature, --top-k, --top-p, --seed: ``generate`` and ``caption`` (``translate``
    has them from SearchOptions, with the same rule: the shaping flags need --sample)."""
    p.add_argument(
        "--sample",
        action="store_true",
        help="sample instead of searching (--temperature, --top-k, --top-p, --seed shape the draws)",
    )
    p.add_argument(
        "--temperature", type=positive_float, default=None, help="sampling temperature (default 1)"
    )
    p.add_argument("--top-k", type=positive_int, default=None, help="sample among the K most probable tokens")
    p.add_argument("--top-p", type=probability, default=None, help="sample from the nucleus of mass P")
    p.add_argument(
        "--seed", type=seed, default=0, help="seed of the sampler (default 0): same seed, same samples"
    )


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="continue prompts with a language model")
    p.add_argument("--checkpoint", required=True, help="a language-model checkpoint (model.arch: lm)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="one prompt (may be empty: generate from nothing)")
    src.add_argument("--input", help="a file of prompts, one per line ('-' for stdin)")
    p.add_argument(
        "--max-new-tokens", type=positive_int, default=40, help="pieces to add at most (default 40)"
    )
    p.add_argument(
        "--beam",
        type=int_at_most(MAX_BEAM),
        default=None,
        help=f"beam search with K beams, at most {MAX_BEAM} (default: greedy search, 1; not with --sample)",
    )
    add_sampling_flags(p)
    p.add_argument(
        "--nbest",
        "--num-samples",
        dest="nbest",
        type=int_at_most(MAX_SAMPLES),
        default=1,
        help=f"continuations per prompt: the beam's best, or samples (default 1, at most {MAX_SAMPLES:,}; "
        "--num-samples is its name before)",
    )
    add_control_flags(p)
    p.add_argument("--device", type=device, default="auto")
    add_compile_flag(p)


def sampling_requested(args) -> bool:
    """--sample, checked as SearchOptions checks it: the shaping flags without it are an error."""
    shaping = [f for f in ("temperature", "top_k", "top_p") if getattr(args, f) is not None]
    if shaping and not args.sample:
        flags = ", ".join("--" + f.replace("_", "-") for f in shaping)
        raise ConfigError(f"{flags} shape sampling: ask for it with --sample")
    return bool(args.sample)


def run(args) -> None:
    from ..decoding import check_nbest
    from ..tasks.language_model import LanguageModel

    sample = sampling_requested(args)
    check_compile(args)
    if sample and args.beam is not None:
        raise ConfigError("--beam is for beam search; --sample draws: choose one")
    beam = args.beam or 1
    if not sample:
        check_nbest(beam, args.nbest, name="--nbest", can_sample=True)
    prompts = (
        [args.prompt] if args.prompt is not None else read_input(None if args.input == "-" else args.input)
    )
    lm = LanguageModel.from_checkpoint(args.checkpoint, device=args.device)
    if args.compile:
        lm.compile(announce=announcer(NAME))
    results = lm.generate(
        prompts,
        max_new_tokens=args.max_new_tokens,
        beam=beam,
        sample=sample,
        temperature=args.temperature or 1.0,
        top_k=args.top_k or 0,
        top_p=args.top_p or 1.0,
        nbest=args.nbest,
        seed=args.seed,
        min_length=args.min_length,
        no_repeat_ngram_size=args.no_repeat_ngram_size,
        repetition_penalty=args.repetition_penalty,
    )
    for i, gens in enumerate(results):
        for g in gens:
            if len(prompts) == 1 and args.nbest == 1:
                sys.stdout.write(g.text + "\n")
            else:
                sys.stdout.write(f"{i}\t{g.score:.4f}\t{g.text}\n")
