"""Same answers on real sentences: the searches over a fixed layout (attnkit.attention.layout), eager
and compiled, against the eager searches on a trained checkpoint, greedy and beam 4, every sentence
of test_2016_flickr.

Sentences are sorted by length and decoded in batches of --batch (as a translator would batch them);
each engine decodes every batch. For each engine and search it reports how many sentences got
tokens different from the eager search's, the largest score difference among the identical ones, and
for the others the two scores (a tie broken the other way by float rounding shows as two nearly
equal scores). Engines: ``static`` (the model's step over the fixed layout, eager), ``inductor``
(the same step through ``torch.compile(fullgraph=True)``: attnkit.decoding.compiled, what
``--compile`` runs, here on a CPU).

    python -m bench.static_parity --checkpoint runs/multi30k_de_en_tiny/checkpoint_best.pt \
        [--data-dir ../shared/data] [--engines static,inductor] [--batch 64] [--out F]
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import time
from pathlib import Path

import torch

from attnkit.attention import FixedLayout
from attnkit.checkpoint import load_checkpoint, model_from_checkpoint
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.decoding import beam_search, greedy_search
from attnkit.decoding.compiled import CompiledDecoding

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("static", "inductor")


def layout_for(engine: str, model):
    return CompiledDecoding(model) if engine == "inductor" else FixedLayout


def compare(got: list, want: list) -> dict:
    """Sentence-by-sentence comparison of best hypotheses."""
    same = [g.tokens == w.tokens for g, w in zip(got, want, strict=True)]
    gaps = [abs(g.score - w.score) for g, w, s in zip(got, want, same) if s]
    differ = [
        {"sentence": i, "score": g.score, "eager_score": w.score}
        for i, (g, w, s) in enumerate(zip(got, want, same))
        if not s
    ]
    return {
        "sentences": len(same),
        "differ": len(differ),
        "largest_score_gap": max(gaps, default=0.0),
        "cases": differ,
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "runs" / "multi30k_de_en_tiny" / "checkpoint_best.pt"))
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--engines", default="static,inductor")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    engines = args.engines.split(",")
    if unknown := set(engines) - set(ENGINES):
        ap.error(f"unknown engine(s) {', '.join(sorted(unknown))}; choose from {', '.join(ENGINES)}")
    torch.set_num_threads(args.threads)

    state = load_checkpoint(args.checkpoint)
    model = model_from_checkpoint(state).eval()
    tok = SubwordTokenizer.from_state_dict(state["tokenizer"])
    with gzip.open(Path(args.data_dir) / "multi30k" / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        sources = [line.rstrip("\n") for line in f]
    ids = [tok.encode(s, side="src")[: model.config.max_len] for s in sources]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    batches = []
    for start in range(0, len(order), args.batch):
        rows = [ids[i] for i in order[start : start + args.batch]]
        width = max(len(r) for r in rows)
        batches.append(torch.tensor([r + [model.config.pad_id] * (width - len(r)) for r in rows]))

    searches = {
        "greedy": (
            lambda src: greedy_search(model, src),
            lambda layout, src: greedy_search(model, src, layout=layout),
        ),
        "beam 4": (
            lambda src: [n[0] for n in beam_search(model, src, beam_size=4)],
            lambda layout, src: [n[0] for n in beam_search(model, src, beam_size=4, layout=layout)],
        ),
    }
    results: dict = {
        "checkpoint": args.checkpoint,
        "sentences": len(sources),
        "batch": args.batch,
        "threads": args.threads,
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "rows": [],
    }
    with torch.no_grad():
        for name, (eager_search, static_search) in searches.items():
            want = [h for src in batches for h in eager_search(src)]
            for engine in engines:
                layout = layout_for(engine, model)
                t0 = time.perf_counter()
                got = [h for src in batches for h in static_search(layout, src)]
                row = {
                    "search": name,
                    "engine": engine,
                    "seconds": time.perf_counter() - t0,
                    **compare(got, want),
                }
                results["rows"].append(row)
                print(
                    f"{name:7s} {engine:9s} {row['differ']}/{row['sentences']} differ, largest score gap "
                    f"among the same {row['largest_score_gap']:.2e} ({row['seconds']:.0f} s)",
                    flush=True,
                )
                for case in row["cases"][:5]:
                    got, want = case["score"], case["eager_score"]
                    print(f"    sentence {case['sentence']}: score {got:.6f} vs eager {want:.6f}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
