"""Writes ``reference/config.md`` from the config classes when the build starts: every key of every
section with its type, default and the comment beside it in the source, so the reference cannot
drift from the code."""

from __future__ import annotations

import dataclasses
import inspect
import io
import re
import tokenize
from pathlib import Path

FIELD = re.compile(r"^    (\w+)\s*:\s*[^=]+?(=|$)")


def _comments(cls: type) -> dict[str, str]:
    """Each field's comment in ``cls``'s source (and its bases'): the one on its line, else the
    comment lines just above it."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        lines = source.splitlines()
        trailing = {
            tok.start[0] - 1: tok.string.lstrip("# ").strip()
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1][: tok.start[1]].strip()
        }
        for i, line in enumerate(lines):
            m = FIELD.match(line)
            if not m:
                continue
            above = []
            j = i - 1
            while j >= 0 and lines[j].strip().startswith("#"):
                above.insert(0, lines[j].strip().lstrip("# ").strip())
                j -= 1
            found[m.group(1)] = trailing.get(i) or " ".join(above)
    return found


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return repr(field.default_factory())  # type: ignore[misc]
    return "(required)"


def _table(cls: type) -> list[str]:
    comments = _comments(cls)
    rows = ["| key | type | default | what it does |", "| --- | --- | --- | --- |"]
    for f in dataclasses.fields(cls):
        if f.name.startswith("_"):
            continue
        text = comments.get(f.name, "").replace("|", "\\|")
        kind = str(f.type).replace("|", "\\|")
        rows.append(f"| `{f.name}` | `{kind}` | `{_default(f)}` | {text} |")
    return rows


def _page() -> str:
    from attnkit.model.registry import ARCHS
    from attnkit.train.config import SECTIONS

    out = [
        "# Config keys",
        "",
        "Every key of an experiment's YAML file (`attnkit train --config`), by section, generated from the",
        "config classes when this site is built. Any key can be set on the command line too:",
        "`attnkit train --config C train.max_steps=5000 model.dropout=0.2`. A key that is not here is",
        "refused in one line, with the closest name suggested.",
        "",
    ]
    for name, cls in SECTIONS.items():
        doc = inspect.getdoc(cls) or ""
        out += [f"## `{name}:`", "", doc.split("\n\n")[0].replace("\n", " "), "", *_table(cls), ""]
    out += ["## `model:`", "", "The keys depend on `model.arch`; each architecture's class below.", ""]
    for arch, (_, cls) in ARCHS.items():
        doc = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        out += [f"### `model.arch: {arch}`", "", doc, "", *_table(cls), ""]
    return "\n".join(out)


def _write(app) -> None:
    path = Path(app.srcdir) / "reference" / "config.md"
    text = _page()
    if not path.is_file() or path.read_text(encoding="utf-8") != text:  # unchanged: no rebuild
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def setup(app):
    app.connect("builder-inited", _write)
    return {"parallel_read_safe": True, "version": "1"}
