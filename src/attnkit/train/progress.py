"""What a training run reports as it goes: the progress bar (or, without one, a log line every
``log_every`` steps with its rate and the time left, and one after the first step), ``metrics.csv``,
and TensorBoard. Rank 0 alone
writes; the other ranks keep the same calls and write nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..report import pace
from .metrics_csv import Window, append_row
from .tensorboard_log import TensorBoardLog


class Progress:
    """One run's reports, from :meth:`start` to :meth:`close`."""

    def __init__(self, train, *, main: bool, world_size: int, metrics: tuple[str, ...], log: Callable):
        self.t, self.main, self.world_size, self.metrics, self.log = train, main, world_size, metrics, log
        self.board: TensorBoardLog | None = None
        self.window = Window()
        self.window_steps = 0  # optimizer steps in the window
        self.first = 0  # the run's first step, said once done where no bar shows it (0: said)

    def start(self, out: Path, step: int) -> None:
        """The bar from ``step``; rank 0's TensorBoard log (asked for by ``train.tensorboard``)."""
        from tqdm import tqdm

        shown = self.t.progress and self.main
        self.bar = tqdm(
            total=self.t.max_steps, initial=step, disable=not shown or None, unit="step", dynamic_ncols=True
        )
        self.csv_path = out / "metrics.csv"
        if self.main and self.t.tensorboard:
            self.board = TensorBoardLog(out)
        self.first = step + 1

    def step(self, step: int, loss: tuple[float, float, int], row: Callable[[Window], dict]) -> None:
        """After optimizer step ``step`` with its (loss sum, nll sum, tokens): the bar, and the log
        line, CSV row and TensorBoard scalars (``row(window)``: the trainer's fields) when due."""
        self.window.add(*loss)
        self.window_steps += 1
        self.bar.update(1)
        if self.first and self.bar.disable and step % self.t.log_every:
            if self.main and self.t.progress:
                every = self.t.log_every
                self.log(
                    f"step {self.first} done after {row(self.window)['elapsed_s']:.1f}s; a line every "
                    f"{every} steps from here"
                )
            self.first = 0
        if step % self.t.log_every == 0 or step == self.t.max_steps:
            self._log_window(row(self.window))
            self.window, self.window_steps = Window(), 0

    def _log_window(self, row: dict) -> None:
        self.bar.set_postfix(loss=row["train_loss"], lr=row["lr"], tok_s=row["tokens_per_s"])
        if self.board:
            keys = ("train_loss", "train_nll", "lr", "tokens_per_s", "grad_norm")
            self.board.scalars("train", row["step"], {k: row[k] for k in keys})
        if self.bar.disable and self.main and self.t.progress:
            self.log(
                f"step {row['step']}/{self.t.max_steps} loss {row['train_loss']:.3f} lr {row['lr']} "
                f"{row['tokens_per_s']} tok/s elapsed {row['elapsed_s']:.0f}s{self._pace(row['step'])}"
            )
        self.write({k: v for k, v in row.items() if k != "grad_norm"})

    def _pace(self, step: int) -> str:
        """The window's steps per second, and the time the steps left would take at that rate
        (validations and checkpoints come on top): what a bar would show."""
        seconds = time.monotonic() - self.window.start
        left = self.t.max_steps - step
        return ", " + pace(self.window_steps, self.window_steps + left, seconds, "step")

    def window_row(self, w: Window) -> dict:
        """The speed part of a log row: tokens per second over the window, every process's."""
        return {"tokens_per_s": round(w.tokens * self.world_size / max(time.monotonic() - w.start, 1e-9))}

    def write(self, row: dict) -> None:
        if self.main:
            append_row(self.csv_path, self.metrics, row)

    def close(self) -> None:
        self.bar.close()
        if self.board:
            self.board.close()
