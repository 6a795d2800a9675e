"""``attnkit evaluate`` of a reversal model: exact-match accuracy on its test split."""

from __future__ import annotations

from attnkit.plugin.evaluation import test_data


def run(args, state: dict) -> None:
    from attnkit.data.corpus import load_corpus  # torch: imported by a run, not by a --help

    from .reverser import Reverser

    spec = test_data(state, args).spec("test")
    pairs = load_corpus(spec)
    accuracy = Reverser.from_state(state, device=args.device, path=args.checkpoint).accuracy(pairs)
    print(f"{spec.describe()}, {len(pairs)} sequences")
    print(f"exact {100 * accuracy:.2f}")
