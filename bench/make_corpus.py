"""Reproducible synthetic German->English parallel corpora for data-preparation scale benchmarks.

    python bench/make_corpus.py --pairs 4500000 --out /tmp/corpus/c4500k [--seed 0]
        [--data-dir /work/shared/data/multi30k] [--valid 500] [--chunk 100000]

Why: Multi30k has 29,000 training pairs, too few to time corpus preparation (``attnkit prepare``,
``fairseq-preprocess``) at the scale of real corpora (millions of pairs), and no corpus of that size
may be downloaded or committed. This script makes one on demand, the same bytes for the same
arguments: each synthetic pair joins two Multi30k training pairs picked by a seeded numpy RNG
(``default_rng(seed)``), with the same pick on both sides so line N of ``train.de`` is still a
translation of line N of ``train.en``. Lines are twice Multi30k's length (~23 words).

Writes into ``--out``: ``train.de``, ``train.en`` (``--pairs`` lines each, plain UTF-8 text) and
``valid.de``, ``valid.en`` (the first ``--valid`` Multi30k validation pairs, unchanged). The picks are
drawn and written ``--chunk`` pairs at a time, so memory stays small (the 29,000 captions plus one
chunk) at any ``--pairs``; the output does not depend on ``--chunk``. The corpora are benchmark
inputs only: write them outside the repository (e.g. under /tmp/corpus/), never commit them.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

import numpy as np

SRC, TGT = "de", "en"


def read_lines(path: Path) -> list[str]:
    """The lines of a gzipped text file, without their newlines."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def read_pair(data_dir: Path, split: str) -> tuple[list[str], list[str]]:
    """Aligned (source, target) lines of one Multi30k split; stops on a missing file or misalignment."""
    paths = [data_dir / f"{split}.{lang}.gz" for lang in (SRC, TGT)]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        sys.exit(f"make_corpus: missing {', '.join(missing)} (see --data-dir)")
    src, tgt = (read_lines(p) for p in paths)
    if len(src) != len(tgt):
        sys.exit(f"make_corpus: {paths[0]} has {len(src)} lines, {paths[1]} has {len(tgt)}")
    return src, tgt


def write_train(
    out: Path, src: list[str], tgt: list[str], pairs: int, seed: int, chunk: int
) -> tuple[int, int]:
    """Write ``pairs`` joined pairs to train.de / train.en; returns the bytes of each file."""
    rng = np.random.default_rng(seed)
    n = len(src)
    with (
        open(out / f"train.{SRC}", "w", encoding="utf-8", newline="\n") as fs,
        open(out / f"train.{TGT}", "w", encoding="utf-8", newline="\n") as ft,
    ):
        done = 0
        while done < pairs:
            size = min(chunk, pairs - done)
            picks = rng.integers(0, n, size=(size, 2))  # one draw serves both languages
            a, b = picks[:, 0].tolist(), picks[:, 1].tolist()
            fs.write("".join(f"{src[i]} {src[j]}\n" for i, j in zip(a, b)))
            ft.write("".join(f"{tgt[i]} {tgt[j]}\n" for i, j in zip(a, b)))
            done += size
    return (out / f"train.{SRC}").stat().st_size, (out / f"train.{TGT}").stat().st_size


def write_valid(out: Path, src: list[str], tgt: list[str], count: int) -> None:
    """The first ``count`` validation pairs, unchanged."""
    for lang, lines in ((SRC, src), (TGT, tgt)):
        with open(out / f"valid.{lang}", "w", encoding="utf-8", newline="\n") as f:
            f.writelines(line + "\n" for line in lines[:count])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, required=True, help="training pairs to write")
    ap.add_argument("--out", type=Path, required=True, help="folder to write (created if missing)")
    ap.add_argument("--seed", type=int, default=0, help="numpy RNG seed (default 0)")
    ap.add_argument(
        "--data-dir",
        type=Path,
        default=Path("/work/shared/data/multi30k"),
        help="folder with Multi30k's train/val .de.gz and .en.gz",
    )
    ap.add_argument("--valid", type=int, default=500, help="validation pairs (default 500)")
    ap.add_argument("--chunk", type=int, default=100_000, help="pairs drawn and written at a time")
    args = ap.parse_args(argv)
    if args.pairs < 1 or args.valid < 0 or args.chunk < 1:
        ap.error("--pairs and --chunk must be positive, --valid not negative")

    t0 = time.perf_counter()
    train_src, train_tgt = read_pair(args.data_dir, "train")
    val_src, val_tgt = read_pair(args.data_dir, "val")
    if args.valid > len(val_src):
        ap.error(f"--valid {args.valid}: Multi30k val has {len(val_src)} pairs")
    args.out.mkdir(parents=True, exist_ok=True)
    size_src, size_tgt = write_train(args.out, train_src, train_tgt, args.pairs, args.seed, args.chunk)
    write_valid(args.out, val_src, val_tgt, args.valid)
    seconds = time.perf_counter() - t0
    print(
        f"{args.out}: {args.pairs:,} train pairs (train.{SRC} {size_src / 2**20:.1f} MiB, "
        f"train.{TGT} {size_tgt / 2**20:.1f} MiB), {args.valid} valid pairs, seed {args.seed}, "
        f"{seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
