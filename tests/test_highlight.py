"""The review picture: subwords merged into words with summed weights, HTML escaped and self-contained."""

import pytest

from attnkit.tasks.classification.highlight import highlight_html, merge_subwords, write_highlight


def test_subwords_merge_into_words_and_weights_add_up():
    pieces = ["▁the", "▁clean", "est", "▁room", "s", "▁", "8:30", "am", "▁", "▁ok"]
    weights = [0.1, 0.2, 0.3, 0.05, 0.05, 0.04, 0.06, 0.1, 0.03, 0.07]
    words, w = merge_subwords(pieces, weights)
    assert words == ["the", "cleanest", "rooms", "8:30am", "ok"]
    assert w == pytest.approx([0.1, 0.5, 0.1, 0.2, 0.1])
    assert sum(w) == pytest.approx(sum(weights))


def test_mismatched_lengths_are_an_error():
    with pytest.raises(ValueError, match="2 pieces but 1 weights"):
        merge_subwords(["▁a", "▁b"], [1.0])


def test_html_is_escaped_and_self_contained(tmp_path):
    page = highlight_html([("<label>", ["<b>", "fine"], [0.9, 0.1])], title="review & weights")
    assert "<b>" not in page and "&lt;b&gt;" in page and "&amp;" in page
    assert "<script" not in page and "http" not in page
    html_path, png_path = write_highlight(
        [("en 0.98", ["a", "dog"], [0.3, 0.7])], tmp_path / "pic", title="t"
    )
    assert html_path.read_text().count("<span") == 2
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
