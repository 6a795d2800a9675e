"""Translation quality at equal wall-clock budget: the Transformer against the RNN+attention baseline.

    python -m bench.quality --pair de-en --minutes 10 --data-dir ../shared/data
    python -m bench.quality --pair en-de --minutes 10 --data-dir ../shared/data

Run from the repository root (attnkit importable). For each model it trains a config (by default
configs/multi30k_<pair>.yaml, the quality config, and
configs/multi30k_de_en_rnn.yaml with the pair's languages) with the same data, the same SentencePiece
settings (hence the same subwords) and the same training-time budget; ``--transformer-config``,
``--rnn-config``, ``--transformer-set`` and ``--rnn-set`` pick smaller models for a CPU budget. It
reports on test_2016_flickr: cased sacreBLEU and chrF of detokenized output,
lowercased BLEU (how the published Multi30k numbers are computed), greedy and beam 4, training time,
parameters, and one PNG with both models' validation-BLEU curves over time. Results go to
bench/results/quality_<pair>.{json,md,png}; docs/BENCHMARKS.md quotes them.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import shlex
import sys
import time
from pathlib import Path

import torch

from attnkit.checkpoint import load_checkpoint, model_from_checkpoint
from attnkit.data.multi30k import load_multi30k
from attnkit.model import count_parameters
from attnkit.plotting import plot_bleu_curves
from attnkit.tasks.translation import Translator, evaluate
from attnkit.train import load_config, train

ROOT = Path(__file__).resolve().parents[1]


def train_one(name: str, pair: str, args, config: str, extra: list[str]) -> dict:
    """Train ``config`` with the ``extra`` overrides under the budget of ``args`` (minutes, validation,
    data and work folders); returns its run folder, best checkpoint and validation curve."""
    src, tgt = pair.split("-")
    out = Path(args.work) / f"{pair}_{name}"
    overrides = [
        f"data.src_lang={src}",
        f"data.tgt_lang={tgt}",
        f"data.data_dir={args.data_dir}",
        f"train.max_minutes={args.minutes}",
        f"valid.every={args.valid_every}",
        f"valid.max_sentences={args.valid_sentences}",
        "valid.beam_size=1",
        "valid.patience=0",
        f"output_dir={out}",
        "train.progress=false",
        f"train.log_every={args.valid_every}",
        *extra,
    ]
    cfg = load_config(ROOT / config, overrides)
    t0 = time.monotonic()
    result = train(cfg, overwrite=True, log=lambda m: print(f"[{name}] {m}", flush=True))
    curve = []
    with result.metrics_csv.open() as f:
        for row in csv.DictReader(f):
            if row["val_bleu"]:
                curve.append((float(row["elapsed_s"]) / 60, float(row["val_bleu"])))
    shown = [o for o in overrides if not o.startswith(("data.data_dir=", "output_dir="))]
    return {
        "config": config,
        "overrides": shown,
        "run": str(out),
        "best": str(result.best_checkpoint),
        "best_score": result.best_score,
        "steps": result.step,
        "train_minutes": (time.monotonic() - t0) / 60,
        "curve": curve,
    }


def score(checkpoint: str, pair: str, data_dir: str, beams: tuple[int, ...] = (1, 4)) -> dict:
    """Greedy and beam-4 scores (or the ``beams`` asked for) of one checkpoint on test_2016_flickr."""
    src, tgt = pair.split("-")
    pairs = load_multi30k("test_2016_flickr", src, tgt, data_dir=data_dir)
    translator = Translator.from_checkpoint(checkpoint, device="auto")
    out = {"params": count_parameters(model_from_checkpoint(load_checkpoint(checkpoint)))}
    for beam in beams:
        label = "greedy" if beam == 1 else f"beam{beam}"
        t0 = time.monotonic()
        ev = evaluate(
            translator, [s for s, _ in pairs], [t for _, t in pairs], beam=beam, lowercase_bleu=True
        )
        out[label] = {
            "bleu": round(ev.scores.bleu, 2),
            "chrf": round(ev.scores.chrf, 2),
            "bleu_lowercase": round(ev.scores.bleu_lowercase, 2),
            "decode_s": round(time.monotonic() - t0, 1),
            "bleu_signature": ev.scores.bleu_signature,
            "chrf_signature": ev.scores.chrf_signature,
            "bleu_lowercase_signature": ev.scores.bleu_lowercase_signature,
        }
    return out


def markdown(pair: str, results: dict, meta: dict) -> str:
    lines = [
        f"Multi30k {pair}, test_2016_flickr (1,000 sentences); budget {meta['minutes']} min of training "
        f"per model on {meta['machine']}.",
        "",
        "| model | params | steps | train min | BLEU greedy | BLEU beam 4 | chrF beam 4 | lc BLEU greedy "
        "| lc BLEU beam 4 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results.items():
        g, b = r["greedy"], r["beam4"]
        lines.append(
            f"| {name} | {r['params']:,} | {r['steps']:,} | {r['train_minutes']:.1f} | {g['bleu']} "
            f"| {b['bleu']} | {b['chrf']} | {g['bleu_lowercase']} | {b['bleu_lowercase']} |"
        )
    any_result = next(iter(results.values()))["beam4"]
    lines += ["", f"Command: `{meta['command']}`", ""]
    lines += [f"- {name}: `{r['config']}` with `{' '.join(r['overrides'])}`" for name, r in results.items()]
    lines += [
        "",
        f"- BLEU: `{any_result['bleu_signature']}`",
        f"- lc BLEU: `{any_result['bleu_lowercase_signature']}`",
        f"- chrF: `{any_result['chrf_signature']}`",
    ]
    return "\n".join(lines) + "\n"


def machine() -> str:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        "?",
    )
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    threads = torch.get_num_threads()
    return f"{cpu}, {threads} threads, {gpu}, torch {torch.__version__}, {platform.python_version()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="de-en", choices=["de-en", "en-de"])
    ap.add_argument("--minutes", type=float, default=10.0, help="training budget per model")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--models", default="transformer,rnn")
    ap.add_argument("--transformer-config", default="configs/multi30k_{pair}.yaml")
    ap.add_argument("--rnn-config", default="configs/multi30k_de_en_rnn.yaml")
    ap.add_argument(
        "--transformer-set",
        nargs="+",
        action="extend",
        default=[],
        help="overrides for the Transformer only (positional overrides go before the options)",
    )
    ap.add_argument(
        "--rnn-set",
        nargs="+",
        action="extend",
        default=[],
        help="overrides for the RNN only (positional overrides go before the options)",
    )
    ap.add_argument("--valid-every", type=int, default=250)
    ap.add_argument(
        "--valid-sentences", type=int, default=300, help="valid sentences decoded for the BLEU curve"
    )
    ap.add_argument("--work", default="runs/bench_quality")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("override", nargs="*", help="extra section.key=value overrides for both models")
    args = ap.parse_args()
    meta = {
        "pair": args.pair,
        "minutes": args.minutes,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "command": "python -m bench.quality " + shlex.join(sys.argv[1:]),
    }
    results = {}
    for name in args.models.split(","):
        config = getattr(args, f"{name}_config").format(pair=args.pair.replace("-", "_"))
        run = train_one(name, args.pair, args, config, [*args.override, *getattr(args, f"{name}_set")])
        results[name] = {**run, **score(run["best"], args.pair, args.data_dir)}
        print(json.dumps({name: results[name]}, indent=1), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"quality_{args.pair.replace('-', '_')}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    (out / f"{stem}.md").write_text(markdown(args.pair, results, meta))
    plot_bleu_curves({n: r["curve"] for n, r in results.items()}, out / f"{stem}.png")
    print(markdown(args.pair, results, meta))


if __name__ == "__main__":
    main()
