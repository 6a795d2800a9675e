"""``attnkit evaluate``: score a checkpoint on its test split or on files.

The checkpoint's task scores it (``TaskInfo.evaluate``, with the metrics that task defines),
through its one evaluation function, the one its training validation calls, so ``--split val`` with the
validation's options prints the validation's number. A flag that only some tasks read
(``TaskInfo.evaluate_flags``) given for another is one line naming who reads it.
"""

from __future__ import annotations

import importlib

from ..errors import ConfigError
from .common import add_decoding_flags

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
    from ..tasks import task_of, tasks

    state = load_checkpoint(args.checkpoint)
    task = task_of(state, args.checkpoint)
    for flag in TASK_FLAGS:  # each task says which of them it reads
        if getattr(args, flag.lstrip("-").replace("-", "_")) and flag not in task.evaluate_flags:
            takers = [t.noun for t in tasks() if flag in t.evaluate_flags]
            raise ConfigError(f"{flag} is for {' and '.join(takers) or 'no loaded task'}; {give(task)}")
    if args.batch_tokens is None:
        valid = (state.get("experiment") or {}).get("valid") or {}
        args.batch_tokens = int(valid.get("batch_tokens", 8000))
    if task.evaluate is None:
        raise ConfigError(f"{task.noun} has no evaluation")
    module, _, function = task.evaluate.partition(":")
    getattr(importlib.import_module(module), function)(args, state)


def open_wrapper(args, state):
    """The checkpoint's inference wrapper, as its task opens it."""
    from ..tasks import task_of

    return task_of(state).open(state, device=args.device, path=args.checkpoint)


def give(task) -> str:
    """What a task scores instead of its training corpus' test split."""
    files = [f for f in ("--src", "--input") if f in task.evaluate_flags]
    return (
        f"give {files[0]}" + (" and --ref" if files[0] == "--src" else "")
        if files
        else "give a checkpoint with data"
    )


def records_to_score(args, state, labels=()) -> tuple[list, str]:
    """(records, what they are) to score: ``--input``, or a split of the training data (its test split)."""
    from ..data.examples import load_records
    from ..data.readers import read_labelled, read_lines
    from ..tasks import task_of

    records = task_of(state).records
    if args.input:
        if args.split or args.data_dir:
            raise ConfigError("--split and --data-dir choose the training corpus' split: not with --input")
        rows = read_labelled(args.input, labels) if records == "labelled" else read_lines(args.input)
        return rows, args.input
    data = test_data(state, args)
    if records == "text" and data.records == "pairs" and data.corpus == "multi30k":
        # a language model trained before single-language corpora read the target side
        data = data.from_dict({**data.to_dict(), "lang": data.tgt_lang, "src_lang": "de", "tgt_lang": "en"})
    spec = data.spec("test", labels=labels, records=records)
    return load_records(data, "test", records, labels=labels), spec.describe()


def test_data(state: dict, args):
    """The data section the checkpoint was trained with, its test split changed by --split/--data-dir."""
    from ..data.config import DataConfig
    from ..tasks import task_of

    task = task_of(state)
    experiment = state.get("experiment")
    data = experiment.get("data") if isinstance(experiment, dict) else None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{args.checkpoint} holds no experiment config (no test split): {give(task)}")
    data = DataConfig.from_saved(data)  # only the data section: the model was rebuilt from model_config
    if task.records == "pairs" and data.records != "pairs":
        raise ConfigError(f"evaluate measures translations; this model was trained on {data.records} records")
    changes = {}
    if args.split:
        if data.corpus not in ("multi30k", "langid", "hf", "wmt14"):
            raise ConfigError(
                f"--split names a split of a multi30k, langid, wmt14 or hf corpus; this model was trained on "
                f"corpus {data.corpus!r}: {give(task)}"
            )
        changes["test_split"] = args.split
    if args.data_dir:
        if data.corpus not in ("multi30k", "langid", "wmt14"):
            raise ConfigError(
                f"--data-dir is for Multi30k and WMT14; this model was trained on corpus {data.corpus!r}"
            )
        changes["data_dir"] = args.data_dir
    data = data.replace(**changes) if changes else data
    if not data.has_split("test"):
        raise ConfigError(f"the training config has no test split (data.test_files is empty): {give(task)}")
    return data
