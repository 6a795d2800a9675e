"""The checkpoints a run keeps in its output folder, and their average at the end.

checkpoint_last.pt at every validation (what --resume continues), checkpoint_best.pt when the
validation metric improved, checkpoint_step<N>.pt for the last ``valid.keep_last`` validations, and
checkpoint_averaged.pt: the mean of the last ``valid.average_last`` of those (Vaswani et al. average
the last 5 or 20 checkpoints).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..checkpoint import average_checkpoints, copy_checkpoint, save_checkpoint


class CheckpointFiles:
    def __init__(self, out: Path, keep_last: int, average_last: int):
        self.out, self.keep_last, self.average_last = out, keep_last, average_last
        self.last, self.best = out / "checkpoint_last.pt", out / "checkpoint_best.pt"

    def save(self, state: dict[str, Any], step: int, *, improved: bool) -> None:
        """Write the validated state of ``step`` once, as checkpoint_last.pt; the best and step
        checkpoints of the same step are copies of that file (as fairseq copies its checkpoint_last:
        serializing a big model is the slow part). Step checkpoints beyond ``keep_last`` go."""
        save_checkpoint(state, self.last)
        if improved:
            copy_checkpoint(self.last, self.best)
        if self.keep_last:
            copy_checkpoint(self.last, self.out / f"checkpoint_step{step}.pt")
            for old in self.steps()[: -self.keep_last]:
                old.unlink()

    def steps(self) -> list[Path]:
        """The step checkpoints on disk, oldest first."""
        return sorted(
            self.out.glob("checkpoint_step*.pt"), key=lambda p: int(p.stem.removeprefix("checkpoint_step"))
        )

    def average(self) -> Path | None:
        """checkpoint_averaged.pt from the last ``average_last`` step checkpoints (None: fewer than 2)."""
        n = self.average_last
        paths: list[str | Path] = list(self.steps()[-n:]) if n else []
        if len(paths) < 2:
            return None
        return save_checkpoint(average_checkpoints(paths), self.out / "checkpoint_averaged.pt")
