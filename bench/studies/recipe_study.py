"""The study behind the best recipes: one change at a time from a base config, at a fixed budget.

    PYTHONPATH=src python -m bench.studies.recipe_study --pair de-en --minutes 8 --threads 1 --jobs 2 \
        --data-dir ../shared/data [--rows base,seed2,...] [--config configs/multi30k_de_en_tiny.yaml]

Each row trains the base config with one group of overrides (model size, vocabulary size, joint or
separate vocabularies, dropout, label smoothing, learning rate, warmup, batch size, positional kind)
for the same wall-clock budget, validation included; ``seed2`` repeats the base with another seed, so
the table shows how large a difference has to be before it means something. The checkpoint with the
best greedy validation BLEU is decoded greedily on test_2016_flickr (cased and lowercased sacreBLEU,
chrF). Rows run as separate processes, ``--jobs`` at a time with ``--threads`` each, so two
one-thread rows share a 2-core machine evenly. Decoding choices (checkpoint averaging, beam size,
length penalty) are studied on a finished run by ``bench.studies.decode_study``. Results go to
bench/results/recipe_study_<pair>.{json,md}; docs/BENCHMARKS.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# name -> (what changes, overrides on top of the base config)
ROWS: dict[str, tuple[str, list[str]]] = {
    "base": ("the base config", []),
    "seed2": ("the base, another seed (noise)", ["train.seed=2"]),
    "size_up": (
        "model: d_model 256, FFN 1024, 3+3 layers",
        ["model.d_model=256", "model.d_ff=1024", "model.n_encoder_layers=3", "model.n_decoder_layers=3"],
    ),
    "size_down": ("model: d_model 64, FFN 256", ["model.d_model=64", "model.d_ff=256"]),
    "vocab_8k": ("vocabulary: joint 8k", ["tokenizer.vocab_size=8000"]),
    "vocab_2k": ("vocabulary: joint 2k", ["tokenizer.vocab_size=2000"]),
    "vocab_separate": (
        "vocabulary: separate 4k + 4k (source and target embeddings not shared)",
        ["tokenizer.joint=false", "model.share_vocab=false"],
    ),
    "dropout_0.3": ("dropout 0.3", ["model.dropout=0.3"]),
    "dropout_0": ("dropout 0", ["model.dropout=0.0"]),
    "ls_0": ("label smoothing 0", ["train.label_smoothing=0.0"]),
    "lr_0.001": ("peak learning rate 0.001 (half)", ["train.lr=0.001"]),
    "lr_0.004": ("peak learning rate 0.004 (double)", ["train.lr=0.004"]),
    "warmup_1000": ("warmup 1,000 steps", ["train.warmup_steps=1000"]),
    "batch_1500": ("batches of 1,500 tokens", ["train.max_tokens=1500"]),
    "batch_6000": ("batches of 6,000 tokens", ["train.max_tokens=6000"]),
    "learned": ("positions: learned", ["model.positional=learned"]),
    "relative": ("positions: relative (Shaw, keys, clip 16)", ["model.positional=relative"]),
    "rotary": ("positions: rotary", ["model.positional=rotary"]),
}


def run_row(name: str, args) -> dict:
    """Train one row under the budget and score its best checkpoint (runs in a child process)."""
    import torch

    from attnkit.denormals import flush_for_this_thread
    from bench.quality import score, train_one

    torch.set_num_threads(args.threads)
    flush_for_this_thread()
    # max_steps far out of reach: the wall-clock budget alone ends every row
    run = train_one(name, args.pair, args, args.config, ["train.max_steps=1000000", *ROWS[name][1]])
    scores = score(run["best"], args.pair, args.data_dir, beams=(1,))
    return {
        "row": name,
        "change": ROWS[name][0],
        "overrides": ROWS[name][1],
        "steps": run["steps"],
        "train_minutes": round(run["train_minutes"], 2),
        "val_bleu": round(run["best_score"], 2),
        **scores,
    }


def markdown(rows: list[dict], meta: dict) -> str:
    base = next((r for r in rows if r["row"] == "base"), None)
    noise = None
    seed2 = next((r for r in rows if r["row"] == "seed2"), None)
    if base and seed2:
        noise = abs(seed2["greedy"]["bleu_lowercase"] - base["greedy"]["bleu_lowercase"])
    lines = [
        f"Multi30k {meta['pair']}, base `{meta['config']}`, {meta['minutes']} min of training per row "
        f"(validation included), {meta['threads']} thread(s) each, {meta['jobs']} rows at a time; "
        f"{meta['machine']}. Test: test_2016_flickr, greedy, best checkpoint by greedy val BLEU.",
        "",
        "| row | change from the base | params | steps | val BLEU | test BLEU | test lc BLEU | chrF "
        "| Δ lc vs base |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        g = r["greedy"]
        delta = (
            ""
            if base is None or r is base
            else f"{g['bleu_lowercase'] - base['greedy']['bleu_lowercase']:+.2f}"
        )
        lines.append(
            f"| {r['row']} | {r['change']} | {r['params']:,} | {r['steps']:,} | {r['val_bleu']} "
            f"| {g['bleu']} | {g['bleu_lowercase']} | {g['chrf']} | {delta} |"
        )
    if noise is not None:
        lines += ["", f"Seed noise (|seed2 - base|, lc BLEU): {noise:.2f}."]
    lines += ["", f"Command: `{meta['command']}`"]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="de-en", choices=["de-en", "en-de"])
    ap.add_argument("--config", default="configs/multi30k_de_en_tiny.yaml")
    ap.add_argument("--minutes", type=float, default=8.0, help="training budget per row")
    ap.add_argument("--rows", default=",".join(ROWS), help="comma-separated row names")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per row")
    ap.add_argument("--jobs", type=int, default=2, help="rows trained at the same time")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--valid-every", type=int, default=200)
    ap.add_argument("--valid-sentences", type=int, default=300)
    ap.add_argument("--work", default="runs/recipe_study")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--row", help=argparse.SUPPRESS)  # child mode: train and score one row
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.row:
        Path(args.result).write_text(json.dumps(run_row(args.row, args), indent=1))
        return
    names = args.rows.split(",")
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        sys.exit(f"error: unknown rows {unknown}; known: {', '.join(ROWS)}")
    from bench.report import machine_info

    info = machine_info("cpu")
    meta = {
        "pair": args.pair,
        "config": args.config,
        "minutes": args.minutes,
        "threads": args.threads,
        "jobs": args.jobs,
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{info['cpu']}, {info['cores']} cores, torch {info['versions']['torch']}",
        "command": "python -m bench.studies.recipe_study " + shlex.join(sys.argv[1:]),
    }
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    pending, running, results = list(names), [], {}
    while pending or running:
        while pending and len(running) < args.jobs:
            name = pending.pop(0)
            result_path = work / f"{args.pair}_{name}.json"
            log = open(work / f"{args.pair}_{name}.log", "w")
            cmd = [
                sys.executable,
                "-m",
                "bench.studies.recipe_study",
                *sys.argv[1:],
                "--row",
                name,
                "--result",
                str(result_path),
            ]
            running.append(
                (name, result_path, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log)
            )
        time.sleep(2)
        for item in list(running):
            name, result_path, proc, log = item
            if proc.poll() is None:
                continue
            running.remove(item)
            log.close()
            if proc.returncode != 0:
                print(f"row {name} failed (exit {proc.returncode}); see {log.name}", flush=True)
                continue
            results[name] = json.loads(result_path.read_text())
            g = results[name]["greedy"]
            print(
                f"{name}: {results[name]['steps']} steps, test {g['bleu']} / lc {g['bleu_lowercase']}",
                flush=True,
            )
    rows = [results[n] for n in names if n in results]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"recipe_study_{args.pair.replace('-', '_')}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / f"{stem}.md").write_text(markdown(rows, meta))
    print(markdown(rows, meta))


if __name__ == "__main__":
    main()
