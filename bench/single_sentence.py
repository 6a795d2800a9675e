"""One sentence at a time, as an interactive user sends them: attnkit against CTranslate2, beam 4.

Each engine translates the first --sentences test_2016_flickr sentences one call each (text in,
text out, the same tokenizer), on one thread, after --warmup calls; it reports the median and 95th
percentile of wall-clock and process CPU milliseconds per sentence. Engines:

- ``attnkit``: ``Translator.translate([s], beam=4)``, what ``attnkit translate`` and the server's
  one-request path run (eager, packed decoding weights);
- ``attnkit-compiled``: the same call through the model's fixed-layout step compiled by
  ``torch.compile`` (attnkit.decoding.compiled; Inductor, ``cpp_wrapper``, ``freezing``), which
  ``--compile`` refuses on a CPU: measured here to show why (compiles once per bucket inside the
  warm-up, which is timed apart);
- ``ctranslate2``: ``CT2Translator.translate([s], beam=4)`` (``translate_batch`` of one sentence)
  on the checkpoint's CTranslate2 export, ``intra_threads=1``.

    OMP_NUM_THREADS=1 python -m bench.single_sentence --checkpoint CKPT [--data-dir ../shared/data]
        [--sentences 200] [--engines attnkit,attnkit-compiled,ctranslate2] [--out F]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .report import machine_info

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("attnkit", "attnkit-compiled", "ctranslate2")


def engine(name: str, checkpoint: str) -> Callable[[str], object]:
    from attnkit.decoding.compiled import CompiledDecoding
    from attnkit.tasks.translation import Translator

    translator = Translator.from_checkpoint(checkpoint, device="cpu")
    if name == "attnkit":
        return lambda text: translator.translate([text], beam=4)
    if name == "attnkit-compiled":
        # what --compile runs, on a CPU where the command line refuses it
        translator.layout = CompiledDecoding(
            translator.model, options={"cpp_wrapper": True, "freezing": True}
        )
        return lambda text: translator.translate([text], beam=4)
    from attnkit.tasks.translation.ct2_engine import CT2Translator

    ct2 = CT2Translator.from_checkpoint(checkpoint, device="cpu", threads=1, log=lambda message: None)
    return lambda text: ct2.translate([text], beam=4)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "runs" / "multi30k_de_en_tiny" / "checkpoint_best.pt"))
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--sentences", type=int, default=200)
    ap.add_argument(
        "--warmup",
        type=int,
        default=20,
        help="calls before timing (the compiled engine: every sentence once)",
    )
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    names = args.engines.split(",")
    if unknown := set(names) - set(ENGINES):
        ap.error(f"unknown engine(s) {', '.join(sorted(unknown))}; choose from {', '.join(ENGINES)}")
    torch.set_num_threads(1)
    path = Path(args.data_dir) / "multi30k" / "test_2016_flickr.de.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f][: args.sentences]
    results: dict = {
        "checkpoint": args.checkpoint,
        "sentences": len(sentences),
        "environment": machine_info("cpu"),
        "load_before": os.getloadavg()[0],
        "rows": [],
    }
    for name in names:
        translate = engine(name, args.checkpoint)
        warm = sentences if name == "attnkit-compiled" else sentences[: args.warmup]
        t0 = time.perf_counter()
        for text in warm:  # the compiled engine compiles here, once per bucket its sentences need
            translate(text)
        warmup_s = time.perf_counter() - t0
        wall, cpu = [], []
        for text in sentences:
            w, c = time.perf_counter(), time.process_time()
            translate(text)
            wall.append((time.perf_counter() - w) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        row = {
            "engine": name,
            "wall_p50_ms": statistics.median(wall),
            "wall_p95_ms": percentile(wall, 0.95),
            "cpu_p50_ms": statistics.median(cpu),
            "cpu_p95_ms": percentile(cpu, 0.95),
            "warmup_s": warmup_s,
        }
        results["rows"].append(row)
        print(
            f"{name:17s} wall p50 {row['wall_p50_ms']:6.2f} ms p95 {row['wall_p95_ms']:6.2f}; "
            f"CPU p50 {row['cpu_p50_ms']:6.2f} ms p95 {row['cpu_p95_ms']:6.2f}; warm-up {warmup_s:.1f} s",
            flush=True,
        )
    results["load_after"] = os.getloadavg()[0]
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
