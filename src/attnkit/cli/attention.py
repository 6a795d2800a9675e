"""``attnkit attention``: heatmaps of every attention of one translated sentence.

``--out map.png`` draws PNG grids; ``--html view.html`` writes the server's attention page as one
self-contained file with the data embedded (every layer and head, zoom, lines, words; no server).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .common import device, positive_int

NAME = "attention"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="plot attention heatmaps for one sentence")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--text", required=True, help="the source sentence")
    p.add_argument("--out", help="PNG for cross-attention; self-attention goes beside it")
    p.add_argument("--html", help="the interactive attention page as one static HTML file")
    p.add_argument("--beam", type=positive_int, default=4)
    p.add_argument("--device", type=device, default="auto")


def run(args) -> None:
    from ..translate import Translator

    if not args.out and not args.html:
        raise ConfigError("give --out PNG, --html FILE or both")
    translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    if args.html:
        _write_html(translator, args)
    if args.out:
        _write_pngs(translator, args)


def _write_html(translator, args) -> None:
    from ..serve.attention import attention_payload
    from ..serve.page import render_page

    if not args.text.strip():
        raise ConfigError("--text is empty: there is no attention to show")
    data = attention_payload(translator, args.text, beam=args.beam)
    out = Path(args.html)
    tmp = out.with_name(f".{out.name}.tmp")  # write new, then swap: a failure keeps the old file
    tmp.write_text(render_page(data), encoding="utf-8")
    tmp.replace(out)
    print("translation:", data["translation"])
    print(f"wrote {out}")


def _write_pngs(translator, args) -> None:
    from ..plotting import plot_attention
    from ..translate import attention_maps

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
