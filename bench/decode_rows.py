"""The cost of one beam-search step by batch size: why a server with few clients trails offline.

One decoding step (decoder, log-softmax, ranking, cache reorder) of a loaded model at t = 15
decoded positions, for B sentences x beam K rows, timed in CPU seconds (median of --repeats) with
one torch thread, packed linears as ``Translator`` uses them. A closed-loop server with C clients
decodes at most C * K rows per step; offline ``attnkit translate`` decodes ~800 (batches of 4,000
source tokens). The cost per row at C * K rows over the cost per row at 800 rows bounds the
server's throughput ratio at C clients, before any HTTP or batching overhead.

    python -m bench.decode_rows --checkpoint CKPT --out bench/results/decode_rows.json
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch

from attnkit.decoding.beam import rank_extensions
from attnkit.decoding.common import step_log_probs
from attnkit.fast import packed_linears
from attnkit.translate import Translator


def step_seconds(model, B: int, K: int, repeats: int) -> float:
    g = torch.Generator().manual_seed(B)
    V = model.config.tgt_vocab_size
    with torch.no_grad():
        state = model.init_state(model.encode(torch.randint(4, V, (B, 14), generator=g)))
        state.expand(K)
        model.decode(torch.randint(4, V, (B * K, 15), generator=g), state)  # t = 15
        last, limits = torch.randint(4, V, (B * K, 1), generator=g), torch.full((B * K,), 40)
        times = []
        for _ in range(repeats):
            st = copy.copy(state)
            st.self_kv = [copy.copy(kv) for kv in state.self_kv]  # every repeat from the same cache
            t = time.process_time()
            logp, _ = step_log_probs(model, last, st, step=3, limits=limits)
            st.reorder(rank_extensions(torch.zeros(B, K), logp, K, model.config.eos_id).origin)
            times.append(time.process_time() - t)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--sentences", default="1,4,16,64,200")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(1)
    model = Translator.from_checkpoint(args.checkpoint, device="cpu").model
    rows = []
    with packed_linears(model):
        step_seconds(model, 4, args.beam, 3)  # warm-up
        for B in (int(b) for b in args.sentences.split(",")):
            s = step_seconds(model, B, args.beam, args.repeats)
            rows.append(
                {
                    "sentences": B,
                    "rows": B * args.beam,
                    "step_ms": round(1000 * s, 3),
                    "us_per_row": round(1e6 * s / (B * args.beam), 1),
                }
            )
    largest = rows[-1]["us_per_row"]
    for r in rows:
        r["efficiency_vs_largest"] = round(largest / r["us_per_row"], 3)
        print(r, flush=True)
    if args.out:
        Path(args.out).write_text(
            json.dumps({"checkpoint": args.checkpoint, "beam": args.beam, "steps": rows}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
