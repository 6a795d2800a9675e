"""``attnkit evaluate``: score a checkpoint on its test split or on files.

The checkpoint's task scores it (its package's ``evaluate_command.run``, with the metrics that task defines),
through its one evaluation function, the one its training validation calls, so ``--split val`` with the
validation's options prints the validation's number. Each task adds its own flags
(``evaluate_command.add_flags``); one given for a checkpoint of another task is one line naming who
reads it.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..plugin.evaluation import give
from ..plugin.flags import add_decoding_flags, add_task_flags, check_task_flags

NAME = "evaluate"


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
    p.add_argument("--data-dir", help="folder holding multi30k/ or wmt14_de_en/")
    add_task_flags(p, NAME)  # each task's own: --src and --ref, --input, ...
    add_decoding_flags(
        p, batch_tokens=None, batch_tokens_help="default: the training run's valid.batch_tokens"
    )


def run(args) -> None:
    from ..checkpoint import load_checkpoint
    from ..plugin import task_of

    state = load_checkpoint(args.checkpoint)
    task = task_of(state, args.checkpoint)
    check_task_flags(args, task, NAME, give(task))
    if args.batch_tokens is None:
        valid = (state.get("experiment") or {}).get("valid") or {}
        args.batch_tokens = int(valid.get("batch_tokens", 8000))
    evaluation = task.part("evaluate_command")
    if evaluation is None:
        raise ConfigError(f"{task.noun} has no evaluation")
    evaluation.run(args, state)
