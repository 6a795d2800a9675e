"""Training throughput of the paper's recipes: what docs/SCALING.md's hours are computed from.

    python -m bench.recipe_speed --config configs/wmt14_en_de_base.yaml [--device cuda] [--steps 10]

Builds the config's model with its real vocabulary size (the WMT14 shared BPE, ``--vocab 37000``) and
times full training steps (forward, the trainer's label-smoothed loss, backward, fused Adam) on
batches of ``train.max_tokens`` padded tokens: sentences of ``--len``
subwords on both sides, as a length-sorted batch of WMT14 looks. Precision as the config says
(bf16 autocast on a GPU). Reports target tokens per second per device and the hours the config's
``max_steps`` would take at ~25k target tokens a step on ``--gpus`` devices.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from attnkit.data.batching import collate
from attnkit.data.tokenizer import Vocabulary
from attnkit.fast import label_smoothed_cross_entropy
from attnkit.model.registry import ARCHS
from attnkit.train import load_config


def measure(config: str, device: str, steps: int, vocab: int, length: int) -> dict:
    cfg = load_config(config, [f"train.device={device}"])
    model_cfg = cfg.model_config(Vocabulary(vocab, vocab))
    torch.manual_seed(0)
    model = ARCHS[cfg.arch][0](model_cfg).to(device).train()
    optim = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    n = cfg.train.max_tokens // (length + 1)  # padded size: sentences x (length + bos/eos)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, vocab, (n, 2, length), generator=g).tolist()
    batch = collate([(s, t) for s, t in ids], pad_id=0, bos_id=1, eos_id=2).to(device)
    bf16 = cfg.train.precision == "bf16" or (cfg.train.precision == "auto" and device.startswith("cuda"))

    def step() -> None:
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
            out = label_smoothed_cross_entropy(logits, batch.tgt_out, epsilon=0.1, pad_id=0)
        (out.loss / batch.n_tgt_tokens).backward()
        optim.step()
        optim.zero_grad(set_to_none=True)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    step()  # warm-up: allocations, kernels
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    seconds = (time.perf_counter() - start) / steps
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    return {
        "config": config,
        "device": device,
        "params": params,
        "vocab": vocab,
        "sentences": n,
        "target_tokens_per_step": batch.n_tgt_tokens,
        "s_per_step": round(seconds, 3),
        "target_tokens_per_s": round(batch.n_tgt_tokens / seconds),
        "precision": "bf16" if bf16 else "fp32",
        "max_steps": cfg.train.max_steps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--vocab", type=int, default=37000)
    ap.add_argument("--len", type=int, default=27, help="subwords per sentence (WMT14 en-de averages ~27-30)")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for config in args.config:
        row = measure(config, args.device, args.steps, args.vocab, args.len)
        tokens = 25_000 * row["max_steps"]  # the paper's ~25k target tokens a step
        row["hours_on_gpus"] = round(tokens / (row["target_tokens_per_s"] * args.gpus) / 3600, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
