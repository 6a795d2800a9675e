"""The attention-heads study: which heads matter, how many can go, whether two seeds agree, and what
pruning buys (Michel, Levy and Neubig, 2019; Voita et al., 2019).

    python -m bench.studies.heads_study --data-dir ../shared/data \\
        --model main_job=runs/multi30k_de_en_tiny/checkpoint_best.pt \\
        --model main_job_seed2=runs/multi30k_de_en_tiny_seed2/checkpoint_best.pt \\
        --model best=runs/multi30k_de_en_best/checkpoint_last.pt \\
        --model langid=runs/multi30k_langid_first3/checkpoint_best.pt \\
        --model captioner=runs/captions_shapes_tiny/checkpoint_best.pt \\
        --seeds main_job,main_job_seed2 --speed main_job,best --max-sentences 500

For each model, on its validation split: ``attnkit heads`` (importance, and the metric with each head
alone masked), ``attnkit prune --fraction 0.5`` (the greedy curve over half the heads) and ``attnkit
prune --floor`` a tolerance below the unpruned model's metric (0.5 BLEU; 0.01 macro-F1, one point):
the share of heads that go before the next would cost more. For the translators in ``--speed``:
test_2016_flickr BLEU and decoding CPU-seconds (one thread, beam 4) of the unpruned model, the one
pruned at the tolerance and the one with half its heads gone, each in turn twice. For the two
``--seeds`` runs: whether their most important heads sit in the same places. Heads within a layer
are interchangeable (head 3 of one run has nothing to do with head 3 of another), so places are
compared as (kind, layer).
Writes ``--out`` (JSON), ``--figure`` (the curves) and FIGURE_importance.png (the importance maps);
checkpoints go to ``--work`` (not committed).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from ..quality import machine

TOLERANCE = {"bleu": 0.5, "macro_f1": 0.01, "accuracy": 0.01}


def cli(*argv: Any) -> None:
    from attnkit.cli import main

    code = main([str(a) for a in argv])
    if code != 0:
        raise SystemExit(f"attnkit {argv[0]} failed ({code})")


def by_kind(rows: list[dict], metric: str) -> dict[str, dict[str, float]]:
    """Per kind: the mean and largest drop of the metric when one head is masked, and its share of
    the summed importance."""
    total = sum(r["importance"] for r in rows)
    found = {}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        mine = [r for r in rows if r["kind"] == kind]
        drops = [r[f"{metric}_drop"] for r in mine]
        found[kind] = {
            "heads": len(mine),
            "mean_drop": sum(drops) / len(drops),
            "max_drop": max(drops),
            "importance_share": sum(r["importance"] for r in mine) / total,
        }
    return found


def study_model(name: str, ckpt: str, args) -> dict:
    """heads, the full greedy curve, and the checkpoint pruned at the tolerance."""
    from attnkit.checkpoint import load_checkpoint

    work = Path(args.work) / name
    corpus = ((load_checkpoint(ckpt).get("experiment") or {}).get("data") or {}).get("corpus")
    data = ["--max-sentences", args.max_sentences]
    if corpus in ("multi30k", "langid"):  # the others name their files (a captioner's tsv)
        data += ["--data-dir", args.data_dir]
    started = time.perf_counter()
    cli("heads", "--checkpoint", ckpt, "--out", work, *data)
    heads_s = time.perf_counter() - started
    heads = json.loads((work / "heads.json").read_text())
    metric, rows = heads["metric"], heads["heads"]
    cli("prune", "--checkpoint", ckpt, "--output", work / "all.pt", "--fraction", args.curve_fraction, *data)
    curve = json.loads((work / "all.curve.json").read_text())["curve"]
    tolerance = TOLERANCE[metric]
    pruned = work / "pruned.pt"  # greedy, until the next head would cost more than the tolerance
    cli("prune", "--checkpoint", ckpt, "--output", pruned, "--floor", curve[0][metric] - tolerance, *data)
    kept = json.loads((work / "pruned.curve.json").read_text())["curve"][-1]
    return {
        "checkpoint": ckpt,
        "metric": metric,
        "examples": heads["examples"],
        "heads_seconds": round(heads_s, 1),
        "unpruned": curve[0][metric],
        "kinds": by_kind(rows, metric),
        "heads": rows,
        "curve": curve,
        "tolerance": tolerance,
        "prunable": {
            "heads": kept["pruned"],
            "of": len(rows),
            "fraction": kept["fraction"],
            metric: kept[metric],
        },
        "pruned_checkpoint": str(pruned),
        "half_checkpoint": str(work / "all.pt"),  # the curve's end: half the heads gone
    }


def places(rows: list[dict], top: int) -> Counter:
    """Where the ``top`` most important heads sit: a multiset of (kind, layer)."""
    ranked = sorted(rows, key=lambda r: -r["importance"])[:top]
    return Counter((r["kind"], r["layer"]) for r in ranked)


def compare_seeds(a: dict, b: dict) -> dict:
    """Do two runs' important heads sit in the same (kind, layer)? The overlap of their top quarter's
    places, and Spearman's correlation of each place's largest importance."""
    from scipy.stats import spearmanr  # type: ignore[import-untyped]

    top = max(1, len(a["heads"]) // 4)
    overlap = sum((places(a["heads"], top) & places(b["heads"], top)).values())

    def strongest(rows):  # (kind, layer) -> its most important head's importance
        found: dict[tuple, float] = {}
        for r in rows:
            key = (r["kind"], r["layer"])
            found[key] = max(found.get(key, 0.0), r["importance"])
        return found

    sa, sb = strongest(a["heads"]), strongest(b["heads"])
    keys = sorted(sa)
    rho = spearmanr([sa[k] for k in keys], [sb[k] for k in keys]).statistic
    kind_a = max(a["kinds"], key=lambda k: a["kinds"][k]["mean_drop"])
    kind_b = max(b["kinds"], key=lambda k: b["kinds"][k]["mean_drop"])
    return {
        "top": top,
        "top_places_shared": overlap,
        "layer_spearman": float(rho),
        "most_sensitive_kind": [kind_a, kind_b],
    }


def speed(models: dict[str, str], data_dir: str, n: int) -> dict:
    """test_2016_flickr BLEU and decoding CPU-seconds (beam 4, one thread) of each checkpoint
    (label -> path), all of them in turn twice; parameters and file sizes."""
    from attnkit.data.multi30k import load_multi30k
    from attnkit.tasks.translation import Translator, evaluate

    pairs = load_multi30k("test_2016_flickr", "de", "en", data_dir=data_dir, download=False)[: n or None]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    found: dict[str, dict] = {}
    try:
        for label, path in [*models.items(), *models.items()]:
            translator = Translator.from_checkpoint(path, device="cpu")
            started = time.process_time()
            bleu = evaluate(translator, sources, refs, beam=4, ter=False).scores.bleu
            seconds = time.process_time() - started
            entry = found.setdefault(label, {"bleu": bleu, "cpu_seconds": []})
            entry["cpu_seconds"].append(round(seconds, 2))
            entry["parameters"] = sum(p.numel() for p in translator.model.parameters())
            entry["file_bytes"] = Path(path).stat().st_size
    finally:
        torch.set_num_threads(threads)
    base = found["unpruned"]
    for entry in found.values():
        entry["speedup"] = min(base["cpu_seconds"]) / min(entry["cpu_seconds"])
        entry["parameters_ratio"] = entry["parameters"] / base["parameters"]
    return {"sentences": len(sources), **found}


def plot_curves(models: dict[str, dict], out: Path) -> None:
    """Each model's metric drop (in its tolerance's units) against the share of heads pruned."""
    from attnkit.plotting import _figure, _save

    fig = _figure(6.0, 3.8)
    ax = fig.subplots()
    for name, m in models.items():
        base, metric = m["unpruned"], m["metric"]
        ax.plot(
            [100 * p["fraction"] for p in m["curve"]],
            [(p[metric] - base) / m["tolerance"] for p in m["curve"]],
            marker="o",
            markersize=2.5,
            label=f"{name} ({metric}, unit {m['tolerance']})",
        )
    ax.axhline(-1, color="grey", linestyle="--", linewidth=0.8)
    ax.set(xlabel="heads pruned (%)", ylabel="change from unpruned (tolerances)", ylim=(-12, 2))
    ax.set_title("greedy pruning by importance; the dashed line is the tolerance")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    _save(fig, out)


def plot_importance(models: dict[str, dict], out: Path) -> None:
    """The importance maps: a row per model, a panel per kind (layers x heads), each cell written in."""
    from attnkit.plotting import _figure, _save

    kinds = ["encoder", "decoder", "cross"]
    fig = _figure(3.0 * len(kinds), 2.2 * len(models))
    axes = fig.subplots(len(models), len(kinds), squeeze=False)
    for row, (name, m) in enumerate(models.items()):
        for col, kind in enumerate(kinds):
            ax = axes[row][col]
            mine = [r for r in m["heads"] if r["kind"] == kind]
            if not mine:
                ax.axis("off")
                continue
            L, H = max(r["layer"] for r in mine), max(r["head"] for r in mine)
            values = torch.zeros(L, H)
            for r in mine:
                values[r["layer"] - 1, r["head"] - 1] = r["importance"]
            ax.imshow(values.numpy(), cmap="viridis", aspect="auto")
            for layer in range(L):
                for head in range(H):
                    text = f"{values[layer, head]:.2g}"
                    ax.text(head, layer, text, ha="center", va="center", fontsize=6, color="w")
            ax.set_xticks(range(H), [str(h + 1) for h in range(H)])
            ax.set_yticks(range(L), [str(layer + 1) for layer in range(L)])
            ax.set_title(f"{name}: {kind}", fontsize=8)
    _save(fig, out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", required=True, help="NAME=CHECKPOINT (repeat)")
    ap.add_argument("--seeds", help="two model names: the same recipe, two seeds")
    ap.add_argument("--speed", default="", help="translators whose pruned model's speed is measured")
    ap.add_argument("--data-dir", required=True)
    ap.add_argument(
        "--max-sentences", type=int, default=500, help="validation examples (of Multi30k val's 1,014)"
    )
    ap.add_argument(
        "--curve-fraction", type=float, default=0.5, help="the greedy curve's end (share of heads)"
    )
    ap.add_argument("--test-sentences", type=int, default=0, help="test sentences decoded (0: all)")
    ap.add_argument("--work", default="runs/heads_study")
    ap.add_argument("--out", default="bench/results/heads_study.json")
    ap.add_argument("--figure", default="docs/img/heads_study.png")
    args = ap.parse_args()
    models = {}
    for spec in args.model:
        name, _, ckpt = spec.partition("=")
        done = Path(args.work) / name / "study.json"  # a model studied before with these settings
        settings = [ckpt, args.max_sentences, args.curve_fraction]
        if done.is_file() and json.loads(done.read_text())["settings"] == settings:
            models[name] = json.loads(done.read_text())["result"]
            continue
        models[name] = study_model(name, ckpt, args)
        done.write_text(json.dumps({"settings": settings, "result": models[name]}))
    result: dict[str, Any] = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "models": models}
    if args.seeds:
        a, b = args.seeds.split(",")
        result["seeds"] = {"runs": [a, b], **compare_seeds(models[a], models[b])}
    for name in filter(None, args.speed.split(",")):
        m = models[name]
        checkpoints = {
            "unpruned": m["checkpoint"],
            "pruned": m["pruned_checkpoint"],
            "half": m["half_checkpoint"],
        }
        m["speed"] = speed(checkpoints, args.data_dir, args.test_sentences)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    plot_curves(models, Path(args.figure))
    plot_importance(models, Path(args.figure).with_name(Path(args.figure).stem + "_importance.png"))
    for name, m in models.items():
        p = m["prunable"]
        print(
            f"{name}: {m['metric']} {m['unpruned']:.3f}; {p['heads']}/{p['of']} heads for <= {m['tolerance']}"
        )
    print(json.dumps({k: v for k, v in result.items() if k != "models"}, indent=1))


if __name__ == "__main__":
    main()
