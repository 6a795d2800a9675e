"""What a training run trained on, as one number a resumed run can compare: a SHA-256 of the examples.

A resume continues the saved sampler position in the saved batch plan; on other data (the corpus
files changed under the same paths, 400 pairs become 100) that position points into another
corpus's plan and the "exact" resume trains on a different order without a word. The checkpoint
therefore keeps a fingerprint of the encoded training examples (the token ids and lengths the
sampler and the loss see), and :func:`check_same_data` refuses a resume whose examples differ.
Hashing the examples rather than the files lets ``data.data_dir`` move (a resume may change it) and
covers files, Hugging Face datasets and prepared stores alike; a store is hashed by its flat arrays
(fast), so a run resumes on the kind of source it started on.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError
from .encoded import Encoded


def fingerprint(encoded: Encoded) -> dict[str, Any]:
    """``{"examples": N, "sha256": ...}`` of the training examples and their lengths."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(np.asarray(encoded.lengths, dtype=np.int64)).tobytes())
    n = len(encoded.examples)
    parts = getattr(encoded.examples, "fingerprint_parts", lambda: None)()
    if parts is not None:  # a store's flat arrays: 4.5M pairs in a fraction of a second
        for part in parts:
            _update(h, np.asarray(part))
    else:
        for i in range(n):
            _update(h, encoded.examples[i])
    return {"examples": n, "sha256": h.hexdigest()}


def _update(h: Any, value: Any) -> None:
    if isinstance(value, np.generic):  # a numpy scalar as the Python number it holds (its repr varies)
        value = value.item()
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        h.update(f"a{value.dtype.str}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (list, tuple)):
        if value and all(type(v) is int for v in value):  # token ids: one array, not one update each
            h.update(f"l{len(value)}".encode())
            h.update(np.asarray(value, dtype=np.int64).tobytes())
            return
        h.update(f"({len(value)}".encode())
        for v in value:
            _update(h, v)
    else:
        h.update(f"{type(value).__name__}:{value!r};".encode())


def check_same_data(saved: Any, now: dict[str, Any], path: str) -> None:
    """Refuse, in one line, a resume of checkpoint ``path`` (fingerprint ``saved``) on other data."""
    if not isinstance(saved, dict) or "sha256" not in saved:
        return  # written before fingerprints: nothing to compare
    if saved["sha256"] == now["sha256"]:
        return
    then = saved.get("examples")
    count = (
        f"{then:,} training examples then, {now['examples']:,} now"
        if isinstance(then, int) and then != now["examples"]
        else f"the same {now['examples']:,} examples in number, other in content"
    )
    raise ConfigError(
        f"--resume: the training data changed since {path} was written ({count}): resume on the data "
        "it was trained on, or start a new run"
    )
