"""The examples ``attnkit heads`` and ``attnkit prune`` score a checkpoint on.

By default the validation split of the corpus the model was trained on; ``--split`` names another
split of it, and ``--input`` (a language model's text, a classifier's label<TAB>text) or
``--src``/``--ref`` (a translation's sentence pairs) give files instead, read as ``attnkit evaluate``
reads them. The task's own ``restore`` takes back what the checkpoint kept of its training data (a
classifier's labels), so no training split is read.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError
from ..plugin.flags import positive_int

FILE_FLAGS = ("--src", "--ref", "--input")  # read by the tasks whose evaluate adds them


@dataclass
class Scored:
    """A checkpoint's model and task, and the examples to score it on (encoded, and in batches)."""

    state: dict
    model: Any
    tokenizer: Any
    task: Any  # the task as training sees it: its loss() and validate()
    valid: Any  # Encoded
    records: list
    batches: list
    described: str  # where the examples came from, for the progress line and the JSON


def add_data_flags(p) -> None:
    p.add_argument("--split", help="a split of the training corpus (default: its validation split)")
    p.add_argument("--src", help="translation: a source file to score on (with --ref)")
    p.add_argument("--ref", help="translation: its reference file")
    p.add_argument("--input", help="LM: a text file; classifier: a label<TAB>text file")
    p.add_argument("--data-dir", help="the folder the training corpus is in, if it moved")
    p.add_argument("--max-sentences", type=positive_int, default=200, help="examples scored (default 200)")


def scored_data(args, out: Path, state: dict | None = None) -> Scored:
    """The checkpoint (``state``, when read already) with the first ``--max-sentences`` examples it is
    scored on; every flag checked before any data is read."""
    from ..checkpoint import load_checkpoint
    from ..files import check_output_path
    from ..heads import attention_heads
    from ..plugin import task_of
    from ..plugin.flags import flag_readers
    from ..plugin.training import batches
    from ..train.config import ExperimentConfig

    state = load_checkpoint(args.checkpoint) if state is None else state
    info = task_of(state, args.checkpoint)
    readers = flag_readers("evaluate")  # the files heads reads are the ones evaluate reads
    for flag in FILE_FLAGS:
        if getattr(args, flag[2:]) and info not in readers.get(flag, []):
            takers = " and ".join(t.noun for t in readers.get(flag, []))
            raise ConfigError(f"{flag} is for {takers}; {info.noun} scores its own corpus")
    if bool(args.src) != bool(args.ref):
        raise ConfigError("--src and --ref go together")
    files = args.src or args.input
    if files and (args.split or args.data_dir):
        raise ConfigError("--split and --data-dir choose the training corpus' split: not with files")
    saved = state.get("experiment")
    if not (isinstance(saved, dict) and saved) and not files:
        raise ConfigError(f"{args.checkpoint} holds no experiment config (no validation split): give files")
    check_output_path(out / "heads.json", what="--output", make_folders=True)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(saved, dict) and saved:
        cfg = ExperimentConfig.from_saved(saved)
    else:
        cfg = ExperimentConfig.from_dict({"model": {"arch": state["arch"]}} if "arch" in state else {})
    if args.data_dir:
        cfg.data = cfg.data.replace(data_dir=args.data_dir)
    else:
        cfg.data, moved = cfg.data.found_here()
        if moved:
            print(f"attnkit heads: {moved} (give --data-dir to choose)", file=sys.stderr, flush=True)
    cfg.valid.max_sentences = args.max_sentences
    wrapper = info.load("open")(state, device=args.device, path=args.checkpoint)
    model, tokenizer, dev = wrapper.model, wrapper.tokenizer, wrapper.device
    attention_heads(model)  # a model without heads: one line, before the data is read
    task = info.load("training")(cfg)
    task.restore(state)
    records, described = _records(args, state, task, cfg)
    records = records[: args.max_sentences]
    if not records:
        raise DataError(f"{described}: no examples to score")
    max_len = min(cfg.data.max_len, model.config.max_len - 1)
    valid = task.encode(records, tokenizer, max_len, split="valid")
    collate = lambda ex: task.collate(ex, tokenizer)  # noqa: E731
    data = list(batches(collate, valid.examples, valid.lengths, cfg.valid.batch_tokens, dev))
    return Scored(state, model, tokenizer, task, valid, records, data, described)


def _records(args, state: dict, task, cfg) -> tuple[list, str]:
    """The raw records and what they are: files, a named split, or the validation split."""
    from ..data.corpus import ParallelFilesSpec, load_corpus
    from ..plugin.evaluation import records_to_score

    if args.src:
        return load_corpus(ParallelFilesSpec(args.src, args.ref)), f"{args.src} -> {args.ref}"
    if args.input or args.split:
        return records_to_score(args, state, task.checkpoint_fields().get("labels", ()))
    return task.load(cfg.data, "valid"), "the validation split"
