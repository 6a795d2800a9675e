"""``attnkit attention``: heatmaps of every attention of one translated sentence."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .common import device, int_at_most

NAME = "attention"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="plot attention heatmaps for one sentence")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--text", required=True, help="the source sentence")
    p.add_argument("--out", required=True, help="PNG for cross-attention; self-attention goes beside it")
    p.add_argument("--beam", type=int_at_most(256), default=4)
    p.add_argument("--device", type=device, default="auto")


def self_attention_path(out: Path, name: str) -> Path:
    return out.with_name(f"{out.stem}_{name}{out.suffix}")


def run(args) -> None:
    from ..files import check_output_path
    from ..plotting import plot_attention
    from ..translate import Translator, attention_maps

    out = Path(args.out)
    if out.suffix.lower() != ".png":
        raise ConfigError(f"--out {out}: the figures are PNG images; give a path ending in .png")
    for path in (out, self_attention_path(out, "encoder_self"), self_attention_path(out, "decoder_self")):
        check_output_path(path, what="--out", make_folders=True)  # before loading and decoding
    translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    maps = attention_maps(translator, args.text, beam=args.beam)
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
            path = self_attention_path(out, name)
            plot_attention(weights, labels, labels, path, title=name.replace("_", " ") + "-attention")
            print(f"wrote {path}")
