"""``attnkit evaluate`` for this task: what it prints for a checkpoint."""

from __future__ import annotations

from ...plugin.evaluation import open_wrapper, test_data


def run(args, state: dict) -> None:
    """Caption BLEU on the test split of the checkpoint's data (every caption of an image a reference)."""
    from . import evaluate, load_captions
    from .corpus import check_split, references

    data = test_data(state, args)
    records = load_captions(data, "test")
    check_split(records, "test")
    images, refs = references(records)
    captioner = open_wrapper(args, state)
    result = evaluate(captioner, images, refs, beam=args.beam, length_penalty=args.length_penalty)
    print(f"{data.spec('test').describe()}, {len(images)} images, beam {args.beam}")
    print(result.scores.format())
