"""Denormal floats flushed to zero where the model runs, and never where a value is checked.

Denormals (magnitudes below 2.2e-308 in float64, 1.2e-38 in float32) slow CPU math: tiny values
late in training, attention probabilities far below the peak. The CPU's flush-to-zero and
denormals-are-zero flags make them zero, but the flags hold for every float operation on the
thread, Python's own included: under them ``1e-310 > 0`` is False, so a request's ``top_p: 1e-310``
(valid: above the schema's exclusive minimum) would be refused as 0. Hence two scopes:

- :func:`denormals_flushed` around the loops that only compute (the training loop, a Translator's
  batches, the server's decoding thread), and :func:`flush_kernel_threads` for torch's own
  threads, which run nothing but kernels; never on a thread that runs Python code of its own;
- :func:`ieee_arithmetic` around the checks that compare user values (:mod:`attnkit.bounds`,
  the sampling settings), so a check says the same inside a flushed loop as outside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_TINY, _ZERO = 5e-324, 0.0  # the smallest denormal double; names, so nothing folds the comparison


def flushed() -> bool:
    """Whether this thread treats denormals as zero now."""
    return not _TINY > _ZERO


def _set(flag: bool) -> None:
    import torch

    torch.set_flush_denormal(flag)


@contextlib.contextmanager
def denormals_flushed(enabled: bool = True) -> Iterator[None]:
    """Treat denormals as zero on this thread inside the block (unless not ``enabled``); the thread's
    earlier setting again after it."""
    if not enabled or flushed():
        yield
        return
    _set(True)
    try:
        yield
    finally:
        _set(False)


@contextlib.contextmanager
def ieee_arithmetic() -> Iterator[None]:
    """IEEE arithmetic on this thread inside the block, flushed again after it if it was."""
    if not flushed():
        yield
        return
    _set(False)
    try:
        yield
    finally:
        _set(True)


def flush_kernel_threads() -> None:
    """Start torch's intra-op threads (OpenMP) with denormals flushed, then give this thread IEEE
    arithmetic back. A new thread takes its flags from the thread that starts it and the pool's
    threads only run kernels, so the multi-threaded products of the loops above are flushed too,
    while Python's arithmetic on this thread is not. Called once, where a command starts."""
    import torch

    if torch.get_num_threads() > 1:
        with denormals_flushed():
            torch.ones(1 << 17).mul_(2.0)  # an elementwise op large enough to run on the pool


def flush_for_this_thread() -> None:
    """Flush from now on, on a thread that does nothing but run the model (the server's decoder)."""
    _set(True)
