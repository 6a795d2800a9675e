"""CPU time per sentence of an engine's ``translate`` on small batches against one call on them all.

A server decodes the few sentences its clients have in flight; offline decodes a whole file at once.
This times the same sentences both ways in one process, one thread, best of --repeats each:
``translate`` on chunks of --chunk sentences, then on all of them in one call. Engines: ``torch``
(``Translator``) and ``ctranslate2`` (``CT2Translator``, the checkpoint's cached export).

    python -m bench.engine_batches --checkpoint CKPT --engine ctranslate2 [--chunk 8] \
        [--sentences 1000] [--beam 4] [--repeats 3] [--out F]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
from pathlib import Path

import torch

from .serve_load import sentences, source_lang


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data-dir", default=os.environ.get("ATTNKIT_DATA", "../shared/data"))
    p.add_argument("--engine", choices=("torch", "ctranslate2"), default="ctranslate2")
    p.add_argument("--chunk", type=int, default=8, help="sentences per call in the small-batch run")
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", help="write the results here as JSON")
    args = p.parse_args()

    from attnkit.tasks.translation import Translator
    from attnkit.tasks.translation.ct2_engine import CT2Translator

    torch.set_num_threads(1)
    texts = sentences(Path(args.data_dir), args.sentences, source_lang(args.checkpoint, None))
    engine: Translator | CT2Translator
    if args.engine == "ctranslate2":
        engine = CT2Translator.from_checkpoint(args.checkpoint, device="cpu", threads=1)
    else:
        engine = Translator.from_checkpoint(args.checkpoint, device="cpu")
    engine.translate(texts[:16], beam=args.beam)  # warm-up
    runs: dict[str, list[float]] = {f"chunks of {args.chunk}": [], "one call": []}
    for _ in range(args.repeats):  # the two ways take turns: the host's drift hits both
        for name, size in ((f"chunks of {args.chunk}", args.chunk), ("one call", len(texts))):
            start = cpu_seconds()
            for i in range(0, len(texts), size):
                engine.translate(texts[i : i + size], beam=args.beam)
            runs[name].append(round(1000 * (cpu_seconds() - start) / len(texts), 3))
    best = {name: min(ms) for name, ms in runs.items()}
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible",
        "engine": args.engine,
        "sentences": len(texts),
        "cpu_ms_per_sentence": runs,
        "best": best,
        "small_over_one_call": round(best[f"chunks of {args.chunk}"] / best["one call"], 3),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
