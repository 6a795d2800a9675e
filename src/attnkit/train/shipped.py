"""The configs attnkit ships, as package data: addressable by name from any directory.

``--config multi30k_de_en_tiny`` names a shipped config (a file path is still taken first), and a
config of one's own may start from one with ``extends: NAME`` (or a path, relative to the config's
folder): its sections are the base's, each key it writes replacing the base's. ``attnkit configs``
lists them. The files live in ``attnkit/configs/`` (a clone's ``configs/`` points there), so an
installed wheel holds the same recipes as a clone.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError

MAX_DEPTH = 8  # extends chains longer than this are a cycle or a mistake


def shipped() -> dict[str, Path]:
    """Every shipped config: name -> its file."""
    folder = resources.files("attnkit") / "configs"
    return {p.name.removesuffix(".yaml"): Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml")}


def resolve(text: str | Path, *, relative_to: Path | None = None) -> Path:
    """The file ``text`` names: a path (relative to ``relative_to`` when given), else a shipped config."""
    path = Path(text)
    if relative_to is not None and not path.is_absolute():
        path = relative_to / path
    if path.is_file():
        return path
    name = str(text).removesuffix(".yaml")
    found = shipped()
    if name in found:
        return found[name]
    raise ConfigError(
        f"config file not found: {path} (and no shipped config is named {name!r}; attnkit configs lists them)"
    )


def summary(path: Path) -> str:
    """A shipped config's first sentence, from the comment it opens with: what it trains."""
    words = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        words.append(line.lstrip("#").strip())
    text = " ".join(w for w in words if w)
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def read_values(path: Path, depth: int = 0) -> dict[str, Any]:
    """The sections of the config at ``path``, its ``extends:`` chain merged beneath them."""
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: a config must be a mapping of sections")
    base = values.pop("extends", None)
    if base is None:
        return values
    if not isinstance(base, str):
        raise ConfigError(f"{path}: extends must name one config (a shipped name or a file), got {base!r}")
    if depth >= MAX_DEPTH:
        raise ConfigError(f"{path}: extends goes {MAX_DEPTH} configs deep: is there a cycle?")
    merged = read_values(resolve(base, relative_to=path.parent), depth + 1)
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged
