"""Output files that are either complete or absent: write a temporary file beside the target, then swap.

A crash, a kill or a full disk in the middle of a write leaves the old file (if any) untouched and
no half-written new one; the temporary file is removed on every error the process survives. Output
paths are checked before the slow work that produces their content, so a typo costs seconds.
A folder of outputs is written the same way (:func:`write_folder`): beside the target, then swapped in.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import shutil
import stat
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from .errors import ConfigError


def check_output_path(
    path: str | os.PathLike,
    *,
    what: str = "output",
    make_folders: bool = False,
    force: bool | None = None,
    replaceable: Callable[[Path], bool] | None = None,
    kind: str = "",
) -> Path:
    """Fail now, with a one-line :class:`ConfigError`, if ``path`` cannot be written later.

    The folder must exist (or, with ``make_folders``, its nearest existing ancestor must; the
    missing ones are created by the write) and take a new file, probed by creating and removing
    one: permission bits alone say nothing for root or on a read-only mount. ``path`` must not be
    a folder, and a full file system is refused here rather than after the work.

    What an existing file at ``path`` may be: a text or picture output (``force`` None) replaces
    a file as ``>`` would, but never an archive (an attnkit checkpoint is a zip file: a slip of
    ``--output model.pt`` must not cost a model); an output with a ``--force`` flag (``force`` True
    or False) replaces one only with it, and only a file ``replaceable`` accepts (``kind``: what
    that is, for the message): :func:`attnkit.checkpoint.check_checkpoint_output`.
    """
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {path} is a folder; give a file path")
    if _is_regular(path):
        _check_replaceable_file(path, what=what, force=force, replaceable=replaceable, kind=kind)
    folder = path.parent
    while make_folders and not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        problem = f"{folder} is not a folder" if folder.exists() else f"the folder {folder} does not exist"
        raise ConfigError(f"{what} {path}: {problem}")
    if path.exists() and not _is_regular(path):
        return path  # /dev/stdout, a FIFO: written in place, nothing to probe
    try:
        full = os.statvfs(folder).f_bavail == 0
    except OSError:
        full = False
    if full:
        raise ConfigError(f"{what} {path}: no space left on device in {folder}")
    _remove_stale_temporaries(path)
    try:
        prefix = f"{temporary_stem(path)}{os.getpid()}."
        fd, probe = tempfile.mkstemp(prefix=prefix, suffix=".probe", dir=folder)
    except OSError as e:
        raise ConfigError(f"{what} {path}: cannot write into {folder} ({e.strerror or e})") from None
    os.close(fd)
    os.unlink(probe)
    return path


def temporary_stem(path: Path) -> str:
    """The ``.NAME.`` that starts the temporary names written beside ``path``: short enough that a
    temporary name stays within the file system's limit however long ``NAME`` is (a long name is cut
    and a checksum of the whole name keeps it apart from its neighbours)."""
    name = path.name
    if len(os.fsencode(name)) <= _TEMPORARY_NAME_ROOM:
        return f".{name}."
    cut = os.fsencode(name)[: _TEMPORARY_NAME_ROOM - 9].decode("utf-8", errors="ignore")
    return f".{cut}~{zlib.crc32(os.fsencode(name)):08x}."


_TEMPORARY_NAME_ROOM = 200  # of NAME_MAX's 255 bytes: the rest for ".PID.XXXXXXXX.probe" and the like


def _check_replaceable_file(
    path: Path, *, what: str, force: bool | None, replaceable: Callable[[Path], bool] | None, kind: str
) -> None:
    archive = starts_with(path, ZIP_MAGIC)
    if force is None and archive:
        raise ConfigError(
            f"{what} {path} is an archive (an attnkit checkpoint is one): this command writes text or "
            "pictures and would replace it; choose another path"
        )
    if force is False:
        raise ConfigError(f"{what} {path} already exists (pass --force to replace it)")
    if force and replaceable is not None and not replaceable(path):
        raise ConfigError(f"{what} {path} is not {kind}; --force replaces only that: move it away")


ZIP_MAGIC = b"PK\x03\x04"  # how a zip archive, and so a torch.save file, starts


def starts_with(path: Path, magic: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    except OSError:
        return False


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


@contextmanager
def atomic_write(
    path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8", newline: str | None = None
) -> Iterator[IO]:
    """Open a temporary file beside ``path``; on a clean exit flush, fsync and rename it to ``path``.

    On any exception the temporary file is removed and ``path`` keeps its old content. A path that
    exists and is not a regular file (``/dev/stdout``, a FIFO) is opened and written in place.
    """
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()  # replace the file the link points to, not the link
    if "b" in mode:
        encoding = None
    if path.exists() and not _is_regular(path):
        with open(path, mode, encoding=encoding, newline=newline) as f:
            yield f
        return
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{temporary_stem(path)}{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=encoding, newline=newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _default_mode(path))
        os.replace(tmp, path)
    except OSError as e:  # name the file the user asked for, not the temporary one
        Path(tmp).unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror or str(e), str(path)) from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_copy(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Copy the file ``src`` to ``dst`` as :func:`atomic_write` writes: whole or not at all, ``dst``
    an independent file (not a link that a later write in place would change too)."""
    with open(src, "rb") as f, atomic_write(dst, "wb") as out:
        shutil.copyfileobj(f, out, length=16 << 20)
    return Path(dst)


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the ``.NAME.PID.XXXX.tmp`` files (and ``.probe`` files) of writers of ``path`` that were
    killed mid-write."""
    prefix = temporary_stem(path)
    for suffix in (".tmp", ".probe"):
        for tmp in path.parent.glob(f"{glob.escape(prefix)}*{suffix}"):
            pid = tmp.name[len(prefix) :].split(".", 1)[0]
            if pid.isdigit() and not alive(int(pid)):
                tmp.unlink(missing_ok=True)


def _default_mode(path: Path) -> int:
    """The mode a plain ``open(path, "w")`` would give: the existing file's, else 0o666 minus umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def os_error_in(exc: BaseException) -> OSError | None:
    """The OSError behind ``exc`` (itself, or its cause or context: torch wraps write errors)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def describe_os_error(exc: OSError) -> str:
    """A short reason: "no space left on device", "permission denied", ..."""
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    return (exc.strerror or str(exc)).lower()


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


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def die_with_parent(parent: int, every_s: float = 0.5) -> None:
    """In a worker process: exit once ``parent`` (the pid of the process that started it, read there)
    is gone, however it went (kill -9 included): a killed ``prepare`` or ``serve`` leaves no workers
    behind. The pid comes from the parent because one killed before the worker got here has already
    been replaced by init. A thread watches it (the kernel's PR_SET_PDEATHSIG would follow the
    starting thread, not the process)."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="attnkit-parent-watch", daemon=True).start()


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
