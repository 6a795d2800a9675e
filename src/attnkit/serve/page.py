"""The attention page: one HTML file assembled from the package's static parts; and the API's page.

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
    """(input markup, view markup, scripts) of every task that ships a panel (``TaskInfo.page``: its
    package holds ``static/panel.js``, and ``input.html`` and ``view.html`` where it has them)."""
    from ..tasks import tasks

    inputs: list[str] = []
    views: list[str] = []
    scripts: list[str] = []
    for task in tasks():
        if task.page is None:
            continue
        folder = resources.files(task.page).joinpath("static")
        for name, into in (("input.html", inputs), ("view.html", views), ("panel.js", scripts)):
            if folder.joinpath(name).is_file():
                into.append(_part(name, task.page))
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


DOCS = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>attnkit API</title>
<style>body{font:14px system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em}
h2{font-size:1.1em;margin-top:1.5em}pre{background:#f4f4f4;padding:.6em;overflow:auto}
code{font-weight:bold}</style></head>
<body><h1>attnkit API</h1><p>The OpenAPI schema: <a href="openapi.json">openapi.json</a>.</p>
<div id="api">Loading&hellip;</div>
<script>
fetch("openapi.json").then(r => r.json()).then(spec => {
  const api = document.getElementById("api"); api.textContent = "";
  const schemas = (spec.components || {}).schemas || {};
  for (const [path, ops] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const h = document.createElement("h2");
      h.textContent = method.toUpperCase() + " " + path + (op.summary ? ": " + op.summary : "");
      api.appendChild(h);
      const ref = (((op.requestBody || {}).content || {})["application/json"] || {}).schema;
      if (ref && ref.$ref) {
        const pre = document.createElement("pre");
        pre.textContent = JSON.stringify(schemas[ref.$ref.split("/").pop()], null, 2);
        api.appendChild(pre);
      }
    }
  }
});
</script></body></html>
"""


def render_docs() -> str:
    """The API's endpoints and request bodies, drawn from ``/openapi.json`` with nothing fetched from
    elsewhere (FastAPI's own page loads Swagger UI from a CDN)."""
    return DOCS
