"""Profile attnkit's training step and beam-search step with torch.profiler (what to speed up).

    python -m bench.profile_train --steps 20

Run from the repository root. Builds the benchmark's reference model through the attnkit peer
adapter (bench/peers/attnkit.py: the same fast edges as bench.speed), times forward + loss +
backward + Adam on batches of 64 x 20 tokens, then beam-4 decoding of 64 sentences (30 tokens each),
and prints the top operators of each.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from attnkit.denormals import flush_for_this_thread

from . import peers
from .peers.common import BOS, EOS, PAD, VOCAB
from .timing import ADAM


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rows", type=int, default=15)
    args = ap.parse_args()
    torch.manual_seed(0)
    flush_for_this_thread()  # as bench.speed sets it: this process only computes
    adapter = peers.build("attnkit", VOCAB, PAD, BOS, EOS)
    opt = torch.optim.Adam(adapter.parameters(), **ADAM)
    src = torch.randint(3, VOCAB, (64, 20))  # (B, S)
    tgt = torch.randint(3, VOCAB, (64, 21))  # (B, T + 1)

    def step():
        opt.zero_grad(set_to_none=True)
        adapter.train_step_fn(src, tgt[:, :-1], tgt[:, 1:])
        opt.step()

    for _ in range(3):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    dt = (time.perf_counter() - t0) / args.steps
    print(f"train step: {dt * 1e3:.1f} ms, {64 * 20 / dt:,.0f} target tokens/s")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))

    t0 = time.perf_counter()
    adapter.decode_fn(src, beam_size=4, n_tokens=30)
    print(f"beam-4 decode of 64 sentences x 30 tokens: {time.perf_counter() - t0:.2f} s")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        adapter.decode_fn(src, beam_size=4, n_tokens=30)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
