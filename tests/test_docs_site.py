"""The documentation site builds from the repository with the documented command, warnings as errors
(its tutorials run during the build), and a browser opens the built pages: every figure loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_serve_page import driver  # noqa: F401  (the browser, a fixture)

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
