"""The API's own page: its endpoints and request bodies, drawn from ``/openapi.json``."""

from __future__ import annotations

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
