"""``attnkit make-shapes``: write the generated captioning corpus (no download), reproducibly.

Pictures of two coloured shapes and captions such as "a red square above a blue circle", as
``OUT/images/*.png`` and ``OUT/{train,valid,test}.tsv`` (``image<TAB>caption``), with each image's
object boxes in ``OUT/{split}.objects.jsonl``. The same ``--seed`` writes the same files. A non-empty
``OUT`` is refused unless ``--overwrite`` is given; the corpus is written beside it and swapped in
when complete.
"""

from __future__ import annotations

from ...plugin.flags import int_at_most, non_negative_int, positive_int

NAME = "make-shapes"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="write the generated shapes captioning corpus (images + captions)")
    p.add_argument(
        "--output",
        dest="out",
        required=True,
        help="folder to write (images/, train.tsv, valid.tsv, test.tsv)",
    )
    p.add_argument("--train", type=positive_int, default=3000, help="training images (default 3000)")
    p.add_argument("--valid", type=positive_int, default=200, help="validation images (default 200)")
    p.add_argument("--test", type=positive_int, default=200, help="test images (default 200)")
    p.add_argument("--size", type=int_at_most(1024), default=32, help="image side in pixels (default 32)")
    p.add_argument("--seed", type=non_negative_int, default=1, help="the same seed writes the same corpus")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the corpus in a non-empty --out (once the new one is done)",
    )


def run(args) -> None:
    from . import make_shapes

    written = make_shapes(
        args.out,
        n_train=args.train,
        n_valid=args.valid,
        n_test=args.test,
        size=args.size,
        seed=args.seed,
        overwrite=args.overwrite,
    )
    for split, path in written.items():
        n = getattr(args, split)
        print(f"wrote {path} ({n} image{'' if n == 1 else 's'})")
