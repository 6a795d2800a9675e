"""The run's ``metrics.csv``: a row per log line (training loss, lr, speed) and per validation.

Rows are appended as the run goes, so a killed run keeps every row it logged, and a resumed run
continues the same file (:mod:`.run_folder` trims rows past the resumed step).
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..files import atomic_write

TRAIN_FIELDS = ["step", "epoch", "elapsed_s", "lr", "train_loss", "train_nll", "tokens_per_s"]


@dataclass
class Window:
    """Training loss and tokens since the last log line."""

    loss: float = 0.0
    nll: float = 0.0
    tokens: int = 0
    start: float = field(default_factory=time.monotonic)

    def add(self, loss: float, nll: float, tokens: int) -> None:
        self.loss, self.nll, self.tokens = self.loss + loss, self.nll + nll, self.tokens + tokens


def append_row(path: Path, metrics: tuple[str, ...], row: dict) -> None:
    """Append ``row`` to the CSV at ``path`` (training fields, then ``val_`` + each validation metric),
    writing the header first when the file is new.

    A run resumed with another ``valid.metric`` may report a column the file lacks: the file is then
    rewritten with it added (blank in the older rows), so every row stays under its own header.
    """
    fields = [*TRAIN_FIELDS, *(f"val_{name}" for name in metrics)]
    header = _header(path)
    if header:
        missing = [name for name in fields if name not in header]
        fields = header + missing
        if missing:
            _rewrite(path, fields)
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        if not header:
            writer.writeheader()
        writer.writerow(row)


def _header(path: Path) -> list[str]:
    """The CSV's column names; [] when the file is new or empty."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return next(csv.reader(f), [])


def _rewrite(path: Path, fields: list[str]) -> None:
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    with atomic_write(path, newline="") as f:  # a kill mid-way keeps the old file whole
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
