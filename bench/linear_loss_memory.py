"""Peak memory and time of the output layer + label-smoothed loss, forward and backward, at the
paper's base-model shapes: the plain path (the (N, V) logits whole) against
``attnkit.linear_loss`` (a chunk of tokens at a time). Each variant runs in its own process, so its
peak resident memory is its own.

    python -m bench.linear_loss_memory [--tokens 25000 --d-model 512 --vocab 37000 --chunk 4096]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def run_one(variant: str, tokens: int, d_model: int, vocab: int, chunk: int) -> dict:
    import torch
    import torch.nn.functional as F

    from attnkit.linear_loss import linear_label_smoothed_cross_entropy
    from attnkit.loss import label_smoothed_cross_entropy

    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(tokens, d_model, generator=g).requires_grad_()
    weight = (torch.randn(vocab, d_model, generator=g) * d_model**-0.5).requires_grad_()
    target = torch.randint(3, vocab, (tokens,), generator=g)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    t0 = time.perf_counter()
    if variant == "plain":
        out = label_smoothed_cross_entropy(F.linear(hidden, weight), target, epsilon=0.1, pad_id=0)
    else:
        out = linear_label_smoothed_cross_entropy(hidden, weight, target, epsilon=0.1, pad_id=0, chunk=chunk)
    (out.loss / out.n_tokens).backward()
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "variant": variant,
        "loss": out.loss.item() / out.n_tokens,
        "seconds": seconds,
        "peak_rss_mib": peak / 1024,
        "growth_mib": (peak - before) / 1024,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=25000)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--vocab", type=int, default=37000)
    p.add_argument("--chunk", type=int, default=4096)
    p.add_argument("--one", choices=["plain", "chunked"], help=argparse.SUPPRESS)
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.tokens, args.d_model, args.vocab, args.chunk)))
        return
    rows = []
    for variant in ("plain", "chunked"):
        cmd = [sys.executable, "-m", "bench.linear_loss_memory", "--one", variant]
        cmd += ["--tokens", str(args.tokens), "--d-model", str(args.d_model), "--vocab", str(args.vocab)]
        cmd += ["--chunk", str(args.chunk)]
        rows.append(json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout))
    print(f"N={args.tokens} D={args.d_model} V={args.vocab} chunk={args.chunk}")
    print("| variant | loss | seconds | peak RSS MiB | growth MiB |\n| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        cells = [r["variant"], f"{r['loss']:.6f}", f"{r['seconds']:.1f}"]
        cells += [f"{r['peak_rss_mib']:,.0f}", f"{r['growth_mib']:,.0f}"]
        print("| " + " | ".join(cells) + " |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
