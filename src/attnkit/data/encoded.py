"""What a task hands the training loop: examples ready to batch, their lengths for the sampler, and
which of them each epoch reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Encoded:
    """Examples ready to batch, their (source, target) lengths for the sampler, and what was dropped."""

    examples: Sequence[Any]
    lengths: Sequence[tuple[int, int]] | np.ndarray  # (N, 2): source and target positions per example
    dropped: str = ""  # a sentence for the log ("skipped 3 pairs with an empty side"), or ""
    corpus: Any = None  # what a task keeps to re-encode the examples each epoch (subword sampling), or None
    epoch_size: Callable[[int], int] | None = None  # how many leading examples epoch e trains on (None: all)
    epoch_indices: Callable[[int], np.ndarray] | None = None  # which examples epoch e trains on (data.mix)
