"""The documentation site builds from the repository with the documented command, warnings as errors
(its tutorials run during the build), and a browser opens the built pages: every figure loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_serve_page import driver  # noqa: F401  (the browser, a fixture)
from test_tutorials import numbers

pytest.importorskip("sphinx_gallery")
ROOT = Path(__file__).resolve().parents[1]


def build(out: Path) -> Path:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT / "src")}
    # README's command, with the output and the cache in a folder of the test's own (-E: all anew)
    cmd = [sys.executable, "-m", "sphinx", "-W", "-E", "-q", "-b", "html", "-d", str(out / "doctrees")]
    done = subprocess.run(
        [*cmd, "docs", str(out / "html")], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not done.stderr.strip(), done.stderr[-3000:]  # no warning at all
    return out / "html"


@pytest.mark.slow
def test_the_site_builds_and_a_browser_opens_each_tutorial_with_its_figures(tmp_path, driver):  # noqa: F811
    """One test: the build writes into docs/ (the gallery's pages), so two at once would collide."""
    site = build(tmp_path)
    for page in ("index", "READING", "reference/cli", "reference/config", "reference/http", "learn/index"):
        assert (site / f"{page}.html").is_file(), page
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "--max-len-a" in cli and "make-shapes" in cli  # generated from the parsers
    config = (site / "reference" / "config.html").read_text(encoding="utf-8")
    assert "bidirectional_epochs" in config and "label_smoothing" in config  # from the config classes
    http = (site / "reference" / "http.html").read_text(encoding="utf-8")
    assert all(f"/v1/{e}" in http for e in ("translate", "attention", "generate", "classify", "caption"))
    tutorials = sorted((ROOT / "docs" / "tutorials").glob("plot_*.py"))
    pages = [site / "learn" / f"{t.stem}.html" for t in tutorials]
    assert len(pages) >= 4 and all(p.is_file() for p in pages)
    for page in [site / "index.html", *pages]:
        driver.get(page.as_uri())
        images = driver.execute_script(
            "return Array.from(document.images)"
            ".map(i => [i.getAttribute('src'), i.complete && i.naturalWidth]);"
        )
        if page.parent.name == "learn":
            assert any("sphx_glr_" in src for src, _ in images), page.name  # the build drew its figures
        broken = [src for src, width in images if not width]
        assert not broken, (page.name, broken)
    check_what_the_trained_tutorials_printed(ROOT / "docs" / "learn")


def check_what_the_trained_tutorials_printed(learn: Path) -> None:
    """The tutorials that train a model, read from the build's pages (each runs once, in the build)."""
    printed = {}
    for page in learn.glob("plot_0[5-9]*.rst"):  # 05 translator, 06 LM, 07 classifier, 08 captions
        printed.update(numbers(page.read_text(encoding="utf-8")))
    # the classifier: right, and its pooling weight leans to the deciding word (chance: 1 in ~7)
    assert printed["accuracy"][0] >= 0.95
    assert printed["weight_on_deciding_word"][0] > 1.2 * printed["weight_if_even"][0]
    assert printed["deciding_word_weighted_most"][0] >= 0.4
    # the language model: nothing to know in the first half (chance 1/16), all in the second
    assert printed["first_half_accuracy"][0] <= 0.2 and printed["second_half_accuracy"][0] >= 0.95
    assert printed["generated_tokens"] == printed["prompt_tokens"]
    assert printed["look_back_weight_best_head"][0] >= 0.5 > printed["look_back_weight_mean_head"][0]
    # the translator: its test pairs, and attention sharper in its domain than far out of it
    assert printed["test_bleu"][0] >= 90
    assert printed["sharpness_in_the_domain"][0] > printed["sharpness_twice_as_long"][0]
    # the captioner: its words, and where they look (even: the box's share of the picture)
    assert printed["colour_and_shape_words_right"][0] >= 0.85
    assert printed["attention_on_the_object"][0] >= 2 * printed["attention_if_even"][0]
