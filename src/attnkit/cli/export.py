"""``attnkit export``: a Transformer checkpoint to a CTranslate2 or Hugging Face (MarianMTModel) folder."""

from __future__ import annotations

NAME = "export"
FORMATS = ("ctranslate2", "huggingface")
QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "bfloat16", "float32")


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="export a Transformer checkpoint to CTranslate2 or Hugging Face")
    p.add_argument("--checkpoint", required=True, help="the checkpoint to export (never changed)")
    p.add_argument("--format", required=True, choices=FORMATS, help="ctranslate2 or huggingface")
    p.add_argument("--output", required=True, help="the folder to write (must not exist unless --force)")
    p.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default="float32",
        help="CTranslate2 weight type (default float32)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier export in --output (never another folder), once the new one is written",
    )


def run(args) -> None:
    from ..export import export_checkpoint

    out = export_checkpoint(
        args.checkpoint,
        args.format,
        args.output,
        quantization=args.quantization,
        force=args.force,
        report=True,  # each stage and its pace on stderr: a large model's export takes minutes
    )
    print(f"wrote {args.format} model to {out}")
