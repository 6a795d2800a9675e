"""The gallery's figure scraper, holding each tutorial's figures to the rule the commands' pictures
keep (:func:`attnkit.picture_rules.unsaid`): a figure that leaves an axis or a colour scale unnamed
fails the build, naming the tutorial and what is missing. Otherwise sphinx-gallery's own matplotlib
scraper saves the figures as before. Named in docs/conf.py as ``image_scrapers``."""

from __future__ import annotations

from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx_gallery.scrapers import matplotlib_scraper


def checked_matplotlib(block, block_vars, gallery_conf, **kwargs):
    import matplotlib.pyplot as plt

    from attnkit.picture_rules import unsaid

    for number in plt.get_fignums():
        missing = unsaid(plt.figure(number))
        if missing:
            where = Path(block_vars["src_file"]).name
            raise ExtensionError(f"{where}: a figure leaves unsaid: {'; '.join(missing)}")
    return matplotlib_scraper(block, block_vars, gallery_conf, **kwargs)


def _get_sg_image_scraper():
    """What sphinx-gallery calls for a scraper named by its module."""
    return checked_matplotlib
