"""The run's ``metrics.csv``: a row per log line (training loss, lr, speed) and per validation.

Rows are appended as the run goes, so a killed run keeps every row it logged, and a resumed run
continues the same file (:mod:`.run_folder` trims rows past the resumed step).
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path

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
    writing the header first when the file is new."""
    fields = [*TRAIN_FIELDS, *(f"val_{name}" for name in metrics)]
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        if new:
            writer.writeheader()
        writer.writerow(row)
