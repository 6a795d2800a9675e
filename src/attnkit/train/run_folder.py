"""The output folder of a training run: one run at a time, and nothing of an old run lost early.

- **Lock**: an exclusive ``flock`` on ``output_dir/.lock`` for the whole run, taken before anything
  else; a second training into the folder fails at once, naming the folder and the holder's pid.
  The kernel drops the lock when the process ends, however it ends (kill -9 included).
- **Leftovers**: temporary files of a write that a killed run never finished are removed under the
  lock (no live run can own them).
- **Write new, then replace**: the files of a run that is being replaced (``--overwrite``, or a run
  killed before its first checkpoint) stay where they are while the new run checks its data, device
  and config. Only when the new run starts writing are they moved into ``.previous-run/``; they are
  deleted once the new run's first checkpoint is safely on disk, and moved back if it fails before
  that (or, after a kill, when the next run starts).
- **Resume**: metrics.csv rows past the resumed step are dropped, so each step is logged once. A
  checkpoint resumed into a folder that holds another run is refused (that run's files would be
  overwritten) unless ``--overwrite`` replaces it, as a fresh run would.
- **Fine-tuning**: ``train.init_from`` inside the folder, as a file a new run there replaces, is
  refused before anything moves.
"""

from __future__ import annotations

import csv
import fcntl
import os
import shutil
from pathlib import Path

from ..errors import ConfigError
from ..files import atomic_write

LOCK = ".lock"
PREVIOUS = ".previous-run"
# The resolved config a run writes: a name of its own, so a user's config.yaml in the folder (a common
# layout: --config exp/config.yaml --output-dir exp) is never written over.
RESOLVED_CONFIG = "resolved_config.yaml"
# What a training run writes into its folder (anything else there belongs to the user).
RUN_FILES = ("checkpoint_*.pt", "metrics.csv", RESOLVED_CONFIG, "learning_curve.png")


class RunFolder:
    """``with RunFolder(path, resume=..., overwrite=...) as folder:`` around a whole training run."""

    def __init__(
        self,
        path: str | Path,
        *,
        resume: str | Path | bool | None,
        overwrite: bool,
        init_from: str | Path | None = None,
    ):
        """``resume``: the checkpoint resumed (True: one of this folder's); ``init_from``: the
        checkpoint fine-tuned from."""
        self.path = Path(path)
        self.overwrite, self.init_from = overwrite, init_from
        # resuming this folder's own run continues it; a checkpoint from elsewhere starts this folder anew
        self.resume = resume is True or (bool(resume) and _inside(Path(str(resume)).parent, self.path))
        self.resumed_from = None if resume in (None, False, True) else Path(str(resume))
        self._lock_fd: int | None = None
        self._created = False
        self._set_aside = False

    # -- the lock ----------------------------------------------------------------------------
    def __enter__(self) -> RunFolder:
        self.acquire()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.release(failed=exc_type is not None)

    def acquire(self) -> None:
        """Lock the folder, clean a killed run's leftovers, refuse to clobber a run by accident."""
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"output_dir {self.path} is a file, not a folder")
        if not self.path.exists():
            try:
                self.path.mkdir(parents=True)
            except OSError as e:
                raise ConfigError(f"cannot create output_dir {self.path}: {e.strerror or e}") from None
            self._created = True
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ConfigError(
                f"output_dir {self.path} is in use by another training (pid {holder}); wait for it to "
                "finish or choose another output_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd
        self._restore_interrupted_replacement()
        self._remove_leftovers()
        checkpoints = sorted(p.name for p in self.path.glob("checkpoint_*.pt"))
        if not self.resume and checkpoints and not self.overwrite:
            self.release(failed=True)
            if self.resumed_from is not None:
                raise ConfigError(
                    f"{self.path} holds another training run than {self.resumed_from}'s: resume into "
                    f"--output-dir {self.resumed_from.parent}, choose an empty output_dir, or pass "
                    "--overwrite to replace that run"
                )
            if "checkpoint_last.pt" not in checkpoints:  # a model copied there, say: no run to resume
                raise ConfigError(
                    f"{self.path} holds {', '.join(checkpoints[:3])}, which a new run would replace: "
                    "choose another output_dir, or pass --overwrite"
                )
            raise ConfigError(
                f"{self.path} already holds a training run: resume it with --resume "
                f"{self.path / 'checkpoint_last.pt'}, choose another output_dir, or pass --overwrite"
            )
        init = Path(str(self.init_from)) if self.init_from else None
        if (
            init is not None
            and not self.resume
            and init.resolve() in {p.resolve() for p in self.old_run_files()}
        ):
            self.release(failed=True)
            raise ConfigError(
                f"train.init_from {init} is in output_dir {self.path}, whose run files this run replaces: "
                "copy it elsewhere or choose another output_dir"
            )

    def release(self, *, failed: bool) -> None:
        if self._lock_fd is None:
            return
        if failed and self._set_aside:
            self._put_back()
        fd, self._lock_fd = self._lock_fd, None
        os.ftruncate(fd, 0)  # no pid of a finished run left in it (the file stays: unlinking races)
        os.close(fd)  # drops the flock
        if failed and self._created and {p.name for p in self.path.iterdir()} <= {LOCK}:
            shutil.rmtree(self.path, ignore_errors=True)  # a run that failed its checks leaves no folder

    # -- write new, then replace --------------------------------------------------------------
    def old_run_files(self) -> list[Path]:
        return sorted({p for pattern in RUN_FILES for p in self.path.glob(pattern) if p.is_file()})

    def start_writing(self, step: int = 0) -> None:
        """Call once the new run has passed every check, before it writes its first file.

        A fresh run moves the previous run's files aside (a rename, nothing is deleted yet); a run
        resumed at ``step`` keeps them and trims metrics.csv to that step instead.
        """
        if self.resume:
            self.trim_metrics(step)
            return
        old = self.old_run_files()
        if not old:
            return
        aside = self.path / PREVIOUS
        aside.mkdir(exist_ok=True)
        for path in old:
            os.replace(path, aside / path.name)
        self._set_aside = True

    def first_checkpoint_written(self) -> None:
        """The new run has a checkpoint on disk: the old run's files can go now."""
        if self._set_aside:
            shutil.rmtree(self.path / PREVIOUS, ignore_errors=True)
            self._set_aside = False

    def _put_back(self) -> None:
        """The new run failed before its first checkpoint: the old run's files come back."""
        aside = self.path / PREVIOUS
        for path in self.old_run_files():
            path.unlink()
        for path in aside.iterdir():
            os.replace(path, self.path / path.name)
        aside.rmdir()
        self._set_aside = False

    def _restore_interrupted_replacement(self) -> None:
        """A run killed while replacing another: if it never wrote a checkpoint, the old run returns."""
        aside = self.path / PREVIOUS
        if not aside.is_dir():
            return
        if (self.path / "checkpoint_last.pt").exists():
            shutil.rmtree(aside, ignore_errors=True)  # the replacement had succeeded
        else:
            self._set_aside = True
            self._put_back()

    def _remove_leftovers(self) -> None:
        patterns = [f".{name}.*.tmp" for name in RUN_FILES] + [".*.probe"]
        for pattern in patterns:
            for path in self.path.glob(pattern):
                path.unlink(missing_ok=True)

    # -- metrics ------------------------------------------------------------------------------
    def trim_metrics(self, step: int) -> int:
        """Drop metrics.csv rows logged after ``step`` (a resumed run logs them again); returns how many."""
        path = self.path / "metrics.csv"
        if not path.exists():
            return 0
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        complete = lines if text.endswith("\n") else lines[:-1]  # a kill can cut the last row short
        reader = csv.DictReader(complete)
        fields, rows = reader.fieldnames, list(reader)
        keep = [r for r in rows if None not in r.values() and (s := _step(r)) is not None and s <= step]
        if len(keep) == len(rows) == len(lines) - 1 or not fields:
            return 0
        with atomic_write(path, newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(keep)
        return len(lines) - 1 - len(keep)


def _step(row: dict) -> int | None:
    try:
        return int(row.get("step") or "")
    except ValueError:
        return None


def _inside(folder: Path, path: Path) -> bool:
    """Whether ``folder`` is ``path`` (both resolved)."""
    try:
        return folder.resolve() == path.resolve()
    except OSError:
        return False
