"""``attnkit evaluate`` for this task: what it prints for a checkpoint."""

from __future__ import annotations

from ...plugin.evaluation import open_wrapper, records_to_score


def add_flags(add) -> None:
    add("--input", help="a text file (instead of --split)")


def run(args, state: dict) -> None:
    lm = open_wrapper(args, state)
    texts, label = records_to_score(args, state)
    scores = lm.score(texts, batch_tokens=args.batch_tokens)
    print(f"{label}: {scores.tokens} tokens")
    print(scores.format())
