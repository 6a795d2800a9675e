"""What a long-running command tells the person waiting for it, on stderr, one way for every command:
a bar on a terminal (tqdm: its count, rate and time left), else, as in a log or a pipe, one line a
step with the same three. ``heads``, ``prune``, ``prepare`` and ``export`` report through
:class:`Progress`; training's log lines give their rate and time left in the same words (:func:`pace`).
"""

from __future__ import annotations

import sys
import time


def duration(seconds: float) -> str:
    """``4h05m``, ``7m30s`` or ``45s``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def pace(done: int, total: int | None, seconds: float, unit: str) -> str:
    """``2.10 step/s, about 11m54s left``: the rate of ``done`` in ``seconds``, and what the rest of
    ``total`` would take at it (no time left said at the end, or with no total)."""
    rate = done / max(seconds, 1e-9)
    said = f"{rate:.2f} {unit}/s"
    if total is not None and done < total and rate > 0:
        said += f", about {duration((total - done) / rate)} left"
    return said


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Progress:
    """A count toward ``total`` units of ``what``: a bar on a terminal; elsewhere a line a step, each
    with its count, rate and time left."""

    def __init__(self, total: int | None, what: str, unit: str, *, every_s: float = 0.0):
        from tqdm import tqdm

        self.what, self.unit, self.total, self.done, self.start = what, unit, total, 0, time.monotonic()
        self.every_s, self.said = every_s, float("-inf")  # log lines at most every every_s seconds
        self.bar = tqdm(total=total, desc=what, unit=unit, disable=None, file=sys.stderr, dynamic_ncols=True)

    def step(self, line: str, n: int = 1) -> None:
        """``n`` more units done; ``line`` says what."""
        self.done += n
        if self.bar.disable:
            now = time.monotonic()
            if now - self.said >= self.every_s or self.done == self.total:
                self.said = now
                say(f"{self.what}: {line} ({pace(self.done, self.total, now - self.start, self.unit)})")
        else:
            self.bar.set_postfix_str(line, refresh=False)
            self.bar.update(n)

    def say(self, line: str) -> None:
        """A line above the bar (or in the log)."""
        if self.bar.disable:
            say(line)
        else:
            self.bar.write(line, file=self.bar.fp)

    def close(self) -> None:
        self.bar.close()
