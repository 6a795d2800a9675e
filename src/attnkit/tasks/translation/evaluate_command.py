"""``attnkit evaluate`` for this task: what it prints for a checkpoint."""

from __future__ import annotations

from ...errors import ConfigError, DataError
from ...plugin.evaluation import open_wrapper, test_data


def add_flags(add) -> None:
    """What ``attnkit evaluate`` reads for a translation model beside the shared flags."""
    add("--src", help="source file (instead of the training corpus' test split)")
    add(
        "--ref",
        nargs="+",
        help="reference file(s) (with --src); several: multi-reference scores, one line each",
    )
    add("--lowercase", action="store_true", help="also report lowercased BLEU, labelled as such")
    add("--hyp-output", help="write the detokenized translations to this file")


def run(args, state: dict) -> None:
    from ...data.corpus import ParallelFilesSpec, load_corpus
    from ...files import atomic_write, check_output_path
    from . import evaluate

    refs = args.ref or []
    if bool(args.src) != bool(refs):
        raise ConfigError("--src and --ref go together")
    if args.hyp_output:  # checked before the decoding, not after it
        check_output_path(args.hyp_output, what="--hyp-output")
    if args.src and (args.split or args.data_dir):
        raise ConfigError("--split and --data-dir choose the training corpus' split: not with --src/--ref")
    specs = [ParallelFilesSpec(args.src, ref) for ref in refs] or [test_data(state, args).spec("test")]
    corpora = [load_corpus(spec) for spec in specs]  # each --ref read beside --src: as many lines
    for name, corpus in zip(refs or [specs[0].describe()], corpora, strict=True):
        if corpus and not any(t.strip() for _, t in corpus):  # before decoding, naming the file
            raise DataError(f"{name}: every reference line is empty; nothing to score against")
    pairs = corpora[0]
    translator = open_wrapper(args, state)
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
