"""``attnkit prepare``: tokenize a translation corpus once into memory-mapped arrays for training."""

from __future__ import annotations

import os
import sys
import time

from ..errors import ConfigError
from ..plugin.flags import int_at_most

NAME = "prepare"


def add_parser(sub) -> None:
    p = sub.add_parser(
        NAME,
        help="tokenize a translation corpus once into memory-mapped shards",
        description="Tokenize the config's corpora into a folder that `attnkit train` reads with "
        "data.prepared=FOLDER (no text is loaded or tokenized when the run starts).",
    )
    p.add_argument(
        "--config", required=True, help="the YAML config the run will train with (a file or a shipped name)"
    )
    p.add_argument(
        "overrides", nargs="*", help="section.key=value overrides, e.g. tokenizer.vocab_size=32000"
    )
    p.add_argument("--output", help="the folder to write (default: the config's data.prepared)")
    p.add_argument(
        "--workers",
        type=int_at_most(1024),
        default=min(8, os.cpu_count() or 1),
        help="encoding processes (at most this machine's cores)",
    )
    p.add_argument("--data-dir", help="folder holding multi30k/ or wmt14_de_en/ (as for attnkit train)")


def run(args) -> None:
    from ..data.prepare import prepare
    from ..plugin import task_for
    from ..plugin.training import takes_text_pairs
    from ..train import load_config

    cores = os.cpu_count() or 1
    if not 1 <= args.workers <= cores:  # more processes than cores only contend (and fork for long)
        raise ConfigError(f"--workers must be from 1 to this machine's {cores} cores, got {args.workers}")
    overrides = list(args.overrides) + ([f"data.data_dir={args.data_dir}"] if args.data_dir else [])
    cfg = load_config(args.config, overrides)
    task = task_for(cfg.task, cfg.arch)
    if not takes_text_pairs(task.load("training")):  # found now, not when training starts
        raise ConfigError(
            f"attnkit prepare writes token ids of text pairs; {task.noun} (model.arch {cfg.arch}) does not "
            "train from them: train it from its corpus"
        )
    output = args.output or cfg.data.prepared
    if not output:
        raise ConfigError("give --output FOLDER or set data.prepared in the config")
    start = time.monotonic()
    manifest = prepare(
        cfg, output, workers=args.workers, log=lambda m: print(m, file=sys.stderr), report=True
    )
    seconds = time.monotonic() - start
    train = manifest["splits"]["train"]
    dropped = ", ".join(f"{n:,} {why}" for why, n in train["dropped"].items() if why != "read" and n)
    print(
        f"prepared {train['pairs']:,} training pairs of {train['dropped']['read']:,} read"
        f"{f' (dropped {dropped})' if dropped else ''} into {output} in {seconds:.1f} s "
        f"({train['dropped']['read'] / max(seconds, 1e-9):,.0f} pairs/s); train with data.prepared={output}"
    )
