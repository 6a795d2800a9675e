"""``attnkit train``: train (or resume) a model from a YAML config with key=value overrides."""

from __future__ import annotations

import os
import sys

NAME = "train"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="train a model from a config file", description="Train (or resume) a model.")
    p.add_argument("--config", required=True, help="YAML config file (see configs/)")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides, e.g. train.max_steps=100")
    p.add_argument("--data-dir", help="folder holding multi30k/ (default: $ATTNKIT_DATA or ~/.cache/attnkit)")
    p.add_argument("--output-dir", help="where checkpoints and metrics go (overrides output_dir)")
    p.add_argument("--resume", help="continue exactly from this checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a finished or stopped run in output_dir")


def run(args) -> None:
    from ..train import load_config, train

    overrides = list(args.overrides)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    if args.output_dir:
        overrides.append(f"output_dir={args.output_dir}")
    cfg = load_config(args.config, overrides)
    result = train(cfg, resume=args.resume, overwrite=args.overwrite, log=lambda m: print(m, file=sys.stderr))
    if os.environ.get("RANK", "0") != "0":
        return  # under torchrun only rank 0 reports
    label = {"bleu": "BLEU"}.get(result.metric, result.metric)
    print(f"best checkpoint: {result.best_checkpoint} (valid {label} {result.best_score:.2f})")
    if result.averaged_checkpoint:
        print(f"averaged checkpoint: {result.averaged_checkpoint}")
