"""``attnkit evaluate``: sacreBLEU BLEU and chrF of a checkpoint on its corpus' test split or on two files."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
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
    add_decoding_flags(p)


def run(args) -> None:
    from ..checkpoint import load_checkpoint
    from ..data.corpus import ParallelFilesSpec, load_corpus
    from ..evaluate import evaluate
    from ..translate import Translator

    if bool(args.src) != bool(args.ref):
        raise ConfigError("--src and --ref go together")
    if args.src and (args.split or args.data_dir):
        raise ConfigError("--split and --data-dir choose the training corpus' split: not with --src/--ref")
    state = load_checkpoint(args.checkpoint)
    spec = ParallelFilesSpec(args.src, args.ref) if args.src else _test_spec(state, args)
    pairs = load_corpus(spec)
    translator = Translator.from_state(state, device=args.device)
    result = evaluate(
        translator, [s for s, _ in pairs], [t for _, t in pairs], beam=args.beam,
        length_penalty=args.length_penalty, batch_tokens=args.batch_tokens, lowercase_bleu=args.lowercase,
    )  # fmt: skip
    if args.hyp_output:
        Path(args.hyp_output).write_text("".join(h + "\n" for h in result.hypotheses), encoding="utf-8")
    print(f"{spec.describe()}, {len(pairs)} sentences, beam {args.beam}")
    print(result.scores.format())


def _test_spec(state: dict, args):
    """The test split of the corpus the checkpoint was trained on, as its experiment config says."""
    from ..data.config import DataConfig

    experiment = state.get("experiment")
    data = experiment.get("data") if isinstance(experiment, dict) else None
    if not isinstance(data, dict):
        raise ConfigError(f"{args.checkpoint} holds no experiment config: give --src and --ref")
    data = DataConfig.from_saved(data)  # only the data section: the model was rebuilt from model_config
    changes = {}
    if args.split:
        if data.corpus not in ("multi30k", "hf"):
            raise ConfigError(
                f"--split names a split of a multi30k or hf corpus; this model was trained on corpus "
                f"{data.corpus!r}: give --src and --ref"
            )
        changes["test_split"] = args.split
    if args.data_dir:
        if data.corpus != "multi30k":
            raise ConfigError(f"--data-dir is for Multi30k; this model was trained on corpus {data.corpus!r}")
        changes["data_dir"] = args.data_dir
    data = data.replace(**changes) if changes else data
    if not data.has_split("test"):
        raise ConfigError(
            "the training config has no test split (data.test_files is empty): give --src and --ref"
        )
    if data.records != "pairs":
        raise ConfigError(f"evaluate measures translations; this model was trained on {data.records} records")
    return data.spec("test")
