"""The attention page: one HTML file assembled from this package's static parts and each task's panel.

The server sends it with no data (the page asks the API); ``attnkit attention --html`` embeds one
attention payload (see :mod:`attnkit.tasks.translation.attention_payload`) and the page draws it
with no server.
Nothing is fetched from elsewhere: styles and scripts are inlined, drawing is canvas and SVG.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

SCRIPTS = ("heatmaps.js", "heads.js", "lines.js", "panels.js")  # before the tasks' panels; app.js after them


def _part(name: str, package: str | None = None) -> str:
    return resources.files(package or __package__).joinpath("static", name).read_text(encoding="utf-8")


def _panels() -> tuple[str, str, str]:
    """(input markup, view markup, scripts) of every task that ships a panel (its
    package holds ``static/panel.js``, and ``input.html`` and ``view.html`` where it has them)."""
    from ..plugin import tasks

    inputs: list[str] = []
    views: list[str] = []
    scripts: list[str] = []
    for task in tasks():
        if not task.has_page:
            continue
        folder = resources.files(task.package).joinpath("static")
        for name, into in (("input.html", inputs), ("view.html", views), ("panel.js", scripts)):
            if folder.joinpath(name).is_file():
                into.append(_part(name, task.package))
    return "".join(inputs), "".join(views), "\n".join(scripts)


def render_page(data: dict[str, Any] | None = None) -> str:
    """The page's HTML; with ``data`` (an attention payload) it is a static, self-contained view."""
    embedded = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # Inside <script>, "</script" or "<!--" in the text would end or bend the element: "<" only occurs
    # in strings here, where \u003c means the same to JavaScript.
    embedded = embedded.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    inputs, views, panels = _panels()
    html = _part("page.html").replace("<!--INPUTS-->\n", inputs).replace("<!--VIEWS-->\n", views)
    html = html.replace("/*STYLE*/", _part("style.css"))
    scripts = [*(_part(p) for p in SCRIPTS), panels, _part("app.js")]
    html = html.replace("/*SCRIPTS*/", "\n".join(scripts))
    return html.replace("/*DATA*/null", embedded)  # last: the data is user text
