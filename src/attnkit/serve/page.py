"""The attention page: one HTML file assembled from the package's static parts.

The server sends it with no data (the page asks the API); ``attnkit attention --html`` embeds one
attention payload (see :mod:`attnkit.serve.attention`) and the page draws it with no server.
Nothing is fetched from elsewhere: styles and scripts are inlined, drawing is canvas and SVG.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

PARTS = ("style.css", "heatmaps.js", "lines.js", "app.js")


def _part(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def render_page(data: dict[str, Any] | None = None) -> str:
    """The page's HTML; with ``data`` (an attention payload) it is a static, self-contained view."""
    embedded = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # Inside <script>, "</script" or "<!--" in the text would end or bend the element: "<" only occurs
    # in strings here, where \u003c means the same to JavaScript.
    embedded = embedded.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    html = _part("page.html")
    html = html.replace("/*STYLE*/", _part("style.css"))
    html = html.replace("/*SCRIPTS*/", "\n".join(_part(p) for p in PARTS[1:]))
    return html.replace("/*DATA*/null", embedded)  # last: the data is user text
