"""The tutorials' ``plt.show()``, true on every machine: a window where one can open; on a headless
one (a backend that only writes files) each open figure saved as a PNG in the current folder and
named on stdout, so a script run over ssh still leaves what it drew; in the docs build, where
sphinx-gallery collects the figures itself, nothing more.
"""

from __future__ import annotations

import sys
from pathlib import Path

FILE_ONLY = {"agg", "cairo", "pdf", "pgf", "ps", "svg", "template"}  # matplotlib's non-interactive backends


def show(stem: str) -> list[Path]:
    """Show the open pyplot figures; headless, save them as ``STEM.png`` (``STEM_2.png``, ...) and
    close them. What was saved, in order (none where a window showed them)."""
    import matplotlib.pyplot as plt

    if plt.get_backend().lower() not in FILE_ONLY or "sphinx_gallery" in sys.modules:
        plt.show()
        return []
    saved = []
    for i, number in enumerate(plt.get_fignums()):
        path = Path(f"{stem}.png" if i == 0 else f"{stem}_{i + 1}.png")
        plt.figure(number).savefig(path, dpi=100)
        print(f"no screen here: saved the figure as {path}")
        saved.append(path)
    plt.close("all")
    return saved
