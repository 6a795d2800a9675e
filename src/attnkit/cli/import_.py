"""``attnkit import``: a Hugging Face MarianMTModel folder (e.g. OPUS-MT) to an attnkit checkpoint."""

from __future__ import annotations

NAME = "import"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="import a Hugging Face MarianMTModel folder as an attnkit checkpoint")
    p.add_argument(
        "source",
        help="the model folder (config.json, weights, source.spm, target.spm, vocab.json), or a Hugging "
        "Face Hub id (e.g. Helsinki-NLP/opus-mt-de-en: from the Hub's cache, or downloaded where online)",
    )
    p.add_argument("--format", required=True, choices=("huggingface",), help="huggingface")
    p.add_argument("--output", required=True, help="the checkpoint file to write")
    p.add_argument("--force", action="store_true", help="replace an existing checkpoint file")


def run(args) -> None:
    from ..export import import_checkpoint

    out = import_checkpoint(args.format, args.source, args.output, force=args.force)
    print(f"wrote attnkit checkpoint {out}")
