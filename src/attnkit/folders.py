"""Output folders that are either complete or absent: a folder-writing command fills a new folder
beside its target, which takes the target's name only once complete (:func:`write_folder`). A folder
is replaced only if it holds nothing but what attnkit wrote there (:func:`check_new_folder`) and
still holds what it held when checked; what a killed run leaves beside it is cleaned by the next.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ConfigError
from .files import temporary_stem
from .processes import alive

FILE_LIST = ".attnkit-files"  # every file a folder-writing command wrote, one relative path a line


def listing(path: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``path`` (recursively): relative path -> (size, modification time in ns)."""
    if not path.is_dir():
        return {}
    found = {}
    for p in sorted(path.rglob("*")):
        if p.is_file() or p.is_symlink():
            st = p.lstat()
            found[p.relative_to(path).as_posix()] = (st.st_size, st.st_mtime_ns)
    return found


def check_new_folder(
    path: str | os.PathLike, *, overwrite: bool, owned: tuple[str, ...], command: str, what: str = "--output"
) -> tuple[Path, dict[str, tuple[int, int]]]:
    """Fail now, with a one-line :class:`ConfigError`, unless :func:`write_folder` may replace ``path``;
    else ``path`` and what it holds now (``write_folder`` replaces it only if that is unchanged).

    ``path`` must be absent or an empty folder; with ``overwrite``, a folder holding only files
    ``attnkit command`` wrote: those its file list names (:data:`FILE_LIST`), or, in a folder written
    before there was one, relative paths the ``owned`` regular expressions match whole. Anything
    else is the user's.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} is a file, not a folder")
    held = listing(path)
    if (held or (path.is_dir() and any(path.iterdir()))) and not overwrite:
        raise ConfigError(
            f"{what} {path} is not empty: choose another folder, or pass --overwrite to replace it"
        )
    if (path / FILE_LIST).is_file():
        written = set((path / FILE_LIST).read_text(encoding="utf-8").splitlines()) | {FILE_LIST}
        foreign = [name for name in held if name not in written]
    else:
        foreign = [name for name in held if not _owned(name, owned)]
    if foreign:
        raise ConfigError(
            f"{what} {path} holds files attnkit {command} did not write ({', '.join(foreign[:3])}); "
            "choose another folder"
        )
    return path, held


def _owned(name: str, owned: tuple[str, ...]) -> bool:
    """Whether a relative path is one the command writes (``images/train_00001.png``)."""
    return any(re.fullmatch(pattern, name) for pattern in owned)


def check_unchanged(path: Path, before: dict[str, tuple[int, int]], *, what: str, command: str) -> None:
    """``path`` holds what it held when checked: else a ConfigError, and nothing is replaced (a file
    someone wrote there while ``attnkit command`` ran is the user's)."""
    now = listing(path)
    changed = sorted(set(now) ^ set(before) | {n for n in now.keys() & before.keys() if now[n] != before[n]})
    if changed:
        raise ConfigError(
            f"{what} {path} changed while attnkit {command} ran ({', '.join(changed[:3])}); nothing was "
            "replaced: run it again"
        )


def remove_stale_partials(path: Path) -> None:
    """Clean what a killed run left beside ``path`` (its process gone, so no live run owns it).

    ``.NAME.old-PID``, the earlier folder that :func:`swap_in` had moved aside: put back when the run
    died before its new folder took the name (nothing at ``path``), deleted when it died after.
    ``.NAME.partial-PID``, an unfinished output: nothing in it was ever the user's.
    """
    for suffix in ("old", "partial"):
        for found in path.parent.glob(f"{glob.escape(temporary_stem(path))}{suffix}-*"):
            pid = found.name.rsplit("-", 1)[-1]
            if not pid.isdigit() or alive(int(pid)):
                continue
            if suffix == "old" and not path.exists():
                found.rename(path)  # killed mid-swap: the earlier folder comes back
            else:
                shutil.rmtree(found, ignore_errors=True)


@contextmanager
def write_folder(
    path: str | os.PathLike,
    before: dict[str, tuple[int, int]] | None = None,
    *,
    command: str = "",
    what: str = "--output",
) -> Iterator[Path]:
    """Yield a new empty folder beside ``path``; on a clean exit it becomes ``path``, its files listed
    in :data:`FILE_LIST`.

    A folder already at ``path`` is renamed aside only then, and deleted once the new one is in
    place (put back if the swap fails); with ``before`` (what :func:`check_new_folder` found), only if
    it still holds exactly that. On any exception the new folder is removed and ``path`` is
    untouched: nothing the user had goes before the new work is known to have succeeded. Check
    ``path`` with :func:`check_new_folder` first.
    """
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(path)
    tmp = path.with_name(f"{temporary_stem(path)}partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        with open(tmp / FILE_LIST, "w", encoding="utf-8") as f:
            f.write("".join(f"{name}\n" for name in listing(tmp)))
        if before is not None:
            check_unchanged(path, before, what=what, command=command)
        swap_in(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def swap_in(new: Path, path: Path) -> None:
    """Rename the finished folder ``new`` to ``path``; a folder already there is moved aside first and
    deleted only once ``new`` is in place (put back if the rename fails)."""
    old = path.with_name(f"{temporary_stem(path)}old-{os.getpid()}")
    if path.exists():
        path.rename(old)
    try:
        new.rename(path)
    except OSError:
        if old.exists():
            old.rename(path)  # the earlier folder comes back
        raise
    shutil.rmtree(old, ignore_errors=True)
