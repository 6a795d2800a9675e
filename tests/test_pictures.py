"""Every picture the commands write says what it shows: each panel's axes are labelled (or, in a
grid of heatmaps, the grid's), and each colour scale has a label. Learners read these pictures."""

from __future__ import annotations

import csv

import pytest
import torch

from attnkit import plotting


@pytest.fixture
def figures(monkeypatch, tmp_path):
    """The figures the plotting functions make, kept instead of closed."""
    kept = []
    monkeypatch.setattr(plotting, "_save", lambda fig, out: kept.append(fig) or tmp_path / "x.png")
    return kept


def colour_scales(fig) -> list:
    return [ax for ax in fig.axes if hasattr(ax, "_colorbar")]


def panels(fig) -> list:
    return [ax for ax in fig.axes if not hasattr(ax, "_colorbar")]


def labelled(fig, ax) -> bool:
    """Both axes said: on the panel, or for the whole figure (a grid of heatmaps)."""
    x = ax.get_xlabel() or (fig._supxlabel and fig._supxlabel.get_text())
    y = ax.get_ylabel() or (fig._supylabel and fig._supylabel.get_text())
    return bool(x) and bool(y)


def test_every_heatmap_has_labelled_axes_and_a_labelled_colour_scale(figures, tmp_path):
    w = torch.softmax(torch.randn(2, 2, 3, 4), dim=-1)
    plotting.plot_attention(w, list("abcd"), list("xyz"), tmp_path / "a.png", title="t")
    plotting.plot_positional_encoding(torch.randn(8, 6), tmp_path / "p.png")
    plotting.plot_head_scores(
        {"importance": torch.rand(2, 3), "weights": torch.rand(2, 3)}, tmp_path / "h.png"
    )
    image = torch.randint(0, 256, (3, 16, 16), dtype=torch.uint8)
    plotting.plot_caption_attention(image, ["a", "dog"], torch.rand(2, 4), (2, 2), tmp_path / "c.png")
    assert len(figures) == 4
    for fig in figures:
        scales = colour_scales(fig)
        assert scales and all(ax.get_ylabel() for ax in scales), fig
    for fig in figures[:3]:  # the caption picture's panels are images: each word is its title
        assert all(labelled(fig, ax) for ax in panels(fig)), fig


def test_the_learning_curve_says_how_its_two_losses_differ(figures, tmp_path):
    path = tmp_path / "metrics.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "train_loss", "val_loss", "val_bleu"])
        w.writerows([[50, 3.0, 2.9, 10.0], [100, 2.5, 2.6, 20.0]])
    plotting.plot_learning_curve(path, tmp_path / "curve.png")
    (fig,) = figures
    assert all(labelled(fig, ax) for ax in panels(fig))
    legend = [t.get_text() for t in panels(fig)[0].get_legend().get_texts()]
    assert any("label-smoothed" in t for t in legend) and any("dropout off" in t for t in legend)
