"""The ``attnkit`` command: thin wrappers that parse arguments and call one public function each.

Every user error (bad flag, config key or value, missing or malformed file, bad checkpoint) prints
one line on stderr and exits with code 2; no traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from .errors import AttnkitError, ConfigError, DataError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _device(text: str) -> str:
    """auto, cpu, cuda or cuda:N; checked here so a typo is a usage error, not a torch traceback."""
    if text in ("auto", "cpu", "cuda") or (text.startswith("cuda:") and text[5:].isdigit()):
        return text
    raise argparse.ArgumentTypeError(f"expected auto, cpu, cuda or cuda:N, got {text!r}")


def _add_decoding_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=_positive_int, default=4, help="beam size; 1 = greedy (default 4)")
    p.add_argument(
        "--length-penalty", type=float, default=0.6, help="GNMT length penalty alpha (default 0.6)"
    )
    p.add_argument(
        "--batch-tokens", type=_positive_int, default=4000, help="source tokens per batch (default 4000)"
    )
    p.add_argument("--device", type=_device, default="auto", help="auto, cpu, cuda or cuda:N (default auto)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="attnkit", description="Attention and the Transformer for sequence-to-sequence work."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser(
        "train", help="train a model from a config file", description="Train (or resume) a model."
    )
    p.add_argument("--config", required=True, help="YAML config file (see configs/)")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides, e.g. train.max_steps=100")
    p.add_argument("--data-dir", help="folder holding multi30k/ (default: $ATTNKIT_DATA or ~/.cache/attnkit)")
    p.add_argument("--output-dir", help="where checkpoints and metrics go (overrides output_dir)")
    p.add_argument("--resume", help="continue exactly from this checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a finished or stopped run in output_dir")

    p = sub.add_parser("translate", help="translate text, stdin to stdout line by line")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", help="input file (default stdin)")
    p.add_argument("--output", help="output file (default stdout)")
    p.add_argument(
        "--nbest", type=_positive_int, default=1, help="with N > 1: lines 'INDEX<TAB>SCORE<TAB>TEXT'"
    )
    _add_decoding_flags(p)

    p = sub.add_parser("evaluate", help="BLEU and chrF on a test split or on files")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--split", default="test_2016_flickr", help="Multi30k split (default test_2016_flickr)")
    p.add_argument("--src", help="source file (instead of --split)")
    p.add_argument("--ref", help="reference file (with --src)")
    p.add_argument("--data-dir", help="folder holding multi30k/")
    p.add_argument("--lowercase", action="store_true", help="also report lowercased BLEU, labelled as such")
    p.add_argument("--hyp-output", help="write the detokenized translations to this file")
    _add_decoding_flags(p)

    p = sub.add_parser("attention", help="plot attention heatmaps for one sentence")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--text", required=True, help="the source sentence")
    p.add_argument("--out", required=True, help="PNG for cross-attention; self-attention goes beside it")
    p.add_argument("--beam", type=_positive_int, default=4)
    p.add_argument("--device", type=_device, default="auto")

    p = sub.add_parser("plot-positional", help="draw the sinusoidal positional encodings")
    p.add_argument("--d-model", type=_positive_int, default=512)
    p.add_argument("--max-len", type=_positive_int, default=128)
    p.add_argument("--out", required=True)

    p = sub.add_parser("average", help="average the weights of several checkpoints of one run")
    p.add_argument("--checkpoints", nargs="+", required=True)
    p.add_argument("--output", required=True)
    return parser


def cmd_train(args) -> None:
    from .train import load_config, train

    overrides = list(args.overrides)
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    if args.output_dir:
        overrides.append(f"output_dir={args.output_dir}")
    cfg = load_config(args.config, overrides)
    result = train(cfg, resume=args.resume, overwrite=args.overwrite, log=lambda m: print(m, file=sys.stderr))
    if os.environ.get("RANK", "0") != "0":
        return  # under torchrun only rank 0 reports
    print(f"best checkpoint: {result.best_checkpoint} (valid BLEU {result.best_bleu:.2f})")
    if result.averaged_checkpoint:
        print(f"averaged checkpoint: {result.averaged_checkpoint}")


def _read_input(path: str | None) -> list[str]:
    from .data.corpus import read_lines

    if path:
        return read_lines(path)
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"stdin: not valid UTF-8 (byte offset {e.start})") from None
    lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []
    return [line.removesuffix("\r") for line in lines]  # as read_lines does for --input


def cmd_translate(args) -> None:
    from .translate import Translator

    translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    lines = _read_input(args.input)
    results = translator.translate(
        lines, beam=max(args.beam, args.nbest), nbest=args.nbest, length_penalty=args.length_penalty,
        batch_tokens=args.batch_tokens,
    )  # fmt: skip
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for i, r in enumerate(results):
            if args.nbest == 1:
                out.write(r.text + "\n")
            else:
                # Exactly N lines per input, even where fewer hypotheses exist (an empty input has one).
                for k in range(args.nbest):
                    text, score = r.nbest[min(k, len(r.nbest) - 1)]
                    out.write(f"{i}\t{score:.4f}\t{text}\n")
    finally:
        if args.output:
            out.close()


def cmd_evaluate(args) -> None:
    from .checkpoint import load_checkpoint
    from .data.corpus import read_parallel
    from .data.multi30k import load_multi30k
    from .evaluate import evaluate
    from .translate import Translator

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


def cmd_attention(args) -> None:
    from .plotting import plot_attention
    from .translate import Translator, attention_maps

    translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    maps = attention_maps(translator, args.text, beam=args.beam)
    out = Path(args.out)
    print(
        "translation:",
        translator.tokenizer.decode(translator.translate([args.text], beam=args.beam)[0].tokens),
    )
    plot_attention(
        maps.cross, maps.src_pieces, maps.tgt_pieces, out, title="cross-attention (target x source)"
    )
    print(f"wrote {out}")
    for name, weights, labels in (
        ("encoder_self", maps.encoder_self, maps.src_pieces),
        ("decoder_self", maps.decoder_self, maps.tgt_pieces),
    ):
        if weights is not None:
            path = out.with_name(f"{out.stem}_{name}{out.suffix}")
            plot_attention(weights, labels, labels, path, title=name.replace("_", " ") + "-attention")
            print(f"wrote {path}")


def cmd_plot_positional(args) -> None:
    from .plotting import plot_positional_encoding
    from .positional import sinusoidal_encoding

    out = plot_positional_encoding(sinusoidal_encoding(args.max_len, args.d_model), args.out)
    print(f"wrote {out}")


def cmd_average(args) -> None:
    from .checkpoint import average_checkpoints, save_checkpoint

    out = save_checkpoint(average_checkpoints(args.checkpoints), args.output)
    print(f"averaged {len(args.checkpoints)} checkpoints into {out}")


COMMANDS = {
    "train": cmd_train,
    "translate": cmd_translate,
    "evaluate": cmd_evaluate,
    "attention": cmd_attention,
    "plot-positional": cmd_plot_positional,
    "average": cmd_average,
}


def _one_line(message: str) -> str:
    """An error message on one line: some (a YAML parser's, the OS's) span several."""
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    formatwarning = warnings.formatwarning
    warnings.formatwarning = lambda msg, category, *a, **k: f"attnkit: warning: {_one_line(msg)}\n"
    try:
        COMMANDS[args.command](args)
    except AttnkitError as e:
        print(f"attnkit {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # unwritable output, full disk, ...: the OS's message names the file
        message = f"{e.strerror or e}: {e.filename or ''}".rstrip(": ")
        print(f"attnkit {args.command}: error: {_one_line(message)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"attnkit {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = formatwarning  # main() may be called in-process (tests, notebooks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
