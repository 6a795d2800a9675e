"""``attnkit evaluate`` for this task: what it prints for a checkpoint."""

from __future__ import annotations

from ...plugin.evaluation import open_wrapper, records_to_score


def add_flags(add) -> None:
    add("--input", help="a label<TAB>text file (instead of --split)")
    add("--confusion", help="write the confusion matrix to this PNG")


def run(args, state: dict) -> None:
    from ...files import check_output_path
    from . import plot_confusion_matrix

    if args.confusion:
        check_output_path(args.confusion, what="--confusion")
    clf = open_wrapper(args, state)
    examples, label = records_to_score(args, state, clf.labels)
    report = clf.evaluate(examples, batch_tokens=args.batch_tokens)
    print(f"{label}: {len(examples)} examples")
    print(report.format())
    if args.confusion:
        print(f"wrote {plot_confusion_matrix(report, args.confusion)}")
