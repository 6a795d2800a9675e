"""The documentation site: ``python -m sphinx -W -b html docs docs/_build/html`` (README, "Documentation").

Sphinx, because sphinx-gallery runs every tutorial (``docs/tutorials/plot_*.py``) at build time and
draws its figures then, as PyTorch's and scikit-learn's tutorials are built; MyST reads the Markdown
pages the repository already keeps; sphinx-argparse writes the command reference from the parsers
themselves; the config reference is generated from the config classes (``_ext/config_reference.py``), the
HTTP reference from the server's OpenAPI schema (``_ext/http_reference.py``).
Warnings are errors (``-W``): a broken link or a failing tutorial fails the build.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent / "src"))

project = "attnkit"
author = "the attnkit authors"
copyright = "2026, the attnkit authors"  # the footer says whose, not "Copyright ©" alone
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxarg.ext",
    "sphinx_gallery.gen_gallery",
    "config_reference",
    "http_reference",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "tutorials/README.rst", "learn/*.ipynb", "learn/*.py", "learn/*.zip"]
html_theme = "furo"
html_title = "attnkit"
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True

sphinx_gallery_conf = {
    "examples_dirs": "tutorials",  # the scripts, run in file-name order
    "gallery_dirs": "learn",  # what the build writes (not kept in git)
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "image_scrapers": ("picture_check",),  # matplotlib's, each figure checked first (_ext)
    "write_computation_times": False,
}
