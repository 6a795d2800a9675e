"""``attnkit train``: train (or resume) a model from a YAML config with key=value overrides."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import ConfigError

NAME = "train"


def add_parser(sub) -> None:
    p = sub.add_parser(
        NAME, help="train a model from a config file", description="Train (or resume) a model."
    )
    p.add_argument(
        "--config",
        required=True,
        help="YAML config file, or the name of a shipped one (attnkit configs lists them)",
    )
    p.add_argument("overrides", nargs="*", help="section.key=value overrides, e.g. train.max_steps=100")
    p.add_argument(
        "--data-dir",
        help="folder holding multi30k/ or wmt14_de_en/ (default: $ATTNKIT_DATA or ~/.cache/attnkit)",
    )
    p.add_argument("--output-dir", help="where checkpoints and metrics go (overrides output_dir)")
    p.add_argument("--resume", help="continue exactly from this checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a finished or stopped run in output_dir")


def run(args) -> None:
    from ..train import load_config, train

    # argv that was not UTF-8 arrives with lone surrogates, which the YAML config cannot hold
    named = [("--data-dir", args.data_dir), ("--output-dir", args.output_dir)]
    for name, text in [*named, *(("override", o) for o in args.overrides)]:
        try:
            (text or "").encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{name} {text!r} is not valid UTF-8 text") from None
    if _is_blank(args.config):
        raise ConfigError(
            f"{args.config} is empty; write at least one section (attnkit configs lists examples)"
        )
    overrides = list(args.overrides)
    if args.data_dir:
        # absolute: the checkpoint keeps it, and is read from other directories
        overrides.append(f"data.data_dir={Path(args.data_dir).expanduser().resolve()}")
    if args.output_dir:
        overrides.append(f"output_dir={args.output_dir}")
    cfg = load_config(args.config, overrides)
    result = train(cfg, resume=args.resume, overwrite=args.overwrite, log=lambda m: print(m, file=sys.stderr))
    if os.environ.get("RANK", "0") != "0":
        return  # under torchrun only rank 0 reports
    label = {"bleu": "BLEU"}.get(result.metric, result.metric)
    if result.best_checkpoint is None:  # e.g. resumed at max_steps into a new output_dir: nothing validated
        print(f"no best checkpoint in {result.output_dir}: this run validated nothing")
        return
    print(f"best checkpoint: {result.best_checkpoint} (valid {label} {result.best_score:.2f})")
    if result.averaged_checkpoint:
        print(f"averaged checkpoint: {result.averaged_checkpoint}")


def _is_blank(path: str) -> bool:
    """A config file of whitespace only: it would silently mean "every default" (the base model on
    all of Multi30k), which is never what an empty file was meant to say."""
    p = Path(path)
    return p.is_file() and p.stat().st_size < 1 << 16 and not p.read_bytes().strip()
