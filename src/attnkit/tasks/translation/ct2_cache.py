"""The CTranslate2 exports of a checkpoint, cached beside it: ``<checkpoint>.ct2/<key>``.

The key hashes the checkpoint's bytes, attnkit's and CTranslate2's versions and the exporter's
source, so a changed checkpoint (or exporter) exports again and an unchanged one never does. An
export is written into a temporary folder and renamed into place: two first uses at once both
export, one rename wins, neither sees half a model. The cache keeps only the current export.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ... import __version__
from ...errors import AttnkitError, ConfigError

CACHE_VERSION = 1  # of the cache's layout; bump to make every cached export stale


def _ct2():
    try:
        import ctranslate2
    except ImportError:
        raise ConfigError(
            "--engine ctranslate2 needs the ctranslate2 package: pip install 'attnkit[export]'"
        ) from None
    return ctranslate2


def cache_key(blob: bytes) -> str:
    """What an export depends on: the checkpoint's bytes, the versions and the exporter's code."""
    from ...export import ctranslate2 as exporter
    from ...export import weights

    digest = hashlib.sha256(blob)
    digest.update(f"attnkit {__version__} cache {CACHE_VERSION} ct2 {_ct2().__version__}".encode())
    for module in (exporter, weights):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:20]


def cache_root(checkpoint: str | Path) -> Path:
    """The folder holding a checkpoint's exports: ``<checkpoint>.ct2`` beside it."""
    path = Path(checkpoint)
    return path.with_name(path.name + ".ct2")


def _log(message: str) -> None:
    print(f"attnkit: {message}", file=sys.stderr, flush=True)


def exported_model(
    checkpoint: str | Path, blob: bytes | None = None, *, log: Callable[[str], None] = _log
) -> Path:
    """The CTranslate2 export of ``checkpoint`` (whose bytes are ``blob`` when read already), made
    now unless the cache holds it. A model the exporter refuses is a one-line error naming why."""
    checkpoint = Path(checkpoint)
    if blob is None:
        blob = checkpoint.read_bytes()
    from ...checkpoint import load_checkpoint
    from ...plugin import expect_task

    expect_task(load_checkpoint(checkpoint, data=blob), "translate", checkpoint)  # before any export
    root = cache_root(checkpoint)
    final = root / cache_key(blob)
    if final.exists():
        from ...export.output import damaged

        why = damaged(final)
        if why is None:
            return final
        log(f"the CTranslate2 cache of {checkpoint} is damaged ({why}): exporting it again")
        shutil.rmtree(final, ignore_errors=True)
    from ...export import export_checkpoint

    try:
        root.mkdir(exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-{os.getpid()}-", dir=root))
    except OSError as e:
        raise ConfigError(f"--engine ctranslate2: cannot write its cache {root}: {e.strerror or e}") from None
    try:
        # Exported from these bytes, never the file as it is now (training may have replaced it).
        (tmp / "checkpoint.pt").write_bytes(blob)
        try:
            export_checkpoint(tmp / "checkpoint.pt", "ctranslate2", tmp / "model")
        except AttnkitError as e:  # named by the user's file, not the copy it was exported from
            said = str(e).replace(str(tmp / "checkpoint.pt"), str(checkpoint))
            raise type(e)(f"--engine ctranslate2: {checkpoint}: {said}") from None
        try:
            os.rename(tmp / "model", final)  # atomic; fails if another process's export is there
        except OSError:
            if not (final / "model.bin").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"exported {checkpoint} to CTranslate2: {final}")
    prune_cache(root, keep=final)
    return final


def prune_cache(root: Path, *, keep: Path) -> None:
    """Remove the exports of the checkpoint's earlier contents, and the half-written exports of
    processes that are gone: the cache holds what is current, not one export per version of a
    checkpoint_last.pt that training replaces (a server started after every validation would
    otherwise leave one model's worth of disk each time). A process that loaded an older export has
    its files open or in memory already."""
    import time

    from ...processes import alive

    for entry in root.iterdir():
        if entry == keep or not entry.is_dir():
            continue
        try:
            if time.time() - entry.stat().st_mtime < 60:  # just made: another process may be opening it
                continue
        except OSError:
            continue
        if entry.name.startswith("."):  # .KEY-PID-XXXX: an export under way, or a killed one's
            pid = entry.name.split("-")[1] if entry.name.count("-") >= 2 else ""
            if pid.isdigit() and alive(int(pid)):
                continue
        shutil.rmtree(entry, ignore_errors=True)
