"""``attnkit evaluate`` of a reversal model: exact-match accuracy on its test split."""

from __future__ import annotations

from attnkit.data.corpus import load_corpus
from attnkit.plugin.evaluation import test_data

from .reverser import Reverser


def run(args, state: dict) -> None:
    spec = test_data(state, args).spec("test")
    pairs = load_corpus(spec)
    accuracy = Reverser.from_state(state, device=args.device, path=args.checkpoint).accuracy(pairs)
    print(f"{spec.describe()}, {len(pairs)} sequences")
    print(f"exact {100 * accuracy:.2f}")
