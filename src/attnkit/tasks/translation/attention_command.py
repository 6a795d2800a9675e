"""``attnkit attention`` for translation models: ``--out map.png`` draws PNG
grids of cross-, encoder self- and decoder self-attention (every layer and head); ``--html view.html``
writes the server's attention page as one self-contained file with the data embedded (opened on
``--method``'s view; ``flow`` adds it to the file)."""

from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from ...plugin.flags import METHOD_FLAG


def add_flags(add) -> None:
    """What ``attnkit attention`` reads for a translation model beside the shared flags."""
    add("--text", required=True, help="the input text")
    add("--html", help="the interactive attention page as one static HTML file")
    add("--method", **METHOD_FLAG)


def run(args, state) -> None:
    from ...files import check_output_path
    from ...plotting import self_attention_path  # torch: imported by a run, not by a --help
    from . import Translator

    if not args.out and not args.html:
        raise ConfigError("give --out PNG, --html FILE or both")
    if args.out:  # every output checked before the text is decoded
        out = Path(args.out)
        if out.suffix.lower() != ".png":
            raise ConfigError(f"--out {out}: the figures are PNG images; give a path ending in .png")
        for path in (out, self_attention_path(out, "encoder_self"), self_attention_path(out, "decoder_self")):
            check_output_path(path, what="--output", make_folders=True)
    if args.html:
        check_output_path(args.html, what="--html")
    translator = Translator.from_state(state, device=args.device, path=args.checkpoint)
    if args.html:
        _write_html(translator, args)
    if args.out:
        _write_pngs(translator, args)


def _write_html(translator, args) -> None:
    from ...page import render_page
    from .attention_payload import attention_payload

    if not args.text.strip():
        raise ConfigError("--text is empty: there is no attention to show")
    data = attention_payload(translator, args.text, beam=args.beam, flow=args.method == "flow")
    from ...files import atomic_write

    out = Path(args.html)
    with atomic_write(out) as f:  # write new, then swap: a failure keeps the old file
        # the panel that draws it, opened on --method's view
        f.write(render_page({**data, "task": "translate", "method": args.method}))
    print("translation:", data["translation"])
    print(f"wrote {out}")


def _write_pngs(translator, args) -> None:
    from ...plotting import plot_attention, self_attention_path
    from . import attention_maps

    maps = attention_maps(translator, args.text, beam=args.beam)
    out = Path(args.out)
    if args.method != "raw":
        _write_flow(translator, maps, out, args)
        return
    print(
        "translation:",
        translator.tokenizer.decode(translator.translate([args.text], beam=args.beam)[0].tokens),
    )
    plot_attention(
        maps.cross, maps.src_pieces, maps.tgt_pieces, out, title="cross-attention (target x source)"
    )
    print(f"wrote {out}")
    # The decoder's keys are what it read, <s> and the translation so far, one position behind the
    # pieces each row outputs: labelling both axes with the outputs would show each row attending to
    # itself or the future, which a causal mask never allows.
    decoder_inputs = ["<s>", *maps.tgt_pieces[:-1]]
    for name, weights, keys, queries, title in (
        ("encoder_self", maps.encoder_self, maps.src_pieces, maps.src_pieces, "encoder self-attention"),
        (
            "decoder_self",
            maps.decoder_self,
            decoder_inputs,
            maps.tgt_pieces,
            "decoder self-attention (rows: the piece each position outputs; columns: what it read)",
        ),
    ):
        if weights is not None:
            path = self_attention_path(out, name)
            plot_attention(weights, keys, queries, path, title=title)
            print(f"wrote {path}")


def _write_flow(translator, maps, out: Path, args) -> None:
    """--method rollout or flow: what each target piece reads of the source tokens (the last
    layer's cross-attention followed through the encoder), and the encoder's own mixing."""
    from ...attention.rollout import mixing, through
    from ...plotting import plot_attention, self_attention_path

    if maps.encoder_self is None:
        raise ConfigError(f"--method {args.method} follows an encoder's self-attention: this model has none")
    assert maps.translation is not None  # attention_maps keeps it
    print("translation:", maps.translation.text)
    encoder = mixing(maps.encoder_self, args.method)  # (S, S), once: flow takes seconds
    view = through(maps.cross, encoder)  # (T, S)
    title = f"{args.method}: cross-attention through the encoder"
    plot_attention(view, maps.src_pieces, maps.tgt_pieces, out, title=title)
    print(f"wrote {out}")
    path = self_attention_path(out, "encoder_self")
    plot_attention(
        encoder, maps.src_pieces, maps.src_pieces, path, title=f"encoder self-attention ({args.method})"
    )
    print(f"wrote {path}")
