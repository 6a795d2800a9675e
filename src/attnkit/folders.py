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
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ConfigError
from .processes import alive

try:
    import fcntl
except ImportError:  # Windows: no flock; a killed writer's folder is known by its pid alone
    fcntl = None  # type: ignore[assignment]

WORK_TAG = ".attnkit-work."  # .NAME.attnkit-work.PID.XXXX: a folder being written (or a killed writer's)
LOCK = ".lock"  # in a work folder: held while it is written
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


def remove_stale_work(path: Path) -> list[Path]:
    """Remove the work folders that killed writers of ``path`` left: ``.NAME.attnkit-work.*`` whose
    :data:`LOCK` nobody holds (the kernel drops a killed process's ``flock``), or, killed before it
    took the lock, whose name carries a pid that is gone. One that holds ``old``, the earlier folder
    its swap had moved aside, gives it back to ``path`` if nothing took its place. A folder whose lock
    is held belongs to a writer still running and stays. Returns the folders removed."""
    removed = []
    prefix = f".{path.name}{WORK_TAG}"
    for folder in sorted(path.parent.glob(f"{glob.escape(prefix)}*")):
        if folder.is_symlink() or not folder.is_dir():
            continue
        with _unless_held(folder, prefix) as free:
            if not free:
                continue
            if (folder / "old").is_dir() and not path.exists():
                os.replace(folder / "old", path)  # killed mid-swap: the earlier folder comes back
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@contextmanager
def _unless_held(folder: Path, prefix: str) -> Iterator[bool]:
    """Whether ``folder`` is a killed writer's: its lock free (held for the block), or, without one,
    the pid in its name gone. Without ``flock`` (Windows) only the pid tells."""
    pid = folder.name[len(prefix) :].split(".", 1)[0]
    try:
        fd = os.open(folder / LOCK, os.O_RDWR)
    except OSError:  # no lock: ours only if named by a writer whose process is gone
        yield pid.isdigit() and not alive(int(pid))
        return
    try:
        if fcntl is None:
            yield pid.isdigit() and not alive(int(pid))
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a writer at work right now
            yield False
            return
        yield True
    finally:
        os.close(fd)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created) for the block (nothing without ``flock``)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_file_list(folder: Path) -> None:
    """:data:`FILE_LIST` in ``folder``: what :func:`check_new_folder` lets a later run replace."""
    with open(folder / FILE_LIST, "w", encoding="utf-8") as f:
        f.write("".join(f"{name}\n" for name in listing(folder)))


@contextmanager
def write_folder(
    path: str | os.PathLike,
    before: dict[str, tuple[int, int]] | None = None,
    *,
    command: str = "",
    what: str = "--output",
    finish: Callable[[Path], None] = write_file_list,
    make: bool = True,
) -> Iterator[Path]:
    """Yield a new folder beside ``path`` (``make``: created empty; else for the writer to create);
    on a clean exit ``finish`` marks it (default: :data:`FILE_LIST`) and it becomes ``path``. Every
    folder-writing command writes through this: ``prepare``, ``export``, ``make-shapes``,
    ``import-captions``.

    It lives in a work folder ``.NAME.attnkit-work.PID.XXXX`` beside ``path``, whose :data:`LOCK`
    is held while it is written. A folder already at ``path`` moves into the work folder only at the
    swap, and is deleted once the new one is in place (put back if the swap fails); with ``before``
    (what :func:`check_new_folder` found), only if it still holds exactly that. On any exception the
    work folder is removed and ``path`` is untouched: nothing the user had goes before the new work
    is known to have succeeded. A writer killed at any point leaves a work folder the next one
    cleans (:func:`remove_stale_work`). Check ``path`` first (:func:`check_new_folder`).
    """
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_work(path)
    work = Path(tempfile.mkdtemp(prefix=f".{path.name}{WORK_TAG}{os.getpid()}.", dir=path.parent))
    try:
        with locked(work / LOCK):
            new = work / "new"
            if make:
                new.mkdir()
            yield new
            if not new.is_dir():
                raise RuntimeError(f"{command or 'the writer'} wrote nothing")
            finish(new)
            if before is not None:
                check_unchanged(path, before, what=what, command=command)
            _swap(new, path, work / "old")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _swap(new: Path, path: Path, old: Path) -> None:
    """Move ``new`` to ``path``; a folder already at ``path`` goes to ``old`` first (deleted with the
    work folder once ``new`` is in place) and comes back if the move fails."""
    moved = False
    if path.exists():
        os.replace(path, old)
        moved = True
    try:
        os.replace(new, path)
    except BaseException:
        if moved:
            os.replace(old, path)
        raise
