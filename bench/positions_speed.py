"""CPU training speed of each positional kind (and precision), measured in one run with round-robin steps.

    PYTHONPATH=src python -m bench.positions_speed [--config configs/multi30k_de_en_tiny.yaml]
        [--data-dir /work/shared/data] [--kinds sinusoidal,learned,relative,relative+values,rotary]
        [--precisions fp32[,bf16]] [--steps 60] [--warmup 5] [--threads 2]
        [--out bench/results/positions_speed.json]

One run builds the config's training setup once (tokenizer, Multi30k batches), then one model per
positional kind and precision, all from the same seed, and times the trainer's own optimizer step
(``Trainer.train_step`` inside ``fast.fast_dropout``, as ``Trainer.run`` calls it: fused
label-smoothed loss, gradient clipping, fused Adam; bf16 = autocast, fp32 weights) on the same
batches. The rows take turns step by step, in a rotating order, so drift in the host's load hits
them alike. Reported: target tokens per second (tokens the loss is averaged over, what the trainer
logs) over the timed steps, the median step time, and the ratio to the first row.

``relative+values`` is Shaw et al.'s variant with a^V on the values: it needs the attention
weights, so it runs the reference attention path instead of the fused kernel.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from attnkit.checkpoint import build_model
from attnkit.denormals import flush_for_this_thread
from attnkit.fast import fast_dropout
from attnkit.model import count_parameters
from attnkit.train.build import build
from attnkit.train.config import load_config
from attnkit.train.trainer import Trainer

DEFAULT_KINDS = "sinusoidal,learned,relative,relative+values,rotary"


def model_fields(kind: str) -> dict:
    """A kind name of this script -> model config fields."""
    if kind == "relative+values":
        return dict(positional="relative", relative_values=True)
    return dict(positional=kind, relative_values=False)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/multi30k_de_en_tiny.yaml")
    ap.add_argument("--data-dir", default=os.environ.get("ATTNKIT_DATA", "/work/shared/data"))
    ap.add_argument("--kinds", default=DEFAULT_KINDS)
    ap.add_argument("--precisions", default="fp32", help="fp32, bf16 (autocast) or both, comma-separated")
    ap.add_argument("--steps", type=int, default=60, help="timed steps per kind")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per kind first")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--n-batches", type=int, default=20, help="training batches every kind cycles through")
    ap.add_argument("--out", default="bench/results/positions_speed.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    flush_for_this_thread()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    if not set(precisions) <= {"fp32", "bf16"}:
        ap.error(f"--precisions: fp32 and/or bf16, got {args.precisions!r}")
    names = [(kind, prec) for kind in kinds for prec in precisions]  # the rows, in the order given

    cfg = load_config(args.config, [f"data.data_dir={args.data_dir}", "train.device=cpu"])
    setup = build(cfg)  # tokenizer and batches once; the model built here is the config's own
    batches = [b for _, b in zip(range(args.n_batches), iter(setup.sampler))]
    trainers, params = {}, {}
    for kind, prec in names:
        fields = {**cfg.model, **model_fields(kind)}
        model_cfg = dataclasses.replace(cfg, model=fields).model_config(setup.tokenizer.vocabulary)
        torch.manual_seed(cfg.train.seed)
        model = build_model(cfg.arch, model_cfg.to_dict())
        t = cfg.train
        opt = torch.optim.Adam(model.parameters(), lr=t.lr, betas=(t.beta1, t.beta2), eps=t.eps, fused=True)
        run = dataclasses.replace(setup, model=model, optimizer=opt, precision=prec)
        trainers[kind, prec] = Trainer(run, log=lambda _: None)
        params[kind, prec] = count_parameters(model)

    times: dict[tuple, list[float]] = {k: [] for k in names}
    tokens: dict[tuple, int] = {k: 0 for k in names}
    with contextlib.ExitStack() as stack:
        for trainer in trainers.values():
            stack.enter_context(fast_dropout(trainer.model))  # as Trainer.run does for a whole run
        for step in range(args.warmup + args.steps):
            batch = batches[step % len(batches)]
            order = names[step % len(names) :] + names[: step % len(names)]  # rotate who goes first
            for name in order:
                t0 = time.perf_counter()
                _, _, n = trainers[name].train_step([batch])
                dt = time.perf_counter() - t0
                if step >= args.warmup:
                    times[name].append(dt)
                    tokens[name] += n

    base = tokens[names[0]] / sum(times[names[0]])
    rows = []
    for kind, prec in names:
        tok_s = tokens[kind, prec] / sum(times[kind, prec])
        rows.append(
            dict(
                kind=kind,
                precision=prec,
                tokens_per_s=round(tok_s, 1),
                median_step_ms=round(1000 * statistics.median(times[kind, prec]), 1),
                vs_first=round(tok_s / base, 3),
                parameters=params[kind, prec],
            )
        )
    result = dict(
        command="PYTHONPATH=src python -m bench.positions_speed " + " ".join(argv or []),
        config=args.config,
        model={k: v for k, v in cfg.model.items() if k != "positional"},
        steps=args.steps,
        warmup=args.warmup,
        batches=len(batches),
        max_tokens=cfg.train.max_tokens,
        threads=args.threads,
        torch=torch.__version__,
        machine=" ".join(filter(None, [platform.machine(), platform.processor(), f"{os.cpu_count()} CPUs"])),
        rows=rows,
    )
    first = " ".join(names[0])
    print(f"{'kind':<17}{'precision':>10}{'tgt tok/s':>10}{'median ms':>11}{'vs ' + first:>22}{'params':>11}")
    for r in rows:
        print(
            f"{r['kind']:<17}{r['precision']:>10}{r['tokens_per_s']:>10.0f}{r['median_step_ms']:>11.1f}"
            f"{r['vs_first']:>22.3f}{r['parameters']:>11,}"
        )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
