"""``attnkit translate``: stdin (or a file) to stdout (or a file), one translation per line.

A file (``--input``, or stdin redirected from one) is read whole and translated in token-budget
batches. A pipe or a terminal is translated as it arrives: each translation is printed (and
flushed) as soon as its line is complete; lines that arrive together are translated together.
With ``--prefix-file`` (one target prefix per input line) the input is read whole. Several
``--checkpoint`` files with one tokenizer translate as an ensemble.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import sys

from ...errors import ConfigError, DataError
from ...plugin.flags import (
    add_compile_flag,
    add_decoding_flags,
    add_search_flags,
    announcer,
    check_compile,
    read_input,
    search_options,
)

NAME = "translate"
ENGINES = ("torch", "ctranslate2", "auto")  # engine_choice.ENGINES, without importing it for --help


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="translate text, stdin to stdout line by line")
    p.add_argument(
        "--checkpoint",
        required=True,
        nargs="+",
        help="a checkpoint; several (same tokenizer) decode as an ensemble: their probabilities averaged",
    )
    p.add_argument("--input", help="input file (default stdin)")
    p.add_argument(
        "--prefix-file",
        help="target prefixes, one per input line (empty: none): each translation starts with its words",
    )
    p.add_argument(
        "--split-sentences",
        action="store_true",
        help="split each line into sentences (pysbd, by the rules of the checkpoint's source language), "
        "translate them and join them back: a line of several sentences is translated whole",
    )
    p.add_argument("--output", help="output file (default stdout); written whole at the end or not at all")
    p.add_argument(
        "--quantize",
        choices=("int8",),
        help="int8 weights for the linear layers (torch: CPU only; ctranslate2: its int8 compute type)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="torch",
        help="what decodes: torch (default), CTranslate2 (exported once into CHECKPOINT.ct2/ beside "
        "the checkpoint; no sampling), or auto: CTranslate2 where it finds the same tokens and is "
        "installed, else torch (the choice said on stderr)",
    )
    add_compile_flag(p)
    add_search_flags(p)
    add_decoding_flags(p, search=False)


def run(args) -> None:
    from ...files import atomic_write, check_output_path
    from . import Translator
    from .ct2_engine import CT2Translator
    from .translator import TranslationEngine

    options = search_options(args)  # checked before the checkpoint is read
    if args.output:  # checked before the decoding, not after it
        check_output_path(args.output, what="--output")
    if args.engine == "ctranslate2":
        _check_ct2(args, options)
    engine: type[TranslationEngine] = CT2Translator if args.engine == "ctranslate2" else Translator
    if why := engine.refuses(options):  # the engine's own declaration, before anything is read
        raise ConfigError(why)
    check_compile(args)
    if args.split_sentences and args.prefix_file:
        raise ConfigError("--split-sentences and --prefix-file: a prefix starts a line, not its sentences")
    prefixes = read_input(args.prefix_file) if args.prefix_file else None
    translator: Translator | CT2Translator
    if args.engine == "ctranslate2":
        translator = CT2Translator.from_checkpoint(
            args.checkpoint[0], device=args.device, quantize=args.quantize
        )
    else:
        translator = Translator.from_checkpoints(args.checkpoint, device=args.device, quantize=args.quantize)
        if args.engine == "auto":
            translator = _auto(args, translator, options)
        elif args.compile:
            translator.compile(announce=announcer(NAME))
    stream_fd = None if args.input or prefixes is not None else _stream_fd()
    lines = read_input(args.input) if stream_fd is None else []
    if prefixes is not None and len(prefixes) != len(lines):
        raise DataError(
            f"--prefix-file {args.prefix_file} has {len(prefixes)} lines, the input {len(lines)}: "
            "give one prefix (or an empty line) per input line"
        )

    def translate(lines: list[str], prefix: list[str] | None = None):
        if args.split_sentences:
            from .segments import by_sentences

            return by_sentences(lines, getattr(translator, "src_lang", None), translate_whole)
        return translate_whole(lines, prefix)

    def translate_whole(lines: list[str], prefix: list[str] | None = None):
        return translator.translate(lines, options, prefix=prefix, batch_tokens=args.batch_tokens)

    # A file is swapped in whole at the end (a full disk or a kill never leaves half of it).
    with atomic_write(args.output) if args.output else contextlib.nullcontext(sys.stdout) as out:
        if stream_fd is None:
            _write(out, translate(lines, prefixes), options.nbest, first=0)
            return
        done = 0
        for lines in arriving_lines(stream_fd):
            _write(out, translate(lines), options.nbest, first=done)
            out.flush()
            done += len(lines)


def _auto(args, translator, options):
    """--engine auto: CTranslate2 over the loaded model where it finds the same tokens, else the
    torch translator as loaded (compiled with --compile); the choice said on stderr."""
    from pathlib import Path

    from .ct2_cache import exported_model
    from .ct2_engine import CT2Translator
    from .engine_choice import auto_engine

    engine, why = auto_engine(
        translator.model,
        translator.device,
        options,
        ensemble=len(args.checkpoint) > 1,
        quantize=args.quantize,
        compile=args.compile,
    )
    announcer(NAME)(f"engine auto: {engine} ({why})")
    if engine == "torch":
        return translator.compile(announce=announcer(NAME)) if args.compile else translator
    path = Path(args.checkpoint[0])
    return CT2Translator(translator, exported_model(path, path.read_bytes()))


def _check_ct2(args, options) -> None:
    """What --engine ctranslate2 cannot do, refused before anything is read or exported."""
    if len(args.checkpoint) > 1:
        raise ConfigError("--engine ctranslate2 decodes one checkpoint, not an ensemble (use --engine torch)")
    if args.compile:
        raise ConfigError("--compile is for --engine torch (CTranslate2 runs its own kernels)")


def _write(out, results, nbest: int, *, first: int) -> None:
    for i, r in enumerate(results, start=first):
        if nbest == 1:
            out.write(r.text + "\n")
        else:
            # Exactly N lines per input, even where fewer hypotheses exist (an empty input has one).
            for k in range(nbest):
                text, score = r.nbest[min(k, len(r.nbest) - 1)]
                out.write(f"{i}\t{score:.4f}\t{text}\n")


def _stream_fd() -> int | None:
    """stdin's descriptor when it is a pipe, a terminal or a socket (not a file); else None."""
    try:
        fd = sys.stdin.fileno()
        return None if stat.S_ISREG(os.fstat(fd).st_mode) else fd
    except (AttributeError, OSError, ValueError):  # replaced by an in-memory stream (tests, notebooks)
        return None


def arriving_lines(fd: int):
    """Yield lists of complete lines as they arrive on ``fd``: block for one, take what else is there.

    Linear in the input however long a line is: a line's parts are kept as they come and joined
    once, when its newline arrives (re-splitting the whole buffer after every read made one 100 MB
    line cost minutes)."""
    from ...data.readers import check_line_end

    pending: list[bytes] = []  # the unfinished line's parts, none holding a newline
    number = 0
    while True:
        chunk = os.read(fd, 1 << 16)  # blocks until something arrives; b"" at end of input
        parts = [chunk]
        while chunk and select.select([fd], [], [], 0)[0]:  # more already waiting: take it too
            chunk = os.read(fd, 1 << 16)
            parts.append(chunk)
        new = b"".join(parts)
        cut = new.rfind(b"\n")
        complete: list[bytes] = []
        if cut >= 0:
            complete = b"".join([*pending, new[:cut]]).split(b"\n")
            pending = [new[cut + 1 :]]
        elif new:
            pending.append(new)
        if not chunk and any(pending):  # end of input after a last line without a newline
            complete, pending = [*complete, b"".join(pending)], []
        lines = []
        for raw in complete:
            number += 1
            try:
                line = raw.decode("utf-8").removesuffix("\r")
            except UnicodeDecodeError as e:
                raise DataError(f"stdin line {number}: not valid UTF-8 (byte offset {e.start})") from None
            if number == 1:
                check_line_end(line, "stdin line 1")
            lines.append(line)
        if lines:
            yield lines
        if not chunk:
            return
