"""``attnkit heads``: which attention heads of a checkpoint matter (:mod:`attnkit.heads`).

For every head of every kind (encoder self, decoder self, cross), on the validation split the model
was trained with (or another split, or files: :mod:`.head_data`): Michel et al.'s gradient
importance, the task's validation metric with that head alone masked (and its drop), and the head's
confidence and entropy. Writes ``heads.csv``,
``heads.json`` and ``heads.png`` (importance and drop, layers x heads per kind) into ``--out``.
Every task scores the same way: through its own loss and validation, as training does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..plugin.flags import DEVICE_NAMES, device
from ..report import Progress, say
from .head_data import add_data_flags, scored_data

NAME = "heads"


def add_parser(sub) -> None:
    p = sub.add_parser(
        NAME,
        help="score every attention head of a checkpoint: gradient importance, the validation metric "
        "without it, confidence and entropy",
    )
    p.add_argument("--checkpoint", required=True, help="the checkpoint whose heads to score")
    p.add_argument(
        "--output",
        dest="out",
        required=True,
        help="output folder (made): heads.csv, heads.json, heads.png",
    )
    add_data_flags(p)
    p.add_argument(
        "--no-metric",
        action="store_true",
        help="leave out the metric with each head masked (one validation per head)",
    )
    p.add_argument("--device", type=device, default="auto", help=f"{DEVICE_NAMES} (default auto)")


def run(args) -> None:
    from ..heads import counts, head_scores
    from ..plotting import plot_head_scores

    out = Path(args.out)
    scored = scored_data(args, out)
    model, tokenizer, task, valid, records = (
        scored.model,
        scored.tokenizer,
        scored.task,
        scored.valid,
        scored.records,
    )
    dev = next(model.parameters()).device

    def loss_of(batch):
        return task.loss(model, batch, tokenizer, epsilon=0.0)

    say(f"heads: {len(records)} examples of {scored.described}, gradient importance and weights")
    scores = head_scores(model, scored.batches, loss_of)
    metric, base, drops = task.metric, None, None
    if not args.no_metric:
        base = task.validate(model, tokenizer, valid, records, dev)[metric]
        values = _drops(model, lambda: task.validate(model, tokenizer, valid, records, dev)[metric], metric)
        sign = 1.0 if task.higher_is_better else -1.0  # a drop is how much worse, whichever way is better
        drops = {kind: [[sign * (base - v) for v in row] for row in rows] for kind, rows in values.items()}
    rows = []
    for kind, per_layer in counts(model).items():
        for layer, H in enumerate(per_layer):
            for head in range(H):
                rows.append(
                    {
                        "kind": kind,
                        "layer": layer + 1,
                        "head": head + 1,
                        "importance": float(scores[kind]["importance"][layer, head]),
                        f"{metric}_drop": None if drops is None else drops[kind][layer][head],
                        "confidence": float(scores[kind]["confidence"][layer, head]),
                        "entropy": float(scores[kind]["entropy"][layer, head]),
                    }
                )
    meta = {"checkpoint": str(args.checkpoint), "data": scored.described, "examples": len(records)}
    write(out, rows, {**meta, "metric": metric, metric: base})
    panels: dict[str, Any] = {f"{kind}: importance": scores[kind]["importance"] for kind in scores}
    if drops is not None:
        panels |= {f"{kind}: {metric} drop": drops[kind] for kind in drops}
    plot_head_scores(panels, out / "heads.png")
    print(f"{len(rows)} heads scored: {out / 'heads.csv'}, {out / 'heads.json'}, {out / 'heads.png'}")


def _drops(model, score, metric: str) -> dict[str, list[list[float]]]:
    """``score()`` with each head alone masked: per kind, (L, H) values, with a progress bar."""
    from ..heads import counts, gated, masked, shapes

    values: dict[str, list[list[float]]] = {}
    n, done = sum(sum(c) for c in counts(model).values()), 0
    progress = Progress(n, "heads", "head")
    for kind, per_layer in counts(model).items():
        values[kind] = [[float("nan")] * shapes(model)[kind][1] for _ in per_layer]
        for layer, H in enumerate(per_layer):
            for head in range(H):
                with gated(model, masked(model, kind, layer, head)):
                    values[kind][layer][head] = value = score()
                done += 1
                progress.step(f"{done}/{n} {kind} layer {layer + 1} head {head + 1}: {metric} {value:.3f}")
    progress.close()
    return values


def write(out: Path, rows: list[dict], meta: dict) -> None:
    """heads.csv and heads.json, each written whole."""
    from ..files import atomic_write

    columns = list(rows[0])
    with atomic_write(out / "heads.csv") as f:
        f.write(",".join(columns) + "\n")
        for row in rows:
            f.write(",".join("" if row[c] is None else str(row[c]) for c in columns) + "\n")
    with atomic_write(out / "heads.json") as f:
        json.dump({**meta, "heads": rows}, f, indent=1)
        f.write("\n")
