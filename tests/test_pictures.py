"""Every picture the commands write says what it shows (attnkit.picture_rules: each heatmap's axes
named and its colour scale labelled, each line plot's axes named), and the rule itself finds what a
picture leaves unsaid. Learners read these pictures; the docs build holds its figures to the same."""

from __future__ import annotations

import csv

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attnkit import plotting  # noqa: E402
from attnkit.picture_rules import panels, unsaid  # noqa: E402


@pytest.fixture
def figures(monkeypatch, tmp_path):
    """The figures the plotting functions make, kept instead of closed."""
    kept = []
    monkeypatch.setattr(plotting, "_save", lambda fig, out: kept.append(fig) or tmp_path / "x.png")
    return kept


def test_every_picture_the_commands_write_says_what_it_shows(figures, tmp_path):
    w = torch.softmax(torch.randn(2, 2, 3, 4), dim=-1)
    plotting.plot_attention(w, list("abcd"), list("xyz"), tmp_path / "a.png", title="t")
    plotting.plot_positional_encoding(torch.randn(8, 6), tmp_path / "p.png")
    plotting.plot_head_scores(
        {"importance": torch.rand(2, 3), "weights": torch.rand(2, 3)}, tmp_path / "h.png"
    )
    image = torch.randint(0, 256, (3, 16, 16), dtype=torch.uint8)
    plotting.plot_caption_attention(image, ["a", "dog"], torch.rand(2, 4), (2, 2), tmp_path / "c.png")
    path = tmp_path / "metrics.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "train_loss", "val_loss", "val_bleu"])
        writer.writerows([[50, 3.0, 2.9, 10.0], [100, 2.5, 2.6, 20.0]])
    plotting.plot_learning_curve(path, tmp_path / "curve.png")
    assert len(figures) == 5
    for fig in figures:
        assert unsaid(fig) == [], fig
    legend = [t.get_text() for t in panels(figures[-1])[0].get_legend().get_texts()]
    assert any("label-smoothed" in t for t in legend) and any("dropout off" in t for t in legend)


def test_the_rule_names_what_a_picture_leaves_unsaid():
    fig, (heat, line) = plt.subplots(1, 2)
    heat.imshow(torch.rand(3, 4), cmap="Blues")
    heat.set_title("keys")
    line.plot([1, 2], [3, 4])
    line.set_xlabel("step")
    assert unsaid(fig) == [
        "panel 1 (keys): its x axis is not named",
        "panel 1 (keys): its y axis is not named",
        "panel 1 (keys): a heatmap without a colour scale",
        "panel 2: its y axis is not named",
    ]
    heat.set(xlabel="key", ylabel="query")
    line.set_ylabel("loss")
    scale = fig.colorbar(heat.images[0], ax=heat)
    assert unsaid(fig) == ["a colour scale without a label"]
    scale.set_label("attention weight")
    assert unsaid(fig) == []
    plt.close(fig)


def test_a_photograph_and_a_one_row_strip_need_no_axis_names():
    fig, (photo, strip) = plt.subplots(2, 1)
    photo.imshow(torch.rand(4, 4, 3))
    photo.axis("off")
    strip.imshow(torch.rand(1, 5), cmap="Blues")
    strip.set_yticks([])
    strip.set_xlabel("word")
    fig.colorbar(strip.images[0], ax=strip, label="weight")
    assert unsaid(fig) == []
    plt.close(fig)
