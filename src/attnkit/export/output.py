"""Where an export goes: written beside its destination, swapped in whole, replacing only an export.

An export folder holds :data:`MARKER`, a JSON file listing every file the export wrote. ``--force``
replaces a folder only when it holds that marker and nothing the marker does not list (or nothing at
all), and never a folder holding the checkpoint being exported: a run folder, a project, a home
directory are refused with one line, whatever the flag says.

The new export is written beside ``NAME`` and swapped in once complete, as every folder-writing
command's output is (:func:`attnkit.folders.write_folder`: a killed export leaves a work folder the
next one cleans).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError
from ..folders import write_folder

MARKER = ".attnkit-export.json"


def check_replaceable(output: Path, checkpoint: str | Path) -> None:
    """Refuse (ConfigError) to replace ``output`` unless it is absent, empty or an earlier export."""
    if not output.exists():
        return
    if not output.is_dir():
        raise ConfigError(f"output {output} exists and is not a folder")
    source = Path(checkpoint).resolve()
    if output.resolve() in source.parents:
        raise ConfigError(
            f"output folder {output} holds the checkpoint being exported; --force never replaces it "
            "(choose another --output)"
        )
    entries = sorted(p.relative_to(output).as_posix() for p in output.rglob("*"))
    if not entries:
        return
    listed = _listed_files(output)
    if listed is None:
        raise ConfigError(
            f"output folder {output} is not an earlier attnkit export (it has no {MARKER}); --force "
            "replaces only an export: remove or rename the folder yourself"
        )
    folders = {parent.as_posix() for name in listed for parent in Path(name).parents}
    foreign = [e for e in entries if e not in listed and e != MARKER and e not in folders]
    if foreign:
        raise ConfigError(
            f"output folder {output} holds {foreign[0]!r}, which the earlier export did not write; "
            "--force replaces only an export's own files: move it away first"
        )


def _listed_files(folder: Path) -> set[str] | None:
    """The files the marker of ``folder`` lists, or None when there is no valid marker."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = marker.get("files") if isinstance(marker, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return set(files)


def write_then_swap(output: Path, write: Callable[[Path], None], fmt: str) -> Path:
    """``write(folder)`` into a new folder (which it creates) that then replaces ``output`` whole
    (:func:`attnkit.folders.write_folder`), marked with :data:`MARKER`."""

    def mark(model: Path) -> None:
        files = sorted(p.relative_to(model).as_posix() for p in model.rglob("*") if not p.is_dir())
        sha256 = {name: _sha256(model / name) for name in files}  # what a later reader can verify
        marker = {"format": fmt, "files": files, "sha256": sha256}
        (model / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
        _usual_modes(model)

    with write_folder(output, command="export", finish=mark, make=False) as model:
        write(model)
    return output


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def damaged(folder: Path) -> str | None:
    """What differs in an export from what it was written as (a file missing, changed or
    truncated), or None when every file matches its SHA-256 in the marker."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        sha256 = marker["sha256"]
        files = marker["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{folder / MARKER} is missing or unreadable"
    for name in files:
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        if _sha256(path) != sha256.get(name):
            return f"{path} differs from the export"
    return None


def _usual_modes(folder: Path) -> None:
    """Every file and folder with the modes a plain write gives (the umask's): some writers (safetensors,
    temporary folders) leave 0600/0700, which other users of a shared model folder cannot read."""
    umask = _umask()
    for path in [folder, *folder.rglob("*")]:
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


def _umask() -> int:
    """The process's umask, read without changing it (Linux's /proc), else set and put back."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask
