"""``attnkit import-captions``: a Hugging Face image-caption dataset (Flickr30k, COCO, ...) written as
the captioner reads it: ``OUT/images/`` and ``OUT/{train,valid,test}.tsv``. A non-empty ``OUT`` is
refused unless ``--overwrite`` is given; the corpus is written beside it and swapped in when complete.

Flickr30k keeps its splits in a column of one split:
    attnkit import-captions --dataset nlphuji/flickr30k --out data/flickr30k --hf-split test \\
        --split-field split --splits train=train,valid=val,test=test --size 224
"""

from __future__ import annotations

import argparse

from ...plugin.flags import int_at_most, non_negative_int

NAME = "import-captions"


def split_map(text: str) -> dict[str, str]:
    """``train=train,valid=val,test=test`` -> our split -> the dataset's name for it."""
    pairs = [part.partition("=") for part in text.split(",") if part.strip()]
    out = {ours.strip(): theirs.strip() for ours, sep, theirs in pairs if sep and theirs.strip()}
    if (
        len(out) != len(pairs)
        or not set(out) <= {"train", "valid", "test"}
        or not {"train", "valid"} <= set(out)
    ):
        raise argparse.ArgumentTypeError(
            f"expected train=NAME,valid=NAME[,test=NAME] (the dataset's split names), got {text!r}"
        )
    return out


def add_parser(sub) -> None:
    p = sub.add_parser(
        NAME, help="write a Hugging Face image-caption dataset as the captioner's TSV + images"
    )
    p.add_argument("--dataset", required=True, help="a hub name, or a folder written by save_to_disk")
    p.add_argument(
        "--output",
        dest="out",
        required=True,
        help="folder to write (images/, train.tsv, valid.tsv, test.tsv)",
    )
    p.add_argument("--image-field", default="image", help="the image column (default image)")
    p.add_argument(
        "--caption-field", default="caption", help="the caption column: text or a list (default caption)"
    )
    p.add_argument(
        "--splits",
        type=split_map,
        default="train=train,valid=validation,test=test",
        help="our split = the dataset's (default train=train,valid=validation,test=test)",
    )
    p.add_argument("--split-field", default="", help="a column naming each row's split (Flickr30k: split)")
    p.add_argument(
        "--hf-split", default="train", help="the one split read with --split-field (default train)"
    )
    p.add_argument("--size", type=non_negative_int, default=0, help="resize to SIZE x SIZE (default 0: keep)")
    p.add_argument("--max-images", type=int_at_most(10**7), default=None, help="at most N images per split")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the corpus in a non-empty --out (once the new one is done)",
    )


def run(args) -> None:
    from .hf_import import import_captions

    written = import_captions(
        args.dataset,
        args.out,
        image_field=args.image_field,
        caption_field=args.caption_field,
        splits=args.splits,
        split_field=args.split_field,
        hf_split=args.hf_split,
        size=args.size,
        max_images=args.max_images or 0,
        overwrite=args.overwrite,
    )
    for path in written.values():
        print(f"wrote {path}")
