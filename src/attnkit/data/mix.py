"""Several training corpora in one run (``data.mix``): weights per epoch and source tags.

Corpus 0 is the data section's own training split; corpus k is ``data.mix`` entry k. A ``weight``
says how many times per epoch a corpus is read: 2 reads every pair twice, 0.5 a seeded half of them
(a different half each epoch); the main corpus reads once. A ``tag`` (e.g. ``<bt>`` for
back-translated data, ``<2de>`` for a multilingual model) is one token put before each of the
corpus' source sentences; the tokenizer learns it as one piece. The epochs' picks depend on the
run's seed and the epoch only, so a resumed run reads what the uninterrupted one read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from .corpus import ParallelFilesSpec, TsvSpec
from .tokenizer import SubwordTokenizer


@dataclass(frozen=True)
class MixEntry:
    spec: ParallelFilesSpec | TsvSpec
    weight: float
    tag: str


def mix_entries(mix: Sequence[dict[str, Any]]) -> list[MixEntry]:
    """``data.mix`` (checked by the config) as specs with their weight and tag."""
    out = []
    for entry in mix:
        files, tsv = entry.get("files"), entry.get("tsv")
        spec = ParallelFilesSpec(files[0], files[1]) if files else TsvSpec(str(tsv))
        out.append(MixEntry(spec, float(entry.get("weight", 1.0)), str(entry.get("tag", ""))))
    return out


def tags_of(mix: Sequence[dict[str, Any]]) -> list[str]:
    """Every distinct tag of ``data.mix``, in order: the tokenizer's user-defined pieces."""
    return list(dict.fromkeys(str(e.get("tag", "")) for e in mix if e.get("tag")))


def tag_ids(tokenizer: SubwordTokenizer, mix: Sequence[dict[str, Any]]) -> list[int | None]:
    """Per corpus (main first), the id of its source tag, or None; a tag the vocabulary lacks is an error."""
    ids: list[int | None] = [None]
    for entry in mix_entries(mix):
        if not entry.tag:
            ids.append(None)
            continue
        i = tokenizer.piece_id(entry.tag, side="src")
        if i == tokenizer.unk_id or tokenizer.id_to_piece(i, side="src") != entry.tag:
            raise ConfigError(
                f"data.mix tag {entry.tag!r} is not a piece of the tokenizer: a tokenizer attnkit trains "
                "learns every tag; an existing tokenizer.model needs it as a user-defined symbol"
            )
        ids.append(i)
    return ids


def weighted_epochs(
    corpus: np.ndarray, weights: Sequence[float], seed: int
) -> Callable[[int], np.ndarray] | None:
    """The examples of each epoch: corpus k's examples ``weights[k]`` times (a fraction as a seeded subset).

    corpus: (M,) uint8, the corpus of each training example. Returns None when every weight is 1
    (every epoch reads every example once, the sampler's default).
    """
    if all(w == 1 for w in weights):
        return None
    small = np.int32 if len(corpus) < 2**31 else np.int64
    members = [np.flatnonzero(corpus == k).astype(small) for k in range(len(weights))]  # per corpus: (n_k,)

    def indices(epoch: int) -> np.ndarray:
        parts = []
        for k, (idx, w) in enumerate(zip(members, weights, strict=True)):
            whole, frac = int(w), w - int(w)
            parts.extend([idx] * whole)
            if frac and len(idx):
                rng = np.random.default_rng([seed, epoch, k])
                parts.append(np.sort(rng.choice(idx, size=max(1, round(frac * len(idx))), replace=False)))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=small)

    return indices
