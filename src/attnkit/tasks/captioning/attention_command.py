"""``attnkit attention`` for captioners: ``--image`` with ``--out`` draws seed
002's caption picture, the image with each word's cross-attention over its regions (one panel per
word), and OUT_heads.png with every layer and head; ``--method rollout`` or ``flow`` follows each word's
attention down the encoder's layers to the image's regions (:mod:`attnkit.attention.rollout`);
``--html`` the server's page of it with the image embedded."""

from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from ...plugin.flags import METHOD_FLAG


def add_flags(add) -> None:
    """What ``attnkit attention`` reads for a captioner beside the shared flags."""
    add("--image", required=True, help="the image")
    add("--html", help="the interactive attention page as one static HTML file")
    add("--method", **METHOD_FLAG)


def run(args, state) -> None:
    from ...attention.rollout import through_encoder
    from ...files import check_output_path
    from ...plotting import plot_caption_attention, self_attention_path
    from . import Captioner, caption_attention

    if not args.out and not args.html:
        raise ConfigError("give --out PNG, --html FILE or both")
    out = Path(args.out) if args.out else None
    if out is not None:  # every output checked before the image is captioned
        if out.suffix.lower() != ".png":
            raise ConfigError(f"--out {out}: the figures are PNG images; give a path ending in .png")
        for path in (out, self_attention_path(out, "heads")):
            check_output_path(path, what="--output", make_folders=True)
    if args.html:
        check_output_path(args.html, what="--html")
    captioner = Captioner.from_state(state, device=args.device, path=args.checkpoint)
    if args.html:
        _write_caption_html(captioner, state, args)
    if out is None:
        return
    heads = self_attention_path(out, "heads")
    maps = caption_attention(captioner, args.image, beam=args.beam, name=args.image)  # (L, H, T, R)
    print("caption:", maps.caption)
    L, H = maps.cross.shape[:2]
    title = f"each word's attention over the image (last layer, mean of {H} heads)"
    view = maps.cross[-1].mean(0)  # (T, R)
    if args.method != "raw":
        if maps.encoder_self is None:
            raise ConfigError(
                f"--method {args.method} follows an encoder's self-attention: this model has none"
            )
        view = through_encoder(maps.cross, maps.encoder_self, args.method)  # (T, R)
        title = f"each word's attention over the image, {args.method} through the encoder"
    plot_caption_attention(maps.image, maps.pieces, view, maps.grid, out, title=title)
    print(f"wrote {out}")
    labels = [f"layer {layer + 1}, head {head + 1}" for layer in range(L) for head in range(H)]
    rows = maps.cross.flatten(0, 1)  # (L * H, T, R)
    plot_caption_attention(maps.image, maps.pieces, rows, maps.grid, heads, row_labels=labels)
    print(f"wrote {heads}")


def _write_caption_html(captioner, state, args) -> None:
    """The page's payload is ``POST /v1/caption?attention=true``'s answer, the image beside it."""
    import base64
    import io

    from PIL import Image

    from ...decoding import SearchOptions
    from ...files import atomic_write
    from ...page import render_page
    from . import SEARCH, read_image

    path = Path(args.image)
    read_image(path, size=captioner.image_size, name=args.image)  # a bad one: its one line, exit 2
    data = path.read_bytes()
    with Image.open(io.BytesIO(data)) as img:
        mime = Image.MIME.get(img.format or "", "application/octet-stream")
    captioner.name = Path(args.checkpoint).stem
    (answer,) = captioner.answer([data], SearchOptions.of(SEARCH, beam=args.beam), attention=True)
    image = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    out = Path(args.html)
    with atomic_write(out) as f:  # write new, then swap: a failure keeps the old file
        page = {"task": "caption", "model": captioner.name, **answer, "image": image, "method": args.method}
        f.write(render_page(page))
    if not args.out:  # --out prints it too
        print("caption:", answer["caption"])
    print(f"wrote {out}")
