"""Output files that are either complete or absent: write a temporary file beside the target, then swap.

A crash, a kill or a full disk in the middle of a write leaves the old file (if any) untouched and
no half-written new one; the temporary file is removed on every error the process survives. Output
paths are checked before the slow work that produces their content, so a typo costs seconds.
A folder of outputs is written the same way: :mod:`attnkit.folders`.
"""

from __future__ import annotations

import errno
import glob
import os
import shutil
import stat
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from .errors import ConfigError
from .processes import alive


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
