"""What a task's evaluation (its package's ``evaluate_command``, run by ``attnkit evaluate``) builds on: the
checkpoint's wrapper, the records to score (``--input`` or a split of the training corpus), and the
line that says what to give instead of a test split."""

from __future__ import annotations

import sys

from ..errors import ConfigError


def open_wrapper(args, state):
    """The checkpoint's inference wrapper, as its task opens it."""
    from . import task_of

    return task_of(state).load("open")(state, device=args.device, path=args.checkpoint)


def give(task) -> str:
    """What a task scores instead of its training corpus' test split."""
    from .flags import task_flags

    files = [f for f in ("--src", "--input") if f in task_flags(task, "evaluate")]
    return (
        f"give {files[0]}" + (" and --ref" if files[0] == "--src" else "")
        if files
        else "give a checkpoint with data"
    )


def records_to_score(args, state, labels=()) -> tuple[list, str]:
    """(records, what they are) to score: ``--input``, or a split of the training data (its test split)."""
    from ..data.examples import load_records
    from ..data.readers import read_labelled, read_lines
    from . import task_of

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
    from . import task_of

    task = task_of(state)
    experiment = state.get("experiment")
    data = experiment.get("data") if isinstance(experiment, dict) else None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{args.checkpoint} holds no experiment config (no test split): {give(task)}")
    data = DataConfig.from_saved(data)  # only the data section: the model was rebuilt from model_config
    if not args.data_dir:
        data, moved = data.found_here()
        if moved:
            print(f"attnkit evaluate: {moved} (give --data-dir to choose)", file=sys.stderr, flush=True)
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
