"""The seeds' review picture: every word of a text shaded by the weight the classifier gave it.

A classifier's attention pooling gives one weight per subword; the pieces of a word are merged
(:func:`attnkit.data.pieces.words`) and their weights summed (the weights of a
text still sum to 1). The picture is written as self-contained HTML (inline styles, no scripts, no
external files) and as a PNG.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from ...data.pieces import words as word_spans


def merge_subwords(pieces: Sequence[str], weights: Sequence[float]) -> tuple[list[str], list[float]]:
    """Words and their summed weights from SentencePiece pieces and one weight per piece."""
    if len(pieces) != len(weights):
        raise ValueError(f"{len(pieces)} pieces but {len(weights)} weights")
    found, word_of_piece = word_spans(pieces)
    word_weights = [0.0] * len(found)
    for i, w in zip(word_of_piece, weights, strict=True):
        word_weights[i] += float(w)
    # A lone "▁" followed by another word start is an empty word: its weight goes to the next word.
    for i in range(len(found) - 1, -1, -1):
        if not found[i] and len(found) > 1:
            target = i + 1 if i + 1 < len(found) else i - 1
            word_weights[target] += word_weights[i]
            del found[i], word_weights[i]
    return found, word_weights


def _shade(weight: float, top: float) -> str:
    """Background colour for a weight: white (0) to a strong orange (the text's largest weight)."""
    a = 0.0 if top <= 0 else max(0.0, min(1.0, weight / top))
    return f"rgba(255, 140, 0, {a:.3f})"


def highlight_html(rows: Sequence[tuple[str, Sequence[str], Sequence[float]]], *, title: str) -> str:
    """HTML for texts with shaded words: rows of (heading, words, weights)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title></head>",
        '<body style="font-family: sans-serif; max-width: 60em; margin: 2em auto; line-height: 2.2">',
        f'<h1 style="font-size: 1.3em">{html.escape(title)}</h1>',
    ]
    for heading, words, weights in rows:
        top = max(weights, default=0.0)
        spans = " ".join(
            f'<span title="{w:.3f}" style="background: {_shade(w, top)}; padding: 0.15em 0.1em; '
            f'border-radius: 0.2em">{html.escape(word)}</span>'
            for word, w in zip(words, weights, strict=True)
        )
        parts.append(
            f'<h2 style="font-size: 1em; margin-bottom: 0">{html.escape(heading)}</h2><p>{spans}</p>'
        )
    parts.append(
        '<p style="color: #666; font-size: 0.85em">Shading: the word\'s attention-pooling weight '
        "(subword weights summed), relative to the largest in its text; hover for the value.</p>"
    )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def plot_highlight(
    rows: Sequence[tuple[str, Sequence[str], Sequence[float]]], out_path: str | Path, *, title: str
) -> Path:
    """The same picture as a PNG: words laid out in lines, each on a box shaded by its weight."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig_width, fontsize = 12.0, 10
    units = fig_width / (0.6 * fontsize / 72)  # the x axis counts monospace characters (0.6 em wide)
    width_chars = int(units) - 4  # characters per line of text
    lines: list[tuple[str, list[tuple[str, float, float]]]] = []  # (heading or "", [(word, weight, top)])
    for heading, words, weights in rows:
        top = max(weights, default=0.0)
        lines.append((heading, []))
        current: list[tuple[str, float, float]] = []
        used = 0
        for word, w in zip(words, weights, strict=True):
            if used and used + len(word) + 1 > width_chars:
                lines.append(("", current))
                current, used = [], 0
            current.append((word, w, top))
            used += len(word) + 1
        lines.append(("", current))
    fig = Figure(figsize=(fig_width, 0.7 + 0.32 * len(lines)))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, units)
    ax.set_ylim(len(lines) + 1.5, 0)
    ax.text(1, 0.8, title, fontsize=12, weight="bold", va="center")
    for y, (heading, boxes) in enumerate(lines, start=2):
        if heading:
            ax.text(1, y, heading, fontsize=10, weight="bold", va="center")
        x = 1.0
        for word, w, top in boxes:
            alpha = 0.0 if top <= 0 else max(0.0, min(1.0, w / top))
            ax.text(
                x,
                y,
                word,
                fontsize=fontsize,
                family="monospace",
                va="center",
                bbox=dict(boxstyle="square,pad=0.15", facecolor=(1.0, 0.55, 0.0, alpha), edgecolor="none"),
            )
            x += len(word) + 1
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, format="png")
    return out


def write_highlight(rows, out_base: str | Path, *, title: str) -> tuple[Path, Path]:
    """Write ``out_base``.html and ``out_base``.png; returns both paths."""
    base = Path(out_base)
    html_path = base.with_suffix(".html")
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(highlight_html(rows, title=title), encoding="utf-8")
    return html_path, plot_highlight(rows, base.with_suffix(".png"), title=title)
