"""What a training run leaves behind, as :func:`attnkit.train.train` returns it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class TrainResult:
    output_dir: Path
    step: int
    metric: str  # the validation metric that picked the best checkpoint, e.g. "bleu"
    best_score: float
    best_checkpoint: Path | None
    last_checkpoint: Path | None
    averaged_checkpoint: Path | None
    metrics_csv: Path
    curve_png: Path | None
