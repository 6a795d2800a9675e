"""``attnkit heads``: which attention heads of a checkpoint matter (:mod:`attnkit.heads`).

For every head of every kind (encoder self, decoder self, cross), on the validation split the model
was trained with: Michel et al.'s gradient importance, the task's validation metric with that head
alone masked (and its drop), and the head's confidence and entropy. Writes ``heads.csv``,
``heads.json`` and ``heads.png`` (importance and drop, layers x heads per kind) into ``--out``.
Every task scores the same way: through its own loss and validation, as training does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .common import DEVICE_NAMES, device, positive_int

NAME = "heads"


def add_parser(sub) -> None:
    p = sub.add_parser(
        NAME,
        help="score every attention head of a checkpoint: gradient importance, the validation metric "
        "without it, confidence and entropy",
    )
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--out", required=True, help="output folder (made): heads.csv, heads.json, heads.png")
    p.add_argument("--data-dir", help="the folder the training corpus is in, if it moved")
    p.add_argument(
        "--max-sentences", type=positive_int, default=200, help="validation examples scored (default 200)"
    )
    p.add_argument(
        "--no-metric",
        action="store_true",
        help="leave out the metric with each head masked (one validation per head)",
    )
    p.add_argument("--device", type=device, default="auto", help=f"{DEVICE_NAMES} (default auto)")


def run(args) -> None:
    from ..heads import counts, gradient_importance, weight_statistics
    from ..plotting import plot_head_scores

    out = Path(args.out)
    _, model, tokenizer, task, valid, records, data = _validation(args, out)
    dev = next(model.parameters()).device

    def loss_of(batch):
        return task.loss(model, batch, tokenizer, epsilon=0.0)

    say(f"heads: {len(records)} validation examples, gradient importance and weights")
    with weight_statistics(model) as stats:  # filled from the gradient pass's own forwards
        importance = gradient_importance(model, data, loss_of)
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
                        "importance": float(importance[kind][layer, head]),
                        f"{metric}_drop": None if drops is None else drops[kind][layer][head],
                        "confidence": float(stats[kind]["confidence"][layer, head]),
                        "entropy": float(stats[kind]["entropy"][layer, head]),
                    }
                )
    write(out, rows, {"checkpoint": str(args.checkpoint), "metric": metric, metric: base})
    panels: dict[str, Any] = {f"{kind}: importance": importance[kind] for kind in importance}
    if drops is not None:
        panels |= {f"{kind}: {metric} drop": drops[kind] for kind in drops}
    plot_head_scores(panels, out / "heads.png")
    print(f"{len(rows)} heads scored: {out / 'heads.csv'}, {out / 'heads.json'}, {out / 'heads.png'}")


def _validation(args, out: Path, state: dict | None = None):
    """The checkpoint (``state``, when read already), its model and tokenizer, its task, and the
    first ``--max-sentences`` examples of the validation split it was trained with: encoded, and in
    batches on the model's device."""
    from ..checkpoint import load_checkpoint
    from ..files import check_output_path
    from ..heads import attention_heads
    from ..tasks import task_of
    from ..tasks.base import batches
    from ..train.config import ExperimentConfig

    state = load_checkpoint(args.checkpoint) if state is None else state
    info = task_of(state, args.checkpoint)
    if not isinstance(state.get("experiment"), dict):
        raise ConfigError(f"{args.checkpoint} holds no experiment config: no validation split to score on")
    check_output_path(out / "heads.json", what="--out", make_folders=True)
    out.mkdir(parents=True, exist_ok=True)
    cfg = ExperimentConfig.from_saved(state["experiment"])
    if args.data_dir:
        cfg.data = cfg.data.replace(data_dir=args.data_dir)
    cfg.valid.max_sentences = args.max_sentences
    wrapper = info.open(state, device=args.device, path=args.checkpoint)
    model, tokenizer, dev = wrapper.model, wrapper.tokenizer, wrapper.device
    attention_heads(model)  # a model without heads: one line, before the data is read
    task = info.training(cfg)
    task.load(cfg.data, "train")  # first, as training reads it (a classifier's labels come from it)
    records = task.load(cfg.data, "valid")[: args.max_sentences]
    max_len = min(cfg.data.max_len, model.config.max_len - 1)
    valid = task.encode(records, tokenizer, max_len, split="valid")
    collate = lambda ex: task.collate(ex, tokenizer)  # noqa: E731
    data = list(batches(collate, valid.examples, valid.lengths, cfg.valid.batch_tokens, dev))
    return state, model, tokenizer, task, valid, records, data


def _drops(model, score, metric: str) -> dict[str, list[list[float]]]:
    """``score()`` with each head alone masked: per kind, (L, H) values, one progress line each."""
    from ..heads import counts, gated, masked, shapes

    values: dict[str, list[list[float]]] = {}
    n, done = sum(sum(c) for c in counts(model).values()), 0
    for kind, per_layer in counts(model).items():
        values[kind] = [[float("nan")] * shapes(model)[kind][1] for _ in per_layer]
        for layer, H in enumerate(per_layer):
            for head in range(H):
                with gated(model, masked(model, kind, layer, head)):
                    values[kind][layer][head] = value = score()
                done += 1
                say(f"heads: {done}/{n} {kind} layer {layer + 1} head {head + 1}: {metric} {value:.3f}")
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


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
