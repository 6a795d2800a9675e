"""Resident memory of repeated batched translations of changing shapes (the serve soak's growth).

A server encodes a batch of a new shape (B sentences x S subwords) at nearly every call. Before
issue 11's fix, ``attnkit.fast.packed_linears`` also ran the encoder's linears through oneDNN,
which builds (and keeps, in its primitive cache) a primitive for every new row count B * S; the
process grew with every new shape while the Python heap stayed flat. ``--packing before`` puts that
rule back for the run; ``--packing after`` is the code as it is (decoding steps only).

    python -m bench.serve_memory --checkpoint CKPT --data-dir ../shared/data --packing after \\
        --seconds 150 --out bench/results/serve_memory_after.json
"""

from __future__ import annotations

import argparse
import json
import random
import time
import tracemalloc
from pathlib import Path

import torch
import torch.nn.functional as F

from attnkit import fast
from attnkit.translate import Translator

from .serve_load import ROOT, rss_mb, sentences


def _packed_forward_before(m):
    """The rule before the fix: every float32 input of two or more dimensions (encoder included)."""
    packed = torch.ops.mkldnn._reorder_linear_weight(m.weight.detach(), fast._TYPICAL_ROWS)

    def forward(x):
        if torch.is_grad_enabled() or x.dtype != torch.float32 or x.dim() < 2:
            return F.linear(x, m.weight, m.bias)
        return torch.ops.mkldnn._linear_pointwise(x, packed, m.bias, "none", [], "")

    return forward


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--packing", choices=["before", "after"], default="after")
    p.add_argument("--seconds", type=float, default=150)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.packing == "before":
        fast._packed_forward = _packed_forward_before
    translator = Translator.from_checkpoint(args.checkpoint, device="cpu")
    texts = sentences(Path(args.data_dir), 1000)
    rng = random.Random(0)
    tracemalloc.start()
    pid = __import__("os").getpid()
    samples = [(0.0, 0, round(rss_mb(pid), 1), 0.0)]
    start, calls, next_sample = time.perf_counter(), 0, 15.0
    while time.perf_counter() - start < args.seconds:
        translator.translate(rng.sample(texts, rng.randint(1, 16)), beam=args.beam)  # a new shape, mostly
        calls += 1
        if time.perf_counter() - start >= next_sample:
            heap = tracemalloc.get_traced_memory()[0] / 2**20
            samples.append(
                (round(time.perf_counter() - start, 1), calls, round(rss_mb(pid), 1), round(heap, 2))
            )
            print(dict(zip(("seconds", "calls", "rss_mb", "python_heap_mb"), samples[-1])), flush=True)
            next_sample += 15.0
    result = {
        "packing": args.packing,
        "calls": calls,
        "samples (seconds, calls, rss_mb, python_heap_mb)": samples,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
