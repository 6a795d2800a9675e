"""Profile attnkit's training step and beam-search step with torch.profiler (what to speed up).

    python bench/profile_train.py --steps 20

Builds the benchmark model (d_model 256, 4 heads, FFN 1024, 3+3 layers, shared vocabulary 8000,
dropout 0.1, tied embeddings), times forward + backward + Adam on batches of 64 x 20 tokens, then
beam-4 decoding of 64 sentences, and prints the top operators of each.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from attnkit.decoding import beam_search
from attnkit.loss import label_smoothed_cross_entropy
from attnkit.model import Transformer, TransformerConfig

BENCH_MODEL = dict(
    d_model=256, n_heads=4, d_ff=1024, n_encoder_layers=3, n_decoder_layers=3, dropout=0.1,
    src_vocab_size=8000, tgt_vocab_size=8000, share_vocab=True, tie_output=True,
)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rows", type=int, default=15)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_flush_denormal(True)
    model = Transformer(TransformerConfig(**BENCH_MODEL))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    src = torch.randint(3, 8000, (64, 20))
    tgt = torch.randint(3, 8000, (64, 21))

    def step():
        out = label_smoothed_cross_entropy(model(src, tgt[:, :-1]), tgt[:, 1:])
        opt.zero_grad(set_to_none=True)
        (out.loss / out.n_tokens).backward()
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

    model.eval()
    t0 = time.perf_counter()
    beam_search(model, src, beam_size=4, max_len_a=0, max_len_b=30)
    print(f"beam-4 decode of 64 sentences: {time.perf_counter() - t0:.2f} s")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        beam_search(model, src, beam_size=4, max_len_a=0, max_len_b=30)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
