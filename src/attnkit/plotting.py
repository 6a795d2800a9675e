"""Figures: positional encodings, attention maps, learning curves, BLEU-vs-time curves.

Every function draws on its own ``matplotlib.figure.Figure`` rendered by the Agg canvas and writes a
PNG. Nothing goes through ``pyplot``, so importing or calling this module never changes the global
matplotlib backend (a notebook keeps its own) and no figure is left open. matplotlib is imported
inside the functions so ``import attnkit`` stays light.

Attention dimensions: ``L`` layers, ``H`` heads, ``Tq`` queries (target), ``Tk`` keys (source).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnkit.errors import DataError


def _figure(width: float, height: float) -> Any:
    """A pyplot-free figure with an Agg canvas attached."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, out_path: str | Path) -> Path:
    """Write the PNG whole or not at all (a full disk never leaves a truncated image)."""
    from .files import atomic_write

    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(out, "wb") as f:
        fig.savefig(f, dpi=100, format="png")
    return out


def plot_positional_encoding(pe: Tensor, out_path: str | Path) -> Path:
    """Heatmap of a ``(max_len, d_model)`` positional-encoding matrix (Section 3.5)."""
    pe = torch.as_tensor(pe).detach().float().cpu()
    if pe.dim() != 2:
        raise ValueError(f"pe must be a (max_len, d_model) matrix, got shape {tuple(pe.shape)}")
    fig = _figure(10, 6)
    ax = fig.add_subplot()
    im = ax.imshow(pe.numpy(), aspect="auto")
    ax.set_title("Positional Encoding")
    ax.set_xlabel("Encoding Dimension")
    ax.set_ylabel("Position Index")
    fig.colorbar(im, ax=ax, label="PE(pos, i): sin on even i, cos on odd")
    return _save(fig, out_path)


def plot_attention(
    weights: Tensor,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    out_path: str | Path,
    *,
    title: str | None = None,
    keys: str = "keys: what each row reads",
    queries: str = "queries: each row's weights sum to 1",
) -> Path:
    """Grid of attention heatmaps: rows are layers, columns heads, one colour scale for all.

    Args:
        weights: ``(L, H, Tq, Tk)``, ``(H, Tq, Tk)`` or ``(Tq, Tk)``; each row sums to 1.
        src_tokens: the ``Tk`` key labels (x axis); for self-attention pass the same list twice.
        tgt_tokens: the ``Tq`` query labels (y axis).
        keys, queries: what the axes show, said under and beside the grid.
    """
    w = torch.as_tensor(weights).detach().float().cpu()
    if w.dim() not in (2, 3, 4):
        raise ValueError(
            f"attention weights must be (L, H, Tq, Tk), (H, Tq, Tk) or (Tq, Tk), got shape {tuple(w.shape)}"
        )
    w = w.reshape((1,) * (4 - w.dim()) + tuple(w.shape))  # (L, H, Tq, Tk)
    n_layers, n_heads, tq, tk = w.shape
    if len(tgt_tokens) != tq or len(src_tokens) != tk:
        raise ValueError(
            f"weights are {tq} queries x {tk} keys but got {len(tgt_tokens)} tgt_tokens "
            f"and {len(src_tokens)} src_tokens"
        )
    if w.numel() == 0:
        raise ValueError(f"attention weights are empty: shape {tuple(w.shape)}")

    # ~0.22 inch per token keeps labels legible; clamp so tiny and huge maps both stay sensible.
    cell_w = min(max(0.22 * tk + 1.0, 2.5), 14.0)
    cell_h = min(max(0.22 * tq + 0.8, 2.0), 14.0)
    fig = _figure(cell_w * n_heads + 1.2, cell_h * n_layers + (0.6 if title else 0.2))
    axes = fig.subplots(n_layers, n_heads, squeeze=False, sharex=True, sharey=True)
    fontsize = 8 if max(tq, tk) <= 30 else 6
    vmax = float(w.max()) or 1.0  # one colour scale for all panels, so heads are comparable
    for layer in range(n_layers):
        for head in range(n_heads):
            ax = axes[layer][head]
            im = ax.imshow(w[layer, head].numpy(), aspect="auto", cmap="viridis", vmin=0.0, vmax=vmax)
            ax.set_xticks(range(tk))
            ax.set_yticks(range(tq))
            ax.set_xticklabels(src_tokens, rotation=90, fontsize=fontsize)
            ax.set_yticklabels(tgt_tokens, fontsize=fontsize)
            if n_layers * n_heads > 1:
                ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=9)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
    fig.supxlabel(keys, fontsize=9)
    fig.supylabel(queries, fontsize=9)
    if title:
        fig.suptitle(title)
    return _save(fig, out_path)


def _number(cell: str | None, csv_path: Path, line: int, column: str) -> float:
    try:
        return float(cell)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DataError(f"{csv_path}, line {line}: column {column!r} is not a number: {cell!r}") from None


def _read_metrics_csv(csv_path: Path, columns: Sequence[str]) -> dict[str, list[tuple[float, float]]]:
    """``columns`` of a metrics CSV as (step, value) points, skipping empty cells; others are ignored."""
    try:
        with open(csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as err:
        raise DataError(f"cannot read metrics file {csv_path}: {err}") from err
    if not rows or "step" not in rows[0]:
        raise DataError(f"{csv_path} has no 'step' column (or no rows)")
    series: dict[str, list[tuple[float, float]]] = {}
    for line, row in enumerate(rows, start=2):  # line 1 is the header
        cells = {k: row[k] for k in columns if row.get(k) not in (None, "")}
        if not cells:
            continue
        step = _number(row["step"], csv_path, line, "step")
        for key, cell in cells.items():
            series.setdefault(key, []).append((step, _number(cell, csv_path, line, key)))
    return series


# The two losses differ in kind, not only in data: training's is label-smoothed, with dropout on.
LOSS_LABELS = {
    "train_loss": "train loss (label-smoothed, dropout on)",
    "val_loss": "validation loss (plain cross-entropy, dropout off)",
}


def plot_learning_curve(csv_path: str | Path, out_path: str | Path, *, metric: str = "bleu") -> Path:
    """Train/val loss (left panel) and the validation metric (right panel, e.g. BLEU) against step."""
    csv_path = Path(csv_path)
    column = f"val_{metric}"
    series = _read_metrics_csv(csv_path, ("train_loss", "val_loss", column))
    losses = [k for k in ("train_loss", "val_loss") if series.get(k)]
    if not losses and not series.get(column):
        raise DataError(f"{csv_path} has no values in train_loss, val_loss or {column}")
    label = {"bleu": "BLEU", "perplexity": "perplexity", "macro_f1": "macro-F1"}.get(metric, metric)
    fig = _figure(12, 4.5)
    ax_loss, ax_metric = fig.subplots(1, 2)
    for key in losses:
        steps, values = zip(*series[key], strict=True)
        ax_loss.plot(steps, values, label=LOSS_LABELS[key], marker="o" if key == "val_loss" else None)
    ax_loss.set(title="Loss", xlabel="step", ylabel="cross-entropy (nats/token)")
    if losses:
        ax_loss.legend()
    if series.get(column):
        steps, values = zip(*series[column], strict=True)
        ax_metric.plot(steps, values, marker="o", color="tab:green")
    else:
        ax_metric.text(
            0.5, 0.5, f"no validation {label} yet", ha="center", va="center", transform=ax_metric.transAxes
        )
    ax_metric.set(title=f"Validation {label}", xlabel="step", ylabel=label)
    for ax in (ax_loss, ax_metric):
        ax.grid(alpha=0.3)
    return _save(fig, out_path)


def plot_bleu_curves(
    curves: Mapping[str, Sequence[tuple[float, float]]],
    out_path: str | Path,
    xlabel: str = "training time (min)",
) -> Path:
    """One line per model of (time, validation BLEU) points, for comparing training budgets."""
    if not curves:
        raise ValueError("curves is empty: give at least one model's (time, BLEU) points")
    fig = _figure(8, 5)
    ax = fig.add_subplot()
    for name, points in curves.items():
        points = list(points)
        if not points or any(len(p) != 2 or not all(math.isfinite(v) for v in p) for p in points):
            raise ValueError(f"curve {name!r} must be a non-empty list of finite (time, BLEU) pairs")
        times, bleus = zip(*sorted(points), strict=True)
        ax.plot(times, bleus, marker="o", label=name)
    ax.set(title="Validation BLEU", xlabel=xlabel, ylabel="BLEU")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, out_path)


def plot_caption_attention(
    image: Tensor,
    words: Sequence[str],
    weights: Tensor,
    grid: tuple[int, int],
    out_path: str | Path,
    *,
    row_labels: Sequence[str] = (),
    title: str | None = None,
) -> Path:
    """Seed 002's caption picture: for each word, the image with that word's attention over the
    regions laid over it (one panel per word; one row per map, e.g. per layer and head).

    Args:
        image: ``(C, S, S)`` uint8 pixels, what the model read.
        words: the ``T`` produced pieces (and ``</s>``), one panel each.
        weights: ``(T, R)`` or ``(rows, T, R)`` attention over the ``R = gh * gw`` regions.
        grid: ``(gh, gw)``; region ``r`` covers cell ``(r // gw, r % gw)``.
        row_labels: one label per row (e.g. "layer 2, head 3").
    """
    w = torch.as_tensor(weights).detach().float().cpu()
    w = w[None] if w.dim() == 2 else w  # (rows, T, R)
    gh, gw = grid
    n_rows, T, R = w.shape
    if T != len(words) or R != gh * gw:
        raise ValueError(
            f"weights are {T} words x {R} regions but got {len(words)} words and a {gh}x{gw} grid"
        )
    pixels = torch.as_tensor(image).detach().cpu().permute(1, 2, 0).numpy()  # (S, S, C)
    size = pixels.shape[0]
    panel = 1.6
    fig = _figure(panel * T + (1.2 if row_labels else 0.2), panel * n_rows + (0.6 if title else 0.2))
    axes = fig.subplots(n_rows, T, squeeze=False)
    vmax = float(w.max()) or 1.0  # one colour scale for every word, so their panels compare
    for i in range(n_rows):
        for t in range(T):
            ax = axes[i][t]
            maps = w[i, t].view(gh, gw).numpy()
            ax.imshow(pixels.squeeze(-1) if pixels.shape[-1] == 1 else pixels, cmap="gray")
            # the word's attention, one value per region, stretched over the image
            overlay = ax.imshow(
                maps,
                cmap="magma",
                alpha=0.6,
                extent=(0, size, size, 0),
                interpolation="bilinear",
                vmin=0.0,
                vmax=vmax,
            )
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(words[t].lstrip("\u2581") or words[t], fontsize=10)
            if t == 0 and row_labels:
                ax.set_ylabel(row_labels[i], fontsize=8)
    fig.colorbar(overlay, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight of the region")
    if title:
        fig.suptitle(title)
    return _save(fig, out_path)


def plot_head_scores(panels: dict[str, Any], out_path: str | Path) -> Path:
    """One heat map per panel (title -> (L, H) scores of one kind of attention): a score per layer
    (rows) and head (columns), each cell written in, as Michel et al.'s and Voita et al.'s figures."""
    n = len(panels)
    fig = _figure(3.2 * n, 3.0)
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, (title, values) in zip(axes, panels.items(), strict=True):
        scores = torch.as_tensor(values, dtype=torch.float32)  # (L, H)
        L, H = scores.shape
        im = ax.imshow(scores.numpy(), cmap="viridis", aspect="auto")
        fig.colorbar(im, ax=ax, shrink=0.8, label="score")
        for layer in range(L):
            for head in range(H):
                ax.text(
                    head, layer, f"{scores[layer, head]:.2g}", ha="center", va="center", fontsize=7, color="w"
                )
        ax.set_xticks(range(H), [str(h + 1) for h in range(H)])
        ax.set_yticks(range(L), [str(layer + 1) for layer in range(L)])
        ax.set(xlabel="head", ylabel="layer", title=title)
    return _save(fig, out_path)


def plot_pruning_curve(
    fractions: Sequence[float], values: Sequence[float], metric: str, out_path: str | Path
) -> Path:
    """The validation metric against the share of heads pruned (Michel et al.'s Figure 3)."""
    fig = _figure(5.0, 3.5)
    ax = fig.subplots()
    ax.plot([100 * f for f in fractions], values, marker="o", markersize=3)
    ax.set(xlabel="heads pruned (%)", ylabel=metric, title=f"{metric} as heads are pruned")
    ax.grid(alpha=0.3)
    return _save(fig, out_path)


def self_attention_path(out: Path, name: str) -> Path:
    """Where a picture beside ``out`` goes: ``map.png`` -> ``map_NAME.png`` (a task's further maps)."""
    return out.with_name(f"{out.stem}_{name}{out.suffix}")
