"""Where eager decoding spends its CPU: torch.profiler over one ``Translator.translate`` call.

    OMP_NUM_THREADS=1 python -m bench.profile_decode --checkpoint CKPT [--data-dir ../shared/data]
        [--sentences 300] [--beam 4] [--rows 18]

Prints the operators by self CPU time (the first test_2016_flickr sentences, one thread, after an
untimed call on 50 of them that packs the weights and warms the allocator).
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", default=str(ROOT / "runs" / "multi30k_de_en_tiny" / "checkpoint_best.pt"))
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--sentences", type=int, default=300)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--rows", type=int, default=18, help="operators shown")
    args = p.parse_args()
    from attnkit.tasks.translation import Translator

    torch.set_num_threads(1)
    translator = Translator.from_checkpoint(args.checkpoint, device="cpu")
    path = Path(args.data_dir) / "multi30k" / "test_2016_flickr.de.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        sources = [line.rstrip("\n") for line in f][: args.sentences]
    translator.translate(sources[:50], beam=args.beam)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        translator.translate(sources, beam=args.beam)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
