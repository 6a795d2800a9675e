"""``attnkit evaluate``: score a checkpoint on its test split or on files.

The checkpoint's task scores it (its package's ``evaluate_command.run``, with the metrics that task defines),
through its one evaluation function, the one its training validation calls, so ``--split val`` with the
validation's options prints the validation's number. A flag that only some tasks read
(``TaskInfo.evaluate_flags``) given for another is one line naming who reads it.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..plugin.evaluation import give
from ..plugin.flags import add_decoding_flags

NAME = "evaluate"
# the flags that only some tasks read: TaskInfo.evaluate_flags says which
TASK_FLAGS = ("--src", "--ref", "--hyp-output", "--lowercase", "--input", "--confusion")


def add_parser(sub) -> None:
    p = sub.add_parser(
        NAME,
        help="score a checkpoint on a split or on files: BLEU, chrF and TER, perplexity, or accuracy and F1",
    )
    p.add_argument("--checkpoint", required=True, help="the checkpoint to evaluate (any task's)")
    p.add_argument(
        "--split",
        help="split name of the training corpus (multi30k, wmt14, hf; default: its data.test_split)",
    )
    p.add_argument("--src", help="source file (instead of the training corpus' test split)")
    p.add_argument(
        "--ref",
        nargs="+",
        help="reference file(s) (with --src); several: multi-reference scores, one line each",
    )
    p.add_argument("--data-dir", help="folder holding multi30k/ or wmt14_de_en/")
    p.add_argument("--lowercase", action="store_true", help="also report lowercased BLEU, labelled as such")
    p.add_argument("--hyp-output", help="write the detokenized translations to this file")
    p.add_argument("--input", help="LM: a text file; classifier: a label<TAB>text file (instead of --split)")
    p.add_argument("--confusion", help="classifier: write the confusion matrix to this PNG")
    add_decoding_flags(
        p, batch_tokens=None, batch_tokens_help="default: the training run's valid.batch_tokens"
    )


def run(args) -> None:
    from ..checkpoint import load_checkpoint
    from ..plugin import task_of, tasks

    state = load_checkpoint(args.checkpoint)
    task = task_of(state, args.checkpoint)
    for flag in TASK_FLAGS:  # each task says which of them it reads
        if getattr(args, flag.lstrip("-").replace("-", "_")) and flag not in task.evaluate_flags:
            takers = [t.noun for t in tasks() if flag in t.evaluate_flags]
            raise ConfigError(f"{flag} is for {' and '.join(takers) or 'no loaded task'}; {give(task)}")
    if args.batch_tokens is None:
        valid = (state.get("experiment") or {}).get("valid") or {}
        args.batch_tokens = int(valid.get("batch_tokens", 8000))
    evaluation = task.part("evaluate_command")
    if evaluation is None:
        raise ConfigError(f"{task.noun} has no evaluation")
    evaluation.run(args, state)
