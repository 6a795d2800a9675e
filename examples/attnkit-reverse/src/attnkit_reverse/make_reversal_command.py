"""``attnkit make-reversal``: a corpus of letter sequences and their reversals, as tsv files."""

from __future__ import annotations

import random
from pathlib import Path

from attnkit.errors import ConfigError
from attnkit.plugin.flags import int_at_most, non_negative_int

NAME = "make-reversal"
LETTERS = "abcdefghijkl"


def make_reversal(out: str | Path, *, train: int = 4000, seed: int = 0) -> Path:
    """train.tsv, valid.tsv and test.tsv under ``out``: ``source<TAB>target`` lines, 3 to 10 letters."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty: choose a new folder")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for split, n in (("train", train), ("valid", 200), ("test", 200)):
        lines = []
        for _ in range(n):
            seq = [rng.choice(LETTERS) for _ in range(rng.randint(3, 10))]
            lines.append(f"{' '.join(seq)}\t{' '.join(reversed(seq))}\n")
        (out / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
    return out


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="write a corpus of letter sequences and their reversals")
    p.add_argument("--out", required=True, help="an empty or new folder")
    p.add_argument("--train", type=int_at_most(10**7), default=4000, help="training pairs (default 4000)")
    p.add_argument("--seed", type=non_negative_int, default=0)


def run(args) -> None:
    print(f"wrote {make_reversal(args.out, train=args.train, seed=args.seed)}")
