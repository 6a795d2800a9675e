"""``attnkit evaluate``: score a checkpoint on its test split or on files.

Translation: sacreBLEU BLEU and chrF. Language model: perplexity and bits per token (``--input``: a
text file). Classifier: accuracy, macro-F1, per-class precision/recall (``--input``: a labelled
``label<TAB>text`` file), and with ``--confusion PNG`` the confusion matrix.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .common import add_decoding_flags

NAME = "evaluate"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="BLEU and chrF on a test split or on files")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--split", default="test_2016_flickr", help="Multi30k split (default test_2016_flickr)")
    p.add_argument("--src", help="source file (instead of --split)")
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
    run_translation(args)


def _task_split(args, state) -> tuple[str, str]:
    """(path, label) of the text to score: --input, or the training data's test split."""
    if args.input:
        return args.input, args.input
    data = state.get("experiment", {}).get("data", {})
    lang = data.get("lang") or (
        data.get("tgt_lang") if state["arch"] == "lm" else None
    )  # an LM reads tgt_lang
    if data.get("corpus", "multi30k") == "multi30k" and lang:
        from ..data.multi30k import multi30k_path

        path = multi30k_path(args.split, lang, args.data_dir or data.get("data_dir") or None)
        return str(path), f"Multi30k {args.split} {lang}"
    files = data.get("test_files") or []
    if not files:
        raise ConfigError("the model's training data has no test split: give --input")
    return files[0], files[0]


def run_task(args, state) -> None:
    if args.src or args.ref or args.hyp_output:
        raise ConfigError("--src, --ref and --hyp-output are for translation models; use --input")
    path, label = _task_split(args, state)
    if state["arch"] == "lm":
        from ..data.corpus import read_lines
        from ..generate import LanguageModel

        lm = LanguageModel.from_checkpoint(args.checkpoint, device=args.device)
        scores = lm.score(read_lines(path))
        print(f"{label}: {scores.tokens} tokens")
        print(scores.format())
        return
    from ..classify import Classifier, read_labelled_file
    from ..task_metrics import plot_confusion_matrix

    clf = Classifier.from_checkpoint(args.checkpoint, device=args.device)
    gold, texts = read_labelled_file(path, clf.labels)
    report = clf.evaluate(texts, gold)
    print(f"{label}: {len(texts)} examples")
    print(report.format())
    if args.confusion:
        print(f"wrote {plot_confusion_matrix(report, args.confusion)}")


def run_translation(args) -> None:
    from ..checkpoint import load_checkpoint
    from ..data.corpus import read_parallel
    from ..data.multi30k import load_multi30k
    from ..evaluate import evaluate
    from ..translate import Translator

    if bool(args.src) != bool(args.ref):
        raise ConfigError("--src and --ref go together")
    if args.src:
        pairs, label = read_parallel(args.src, args.ref), f"{args.src} -> {args.ref}"
    else:
        data = load_checkpoint(args.checkpoint).get("experiment", {}).get("data", {})
        if data.get("corpus", "multi30k") != "multi30k":
            raise ConfigError("this model was not trained on Multi30k: give --src and --ref")
        src_lang, tgt_lang = data.get("src_lang", "de"), data.get("tgt_lang", "en")
        data_dir = args.data_dir or data.get("data_dir") or None
        pairs = load_multi30k(args.split, src_lang, tgt_lang, data_dir=data_dir)
        label = f"Multi30k {args.split} {src_lang}-{tgt_lang}"
    translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    result = evaluate(
        translator, [s for s, _ in pairs], [t for _, t in pairs], beam=args.beam,
        length_penalty=args.length_penalty, batch_tokens=args.batch_tokens, lowercase_bleu=args.lowercase,
    )  # fmt: skip
    if args.hyp_output:
        Path(args.hyp_output).write_text("".join(h + "\n" for h in result.hypotheses), encoding="utf-8")
    print(f"{label}, {len(pairs)} sentences, beam {args.beam}")
    print(result.scores.format())
