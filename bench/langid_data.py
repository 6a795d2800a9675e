"""Write Multi30k language identification as labelled TSV files (``label<TAB>text``) for attnkit.

    ATTNKIT_DATA=/work/shared/data python -m bench.langid_data --out data/langid

writes ``train.tsv``, ``val.tsv`` and ``test_2016_flickr.tsv`` (whole sentences, labels de / en /
fr / cs) and the same with ``_first3`` (each sentence's first three words: the harder task), as
files for other tools (``data.corpus: tsv``). The attnkit configs do not need them:
configs/multi30k_langid*.yaml read the same examples straight from Multi30k (``data.corpus:
langid``). The training lines are shuffled with a fixed seed so that the four languages mix.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LANGS = ("de", "en", "fr", "cs")
SPLITS = ("train", "val", "test_2016_flickr")


def examples(split: str, first_words: int | None, data_dir: str | None = None) -> list[tuple[str, str]]:
    from attnkit.data.multi30k import multi30k_path
    from attnkit.data.readers import read_lines

    out = []
    for lang in LANGS:
        for line in read_lines(multi30k_path(split, lang, data_dir, download=False)):
            words = line.replace("\t", " ").split()
            if words:
                out.append((lang, " ".join(words if first_words is None else words[:first_words])))
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="data/langid", help="output folder (default data/langid)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", help="folder holding multi30k/ (default $ATTNKIT_DATA)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for suffix, n in (("", None), ("_first3", 3)):
        for split in SPLITS:
            rows = examples(split, n, args.data_dir)
            if split == "train":
                random.Random(args.seed).shuffle(rows)
            path = out / f"{split}{suffix}.tsv"
            path.write_text("".join(f"{label}\t{text}\n" for label, text in rows), encoding="utf-8")
            print(f"wrote {path} ({len(rows)} examples)")


if __name__ == "__main__":
    main()
