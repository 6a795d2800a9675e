"""``attnkit evaluate``: score a checkpoint on its test split or on files.

Each task scores through its one evaluation function, the one its training validation calls, so
``--split val`` with the validation's options prints the validation's number.
Translation: sacreBLEU BLEU, chrF and TER, against several references per sentence when ``--ref``
names several files. Captioner: caption BLEU and chrF on its test split, every caption of an image a
reference. Language model: perplexity and bits per token (``--input``: a
text file). Classifier: accuracy, macro-F1, per-class precision/recall (``--input``: a labelled
``label<TAB>text`` file), and with ``--confusion PNG`` the confusion matrix.
"""

from __future__ import annotations

from ..errors import ConfigError, DataError
from .common import add_decoding_flags

NAME = "evaluate"


def add_parser(sub) -> None:
    p = sub.add_parser(
        NAME,
        help="score a checkpoint on a split or on files: BLEU, chrF and TER, perplexity, or accuracy and F1",
    )
    p.add_argument("--checkpoint", required=True)
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
    from ..tasks import task_of

    state = load_checkpoint(args.checkpoint)
    task = task_of(state, args.checkpoint)
    if task.name != "translate" and (args.src or args.ref or args.hyp_output):
        raise ConfigError(f"--src, --ref and --hyp-output are for translation models; {_give(task)}")
    if task.name != "classify" and args.confusion:
        raise ConfigError("--confusion is for classifiers")
    if task.name == "translate" and args.input:
        raise ConfigError("--input is for language models and classifiers; use --src/--ref")
    if args.batch_tokens is None:
        valid = (state.get("experiment") or {}).get("valid") or {}
        args.batch_tokens = int(valid.get("batch_tokens", 8000))
    run = {
        "translate": run_translation,
        "generate": run_lm,
        "classify": run_classifier,
        "caption": run_caption,
    }
    run[task.name](args, state)


def run_caption(args, state) -> None:
    """Caption BLEU on the test split of the checkpoint's data (every caption of an image a reference)."""
    from ..tasks.captioning import evaluate, load_captions
    from ..tasks.captioning.corpus import check_split, references

    if args.input:
        raise ConfigError("--input is for language models and classifiers; a captioner reads its test split")
    data = _test_data(state, args)
    records = load_captions(data, "test")
    check_split(records, "test")
    images, refs = references(records)
    captioner = _open(args, state)
    result = evaluate(captioner, images, refs, beam=args.beam, length_penalty=args.length_penalty)
    print(f"{data.spec('test').describe()}, {len(images)} images, beam {args.beam}")
    print(result.scores.format())


def _open(args, state):
    """The checkpoint's inference wrapper (Translator, LanguageModel, Classifier, Captioner), by its task."""
    from ..tasks import task_of

    return task_of(state).open(state, device=args.device, path=args.checkpoint)


def _give(task) -> str:
    return "give --src and --ref" if task.name == "translate" else "give --input"


def _records(args, state, labels=()) -> tuple[list, str]:
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
    data = _test_data(state, args)
    if records == "text" and data.records == "pairs" and data.corpus == "multi30k":
        # a language model trained before single-language corpora read the target side
        data = data.from_dict({**data.to_dict(), "lang": data.tgt_lang, "src_lang": "de", "tgt_lang": "en"})
    spec = data.spec("test", labels=labels, records=records)
    return load_records(data, "test", records, labels=labels), spec.describe()


def run_lm(args, state) -> None:
    lm = _open(args, state)
    texts, label = _records(args, state)
    scores = lm.score(texts, batch_tokens=args.batch_tokens)
    print(f"{label}: {scores.tokens} tokens")
    print(scores.format())


def run_classifier(args, state) -> None:
    from ..files import check_output_path
    from ..tasks.classification import plot_confusion_matrix

    if args.confusion:
        check_output_path(args.confusion, what="--confusion")
    clf = _open(args, state)
    examples, label = _records(args, state, clf.labels)
    report = clf.evaluate(examples, batch_tokens=args.batch_tokens)
    print(f"{label}: {len(examples)} examples")
    print(report.format())
    if args.confusion:
        print(f"wrote {plot_confusion_matrix(report, args.confusion)}")


def run_translation(args, state: dict) -> None:
    from ..data.corpus import ParallelFilesSpec, load_corpus
    from ..files import atomic_write, check_output_path
    from ..tasks.translation import evaluate

    refs = args.ref or []
    if bool(args.src) != bool(refs):
        raise ConfigError("--src and --ref go together")
    if args.hyp_output:  # checked before the decoding, not after it
        check_output_path(args.hyp_output, what="--hyp-output")
    if args.src and (args.split or args.data_dir):
        raise ConfigError("--split and --data-dir choose the training corpus' split: not with --src/--ref")
    specs = [ParallelFilesSpec(args.src, ref) for ref in refs] or [_test_data(state, args).spec("test")]
    corpora = [load_corpus(spec) for spec in specs]  # each --ref read beside --src: as many lines
    for name, corpus in zip(refs or [specs[0].describe()], corpora, strict=True):
        if corpus and not any(t.strip() for _, t in corpus):  # before decoding, naming the file
            raise DataError(f"{name}: every reference line is empty; nothing to score against")
    pairs = corpora[0]
    translator = _open(args, state)
    result = evaluate(
        translator,
        [s for s, _ in pairs],
        *([t for _, t in corpus] for corpus in corpora),
        beam=args.beam,
        length_penalty=args.length_penalty,
        batch_tokens=args.batch_tokens,
        lowercase_bleu=args.lowercase,
    )
    if args.hyp_output:
        with atomic_write(args.hyp_output) as f:
            f.write("".join(h + "\n" for h in result.hypotheses))
    described = f"{args.src} -> {', '.join(refs)}" if refs else specs[0].describe()
    print(f"{described}, {len(pairs)} sentences, beam {args.beam}")
    print(result.scores.format())


def _test_data(state: dict, args):
    """The data section the checkpoint was trained with, its test split changed by --split/--data-dir."""
    from ..data.config import DataConfig
    from ..tasks import task_of

    task = task_of(state)
    experiment = state.get("experiment")
    data = experiment.get("data") if isinstance(experiment, dict) else None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{args.checkpoint} holds no experiment config (no test split): {_give(task)}")
    data = DataConfig.from_saved(data)  # only the data section: the model was rebuilt from model_config
    if task.records == "pairs" and data.records != "pairs":
        raise ConfigError(f"evaluate measures translations; this model was trained on {data.records} records")
    changes = {}
    if args.split:
        if data.corpus not in ("multi30k", "langid", "hf", "wmt14"):
            raise ConfigError(
                f"--split names a split of a multi30k, langid, wmt14 or hf corpus; this model was trained on "
                f"corpus {data.corpus!r}: {_give(task)}"
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
        raise ConfigError(f"the training config has no test split (data.test_files is empty): {_give(task)}")
    return data
