"""Stopping a training run on SIGTERM or SIGINT at a step boundary, with a checkpoint (see the trainer)."""

from __future__ import annotations

import signal
import threading

import torch

from . import distributed as ddp


class StopSignals:
    """``with StopSignals() as stop:`` around the loop: SIGTERM or SIGINT only sets ``stop.signum``,
    and the loop stops at its next step boundary.

    A second signal acts at once, as the previous handler would have (SIGTERM's default ends the
    process, SIGINT's raises KeyboardInterrupt). It goes through a Python handler rather than the
    previous one reinstalled: two signals that arrive together are both run by whatever handler is
    set when Python gets to them, and CPython drops a signal whose handler became the default in
    between. A signal that was ignored (``nohup``, a background job) stays ignored. Only the main
    thread can install handlers; in another thread nothing changes.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, signal.Handlers | object] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                previous = signal.getsignal(signum)
                if previous is signal.SIG_IGN or previous is None:  # None: set outside Python, keep it
                    continue
                self._previous[signum] = previous
                signal.signal(signum, self._first)
        return self

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]  # what getsignal returned
        self._previous = {}

    def _first(self, signum: int, frame) -> None:
        self.signum = signum
        for other in self._previous:
            signal.signal(other, self._again)

    def _again(self, signum: int, frame) -> None:
        previous = self._previous.get(signum, signal.SIG_DFL)
        self.__exit__()
        if callable(previous):
            previous(signum, frame)  # SIGINT's default: KeyboardInterrupt
        else:
            signal.raise_signal(signum)  # the default action: the process ends here


def agreed_signal(stop: StopSignals, dist: ddp.DistInfo, device: torch.device) -> int | None:
    """The signal that stops the run at this step boundary, the same on every rank (or None)."""
    if not dist.enabled:
        return stop.signum
    # one all-reduce of one number: SIGTERM on any rank (world_size + 1) outweighs SIGINT on all (1 each)
    world = dist.world_size
    weights: dict[int, int] = {signal.SIGINT: 1, signal.SIGTERM: world + 1}
    mine = weights.get(stop.signum or 0, 0)
    total = ddp.all_reduce_sum(float(mine), dist, device)
    return signal.SIGTERM if total > world else signal.SIGINT if total else None
