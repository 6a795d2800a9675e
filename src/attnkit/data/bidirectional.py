"""Bidirectional training (Ding et al., 2021), ``train.bidirectional_epochs``: the first epochs also
train on every pair reversed (target -> source), each such epoch twice as long; the rest train as
usual. This module is its one home: what it needs (a task whose examples reverse, one vocabulary for
both languages, no ``data.mix``), the examples it adds, the run header's line, and that a resumed run
keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from .encoded import Encoded
from .store import Pairs

if TYPE_CHECKING:
    from ..experiment import Experiment
    from .tokenizer import SubwordTokenizer

Pair = tuple[list[int], list[int]]  # (source ids, target ids) of one training example


class BidirectionalPairs(Pairs):
    """``pairs`` followed by each pair reversed: example ``N + i`` is ``(pairs[i][1], pairs[i][0])``.

    Bidirectional training (Ding et al., 2021) reads target -> source as well as source -> target;
    with one joint vocabulary a reversed pair is an ordinary example. The reversed half is a view,
    so a subword-sampled epoch reverses the same draw.
    """

    def __init__(self, pairs: Sequence[Pair]):
        self.pairs = pairs

    def __len__(self) -> int:
        return 2 * len(self.pairs)

    def pair(self, i: int) -> Pair:
        n = len(self.pairs)
        s, t = self.pairs[i % n]
        return (s, t) if i < n else (t, s)


def check(cfg: Experiment) -> None:
    """Before any data is read: what the config alone rules out."""
    if cfg.train.bidirectional_epochs and cfg.data.mix:
        raise ConfigError(
            "data.mix with train.bidirectional_epochs: reversed pairs would put tags on targets"
        )


def check_tokenizer(cfg: Experiment, reverses: bool, tokenizer: SubwordTokenizer, arch: str) -> None:
    """With the run's tokenizer: a reversed pair is an ordinary example only in one joint vocabulary,
    and only for a task whose examples are text pairs (``attnkit.plugin.training.TextPairTask``)."""
    if cfg.train.bidirectional_epochs and not (reverses and tokenizer.joint):
        raise ConfigError(
            "train.bidirectional_epochs: training on the reversed pairs needs a translation model and one "
            f"vocabulary for both languages (model.arch {arch}, "
            f"{'a joint' if tokenizer.joint else 'separate'} vocabulary); set train.bidirectional_epochs=0"
        )


def add_reversed(cfg: Experiment, encoded: Encoded) -> None:
    """Append the reversed pairs to ``encoded`` (a view); epochs from ``bidirectional_epochs`` on read
    only the first half."""
    epochs = cfg.train.bidirectional_epochs
    if not epochs:
        return
    kept = np.asarray(encoded.lengths)  # (N, 2): source positions, target positions with bos/eos
    n = len(kept)
    encoded.examples = BidirectionalPairs(encoded.examples)
    encoded.lengths = np.concatenate([kept, kept[:, ::-1] + np.array([-1, 1], dtype=kept.dtype)])
    encoded.epoch_size = lambda epoch: 2 * n if epoch < epochs else n


def forward(examples: Sequence[Pair]) -> Sequence[Pair]:
    """The source -> target pairs of ``examples``, reversed half or not."""
    return examples.pairs if isinstance(examples, BidirectionalPairs) else examples


def like(encoded: Encoded, examples: Sequence[Pair]) -> Sequence[Pair]:
    """``examples`` (another epoch's draw of the same pairs) reversed as ``encoded`` is."""
    return BidirectionalPairs(examples) if isinstance(encoded.examples, BidirectionalPairs) else examples


def note(cfg: Experiment, sampler: Any) -> str | None:
    """The run header's line."""
    epochs = cfg.train.bidirectional_epochs
    if not epochs:
        return None
    n_later = sampler.n_batches(epochs)  # first: epoch 0 stays in the sampler's cache
    return (
        f"bidirectional training: epochs 0-{epochs - 1} also train on the reversed pairs "
        f"({sampler.n_batches(0)} batches each), later epochs the source->target pairs alone "
        f"({n_later} batches)"
    )


def check_resume(saved: Any, cfg: Experiment, path: str | Path) -> None:
    """A resumed run keeps the checkpoint's setting: changing it changes the data of the epochs to come."""
    train = saved.get("train") if isinstance(saved, dict) else None
    was = (train or {}).get("bidirectional_epochs", 0)
    if was != cfg.train.bidirectional_epochs:
        raise ConfigError(
            f"{path}: the run was trained with train.bidirectional_epochs={was}, not "
            f"{cfg.train.bidirectional_epochs}: changing it would change the data of the epochs to come; "
            f"resume with train.bidirectional_epochs={was}"
        )
