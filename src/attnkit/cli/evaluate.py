"""``attnkit evaluate``: score a checkpoint on its test split or on files.

Translation: sacreBLEU BLEU and chrF. Language model: perplexity and bits per token (``--input``: a
text file). Classifier: accuracy, macro-F1, per-class precision/recall (``--input``: a labelled
``label<TAB>text`` file), and with ``--confusion PNG`` the confusion matrix.
"""

from __future__ import annotations

from ..errors import ConfigError, DataError
from .common import add_decoding_flags

NAME = "evaluate"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="BLEU and chrF on a test split or on files")
    p.add_argument("--checkpoint", required=True)
    p.add_argument(
        "--split", help="split name of the training corpus (multi30k, hf; default: its data.test_split)"
    )
    p.add_argument("--src", help="source file (instead of the training corpus' test split)")
    p.add_argument("--ref", help="reference file (with --src)")
    p.add_argument("--data-dir", help="folder holding multi30k/")
    p.add_argument("--lowercase", action="store_true", help="also report lowercased BLEU, labelled as such")
    p.add_argument("--hyp-output", help="write the detokenized translations to this file")
    p.add_argument("--input", help="LM: a text file; classifier: a label<TAB>text file (instead of --split)")
    p.add_argument("--confusion", help="classifier: write the confusion matrix to this PNG")
    add_decoding_flags(p)


def run(args) -> None:
    from ..checkpoint import load_checkpoint

    state = load_checkpoint(args.checkpoint)
    if state["arch"] in ("lm", "classifier"):
        return run_task(args, state)
    if args.input or args.confusion:
        raise ConfigError("--input and --confusion are for language models and classifiers; use --src/--ref")
    run_translation(args, state)


def _task_records(args, state, records: str, labels=()) -> tuple[list, str]:
    """(records, what they are) to score: ``--input``, or a split of the training data (its test split)."""
    from ..data.readers import read_labelled, read_lines
    from ..train.data import load_records

    if args.input:
        if args.split or args.data_dir:
            raise ConfigError("--split and --data-dir choose the training corpus' split: not with --input")
        rows = read_labelled(args.input, labels) if records == "labelled" else read_lines(args.input)
        return rows, args.input
    data = _test_data(state, args)
    if records == "text" and data.records == "pairs" and data.corpus == "multi30k":
        # a language model trained before single-language corpora read the target side
        data = data.from_dict({**data.to_dict(), "lang": data.tgt_lang, "src_lang": "de", "tgt_lang": "en"})
    spec = data.spec("test", labels=labels, records=records)
    return load_records(data, "test", records, labels=labels), spec.describe()


def run_task(args, state) -> None:
    if args.src or args.ref or args.hyp_output:
        raise ConfigError("--src, --ref and --hyp-output are for translation models; use --input")
    if state["arch"] == "lm":
        from ..generate import LanguageModel

        if args.confusion:
            raise ConfigError("--confusion is for classifiers")
        lm = LanguageModel.from_checkpoint(args.checkpoint, device=args.device)
        texts, label = _task_records(args, state, "text")
        scores = lm.score(texts)
        print(f"{label}: {scores.tokens} tokens")
        print(scores.format())
        return
    from ..classify import Classifier
    from ..files import check_output_path
    from ..task_metrics import plot_confusion_matrix

    if args.confusion:
        check_output_path(args.confusion, what="--confusion")
    clf = Classifier.from_checkpoint(args.checkpoint, device=args.device)
    examples, label = _task_records(args, state, "labelled", clf.labels)
    report = clf.evaluate(examples)
    print(f"{label}: {len(examples)} examples")
    print(report.format())
    if args.confusion:
        print(f"wrote {plot_confusion_matrix(report, args.confusion)}")


def run_translation(args, state: dict) -> None:
    from ..data.corpus import ParallelFilesSpec, load_corpus
    from ..evaluate import evaluate
    from ..files import atomic_write, check_output_path
    from ..translate import Translator

    if bool(args.src) != bool(args.ref):
        raise ConfigError("--src and --ref go together")
    if args.hyp_output:  # checked before the decoding, not after it
        check_output_path(args.hyp_output, what="--hyp-output")
    if args.src and (args.split or args.data_dir):
        raise ConfigError("--split and --data-dir choose the training corpus' split: not with --src/--ref")
    spec = ParallelFilesSpec(args.src, args.ref) if args.src else _test_spec(state, args)
    pairs = load_corpus(spec)
    if pairs and not any(t.strip() for _, t in pairs):  # before decoding, naming the file
        raise DataError(
            f"{args.ref or spec.describe()}: every reference line is empty; nothing to score against"
        )
    translator = Translator.from_state(state, device=args.device)
    result = evaluate(
        translator,
        [s for s, _ in pairs],
        [t for _, t in pairs],
        beam=args.beam,
        length_penalty=args.length_penalty,
        batch_tokens=args.batch_tokens,
        lowercase_bleu=args.lowercase,
    )
    if args.hyp_output:
        with atomic_write(args.hyp_output) as f:
            f.write("".join(h + "\n" for h in result.hypotheses))
    print(f"{spec.describe()}, {len(pairs)} sentences, beam {args.beam}")
    print(result.scores.format())


def _test_spec(state: dict, args):
    """The test split of the corpus the checkpoint was trained on, as its experiment config says."""
    data = _test_data(state, args)
    if data.records != "pairs":
        raise ConfigError(f"evaluate measures translations; this model was trained on {data.records} records")
    return data.spec("test")


def _test_data(state: dict, args):
    """The data section the checkpoint was trained with, its test split changed by --split/--data-dir."""
    from ..data.config import DataConfig

    experiment = state.get("experiment")
    data = experiment.get("data") if isinstance(experiment, dict) else None
    give = "--src and --ref" if state["arch"] not in ("lm", "classifier") else "--input"
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{args.checkpoint} holds no experiment config (no test split): give {give}")
    data = DataConfig.from_saved(data)  # only the data section: the model was rebuilt from model_config
    changes = {}
    if args.split:
        if data.corpus not in ("multi30k", "langid", "hf"):
            raise ConfigError(
                f"--split names a split of a multi30k, langid or hf corpus; this model was trained on corpus "
                f"{data.corpus!r}: give {give}"
            )
        changes["test_split"] = args.split
    if args.data_dir:
        if data.corpus not in ("multi30k", "langid"):
            raise ConfigError(f"--data-dir is for Multi30k; this model was trained on corpus {data.corpus!r}")
        changes["data_dir"] = args.data_dir
    data = data.replace(**changes) if changes else data
    if not data.has_split("test"):
        raise ConfigError(f"the training config has no test split (data.test_files is empty): give {give}")
    return data
