"""``attnkit attention``: heatmaps of every attention of one translated sentence."""

from __future__ import annotations

from pathlib import Path

from .common import device, positive_int

NAME = "attention"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="plot attention heatmaps for one sentence")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--text", required=True, help="the source sentence")
    p.add_argument("--out", required=True, help="PNG for cross-attention; self-attention goes beside it")
    p.add_argument("--beam", type=positive_int, default=4)
    p.add_argument("--device", type=device, default="auto")


def run(args) -> None:
    from ..plotting import plot_attention
    from ..translate import Translator, attention_maps

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
