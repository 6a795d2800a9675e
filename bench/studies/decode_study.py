"""The decode-time half of the recipe study: checkpoint averaging, beam size and length penalty.

    python -m bench.studies.decode_study --run runs/multi30k_de_en_best --pair de-en --data-dir ../shared/data

One trained run, many ways to decode it. Every choice is scored on the validation set (where a
recipe may choose) and on test_2016_flickr (what is reported), so the winner is picked without
looking at the test set. Averaging takes the last k ``checkpoint_step*.pt`` of the run (k=1: the
last one alone). Results go to ``--out`` as JSON and a markdown table.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import torch

from attnkit.checkpoint import average_checkpoints, load_checkpoint
from attnkit.data.multi30k import load_multi30k
from attnkit.tasks.translation import Translator, evaluate

from ..quality import machine


def step_checkpoints(run: Path) -> list[Path]:
    """The run's numbered checkpoints, oldest first."""
    found = [
        (int(m.group(1)), p)
        for p in run.glob("checkpoint_step*.pt")
        if (m := re.search(r"step(\d+)", p.name))
    ]
    return [p for _, p in sorted(found)]


def parse_floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a training run folder with checkpoint_step*.pt")
    ap.add_argument("--pair", default="de-en", choices=["de-en", "en-de"])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--average", default="1,3,5", help="average the last k checkpoints, for each k")
    ap.add_argument("--beams", default="1,4,5,8", help="beam sizes, at the default length penalty")
    ap.add_argument("--length-penalties", default="0,0.6,1.0", help="at --lp-beam")
    ap.add_argument("--lp-beam", type=int, default=4)
    ap.add_argument("--splits", default="val,test_2016_flickr")
    ap.add_argument(
        "--max-sentences", type=int, default=0, help="first N of each split (0: all; for a smoke run)"
    )
    ap.add_argument("--out", default="bench/results/decode_study")
    args = ap.parse_args()
    src, tgt = args.pair.split("-")
    ckpts = step_checkpoints(Path(args.run))
    splits = {s: load_multi30k(s, src, tgt, data_dir=args.data_dir) for s in args.splits.split(",")}
    if args.max_sentences:
        splits = {s: pairs[: args.max_sentences] for s, pairs in splits.items()}
    settings = [(b, 0.6) for b in map(int, args.beams.split(","))]
    settings += [
        (args.lp_beam, lp) for lp in parse_floats(args.length_penalties) if (args.lp_beam, lp) not in settings
    ]
    rows = []
    for k in map(int, args.average.split(",")):
        if k > len(ckpts):
            print(f"skipping average of {k}: the run has {len(ckpts)} numbered checkpoints")
            continue
        chosen = ckpts[-k:]
        state = load_checkpoint(chosen[0]) if k == 1 else average_checkpoints(chosen)
        translator = Translator.from_state(state, device="cpu")
        for beam, lp in settings:
            row = {"average": k, "from": [p.name for p in chosen], "beam": beam, "length_penalty": lp}
            for split, pairs in splits.items():
                t0 = time.monotonic()
                ev = evaluate(
                    translator,
                    [s for s, _ in pairs],
                    [t for _, t in pairs],
                    beam=beam,
                    length_penalty=lp,
                    lowercase_bleu=True,
                )
                row[split] = {
                    "bleu": round(ev.scores.bleu, 2),
                    "bleu_lc": round(ev.scores.bleu_lowercase, 2),
                    "chrf": round(ev.scores.chrf, 2),
                    "seconds": round(time.monotonic() - t0, 1),
                    "detail": ev.scores.bleu_detail,
                }
            rows.append(row)
            print(json.dumps(row), flush=True)
    meta = {
        "run": args.run,
        "pair": args.pair,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "threads": torch.get_num_threads(),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    out.with_suffix(".md").write_text(markdown(rows, list(splits)))
    print(markdown(rows, list(splits)))


def markdown(rows: list[dict], splits: list[str]) -> str:
    head = "| last k averaged | beam | length penalty | " + " | ".join(
        f"{s} BLEU | {s} lc BLEU | {s} chrF" for s in splits
    )
    lines = [head + " |", "| ---: | ---: | ---: |" + " ---: |" * (3 * len(splits))]
    best = {s: max(r[s]["bleu"] for r in rows) for s in splits} if rows else {}
    for r in rows:
        cells = []
        for s in splits:
            b = f"**{r[s]['bleu']}**" if r[s]["bleu"] == best[s] else str(r[s]["bleu"])
            cells += [b, str(r[s]["bleu_lc"]), str(r[s]["chrf"])]
        lines.append(f"| {r['average']} | {r['beam']} | {r['length_penalty']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
