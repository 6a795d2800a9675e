"""``attnkit prune``: remove the least important attention heads of a checkpoint (Michel, Levy and
Neubig, 2019).

Heads are masked one at a time in order of gradient importance (``--rescore``: importance measured
again after each), each step scored by the task's validation metric on the split the model was
trained with, until ``--fraction`` of the heads are gone or the next one would take the metric under
``--floor``. The curve (fraction pruned -> metric) goes beside the output as ``.curve.csv``,
``.curve.json`` and ``.curve.png``; the output checkpoint has the masked heads removed from its
weights (``model.pruned_heads``), so it is smaller and faster, and every command that reads a
checkpoint takes it (export refuses it: its formats hold as many heads in every layer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..plugin.flags import DEVICE_NAMES, bounded, device
from ..report import Progress
from .head_data import add_data_flags, scored_data

NAME = "prune"


def add_parser(sub) -> None:
    from ..bounds import Bound

    p = sub.add_parser(NAME, help="remove the least important attention heads of a checkpoint")
    p.add_argument("--checkpoint", required=True, help="the checkpoint to prune (never changed)")
    p.add_argument("--output", required=True, help="the pruned checkpoint (its curve is written beside it)")
    p.add_argument(
        "--fraction",
        type=bounded(Bound(float, 0.0, 1.0, open_low=True)),
        help="the share of heads to remove, in (0, 1] (each layer keeps one head)",
    )
    p.add_argument(
        "--floor",
        type=bounded(Bound(float, 0.0, 1e9)),
        help="stop before the validation metric (BLEU, perplexity, ...) gets worse than this",
    )
    p.add_argument("--rescore", action="store_true", help="measure the importance again after each head")
    p.add_argument("--force", action="store_true", help="replace an existing checkpoint at --output")
    add_data_flags(p)
    p.add_argument("--device", type=device, default="auto", help=f"{DEVICE_NAMES} (default auto)")


def run(args) -> None:
    from ..checkpoint import check_checkpoint_output, load_checkpoint, save_checkpoint
    from ..heads import prune_heads, removed_heads

    if args.fraction is None and args.floor is None:
        raise ConfigError("give --fraction, --floor or both: when to stop pruning")
    output = Path(args.output)
    check_checkpoint_output(output, force=args.force, make_folders=True)
    state = load_checkpoint(args.checkpoint)
    if state["model_config"].get("pruned_heads"):
        raise ConfigError(f"{args.checkpoint} is pruned already: prune the checkpoint it came from")
    scored = scored_data(args, output.parent, state)
    model, metric = scored.model, scored.task.metric
    gates, curve, total = _greedy(scored, args)
    removed = removed_heads(model, gates)
    prune_heads(model, removed)
    state = {k: v for k, v in state.items() if k not in ("optimizer", "sampler", "ema", "grad_scaler")}
    state["model_config"] = {**state["model_config"], "pruned_heads": removed}
    state["model"] = model.state_dict()
    save_checkpoint(state, output)
    _write_curve(output, curve, metric)
    gone, base = curve[-1]["pruned"], curve[0][metric]
    print(f"{gone} of {total} heads pruned ({metric} {base:.3f} -> {curve[-1][metric]:.3f}): {output}")


def _greedy(scored, args) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """Mask heads one at a time, least important first, scoring each step: (the gates, 0 where a
    head went; the curve; the number of heads)."""
    import torch

    from ..heads import counts, gated, gradient_importance, shapes

    model, tokenizer, task, data = scored.model, scored.tokenizer, scored.task, scored.batches
    dev = next(model.parameters()).device
    metric, sign = task.metric, 1.0 if task.higher_is_better else -1.0

    def score() -> float:
        return task.validate(model, tokenizer, scored.valid, scored.records, dev)[metric]

    def loss_of(batch):
        return task.loss(model, batch, tokenizer, epsilon=0.0)

    base = score()
    if args.floor is not None and sign * (base - args.floor) < 0:
        raise ConfigError(f"the unpruned model's {metric} is {base:.3f}, already past --floor {args.floor}")
    n = {kind: list(c) for kind, c in counts(model).items()}
    total = sum(sum(c) for c in n.values())
    prunable = total - sum(len(c) for c in n.values())  # each layer keeps one head
    target = prunable if args.fraction is None else min(prunable, round(args.fraction * total))
    gates = {kind: torch.ones(L, H) for kind, (L, H) in shapes(model).items()}
    importance = gradient_importance(model, data, loss_of)
    curve: list[dict[str, Any]] = [{"pruned": 0, "fraction": 0.0, metric: base, "head": None}]
    progress = Progress(target, "prune", "head")
    for step in range(target):
        if args.rescore and step:
            importance = gradient_importance(model, data, loss_of, at=gates)
        kind, layer, head = _least_important(importance, gates, n)
        gates[kind][layer, head] = 0.0
        with gated(model, gates):
            value = score()
        if args.floor is not None and sign * (value - args.floor) < 0:
            gates[kind][layer, head] = 1.0
            progress.say(
                f"prune: stopped: {kind} layer {layer + 1} head {head + 1} takes {metric} to {value:.3f}"
            )
            break
        name = f"{kind} {layer + 1}.{head + 1}"
        curve.append({"pruned": step + 1, "fraction": (step + 1) / total, metric: value, "head": name})
        progress.step(f"{step + 1}/{target} {name}: {metric} {value:.3f}")
    progress.close()
    return gates, curve, total


def _least_important(importance, gates, n) -> tuple[str, int, int]:
    """The live head with the smallest importance whose layer keeps another head."""
    best: tuple[float, str, int, int] | None = None
    for kind, values in importance.items():
        for layer, heads in enumerate(n[kind]):
            live = [h for h in range(heads) if gates[kind][layer, h] == 1]
            if len(live) < 2:
                continue
            for h in live:
                if best is None or float(values[layer, h]) < best[0]:
                    best = (float(values[layer, h]), kind, layer, h)
    assert best is not None, "a head to prune: the target counts only prunable ones"
    return best[1], best[2], best[3]


def _write_curve(output: Path, curve: list[dict], metric: str) -> None:
    from ..files import atomic_write
    from ..plotting import plot_pruning_curve

    stem = output.with_suffix("")
    with atomic_write(Path(f"{stem}.curve.csv")) as f:
        f.write(f"pruned,fraction,{metric},head\n")
        for row in curve:
            f.write(f"{row['pruned']},{row['fraction']:.4f},{row[metric]},{row['head'] or ''}\n")
    with atomic_write(Path(f"{stem}.curve.json")) as f:
        json.dump({"metric": metric, "curve": curve}, f, indent=1)
        f.write("\n")
    plot_pruning_curve(
        [r["fraction"] for r in curve], [r[metric] for r in curve], metric, Path(f"{stem}.curve.png")
    )
