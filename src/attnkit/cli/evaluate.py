"""``attnkit evaluate``: sacreBLEU BLEU and chrF of a checkpoint on a Multi30k split or on two files."""

from __future__ import annotations

from ..errors import ConfigError, DataError
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
    add_decoding_flags(p)


def run(args) -> None:
    from ..checkpoint import load_checkpoint
    from ..data.corpus import read_parallel
    from ..data.multi30k import load_multi30k
    from ..evaluate import evaluate
    from ..files import atomic_write, check_output_path
    from ..translate import Translator

    if bool(args.src) != bool(args.ref):
        raise ConfigError("--src and --ref go together")
    if args.hyp_output:  # checked before the decoding, not after it
        check_output_path(args.hyp_output, what="--hyp-output")
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
    if pairs and not any(t.strip() for _, t in pairs):  # before loading and decoding, naming the file
        raise DataError(f"{args.ref or label}: every reference line is empty; nothing to score against")
    translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    result = evaluate(
        translator, [s for s, _ in pairs], [t for _, t in pairs], beam=args.beam,
        length_penalty=args.length_penalty, batch_tokens=args.batch_tokens, lowercase_bleu=args.lowercase,
    )  # fmt: skip
    if args.hyp_output:
        with atomic_write(args.hyp_output) as f:
            f.write("".join(h + "\n" for h in result.hypotheses))
    print(f"{label}, {len(pairs)} sentences, beam {args.beam}")
    print(result.scores.format())
