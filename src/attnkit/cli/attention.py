"""``attnkit attention``: every attention of one sentence.

Translation models: ``--out map.png`` draws PNG grids of cross-, encoder self- and decoder
self-attention; ``--html view.html`` writes the server's attention page as one self-contained file
with the data embedded (every layer and head, zoom, lines, words; no server).
Language models (``--out``): the causal self-attention of every layer and head over the text.
Classifiers (``--out``): the seeds' review picture (each word shaded by its pooling weight) as
OUT.html and OUT.png, and the encoder self-attention beside it.
Captioners (``--image``, ``--out``): seed 002's caption picture, the image with each word's
cross-attention over its regions (one panel per word), and OUT_heads.png with every layer and head;
``--html`` the server's page of it (every layer and head, a panel per word) with the image embedded.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .common import device, int_at_most

NAME = "attention"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="plot attention heatmaps for one sentence")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--text", help="the source sentence (or the text, for an LM or a classifier)")
    p.add_argument("--image", help="the image to caption (captioners)")
    p.add_argument(
        "--out",
        help="PNG for cross-attention (self-attention goes beside it); "
        "a classifier writes OUT.html and OUT.png",
    )
    p.add_argument(
        "--html",
        help="the interactive attention page as one static HTML file (translation models, captioners)",
    )
    p.add_argument("--beam", type=int_at_most(256), default=4)
    p.add_argument("--device", type=device, default="auto")


def run(args) -> None:
    from ..checkpoint import load_checkpoint
    from ..tasks import task_of

    state = load_checkpoint(args.checkpoint)
    task = task_of(state, args.checkpoint)
    if task.name not in ("translate", "caption") and not args.out:
        raise ConfigError(f"{task.noun} needs --out (--html is for translation models and captioners)")
    needs, other = ("--image", "--text") if task.name == "caption" else ("--text", "--image")
    if getattr(args, needs[2:]) is None or getattr(args, other[2:]) is not None:
        raise ConfigError(f"{task.noun} needs {needs} (not {other})")
    run = {
        "translate": run_translation,
        "generate": run_lm,
        "classify": run_classifier,
        "caption": run_caption,
    }
    run[task.name](args, state)


def run_caption(args, state) -> None:
    from ..files import check_output_path
    from ..plotting import plot_caption_attention
    from ..tasks.captioning import Captioner, caption_attention

    if not args.out and not args.html:
        raise ConfigError("give --out PNG, --html FILE or both")
    out = Path(args.out) if args.out else None
    if out is not None:  # every output checked before the image is captioned
        if out.suffix.lower() != ".png":
            raise ConfigError(f"--out {out}: the figures are PNG images; give a path ending in .png")
        for path in (out, self_attention_path(out, "heads")):
            check_output_path(path, what="--out", make_folders=True)
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
    plot_caption_attention(maps.image, maps.pieces, maps.cross[-1].mean(0), maps.grid, out, title=title)
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

    from ..decoding import SearchOptions
    from ..files import atomic_write
    from ..serve.page import render_page
    from ..tasks.captioning import CaptionerServed, read_image
    from ..tasks.captioning.captioner import SEARCH

    path = Path(args.image)
    read_image(path, size=captioner.image_size, name=args.image)  # a bad one: its one line, exit 2
    data = path.read_bytes()
    with Image.open(io.BytesIO(data)) as img:
        mime = Image.MIME.get(img.format or "", "application/octet-stream")
    served = CaptionerServed(Path(args.checkpoint).stem, state["arch"], captioner)
    (answer,) = served.caption([data], SearchOptions.of(SEARCH, beam=args.beam), attention=True)
    image = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    out = Path(args.html)
    with atomic_write(out) as f:  # write new, then swap: a failure keeps the old file
        f.write(render_page({"task": "caption", "model": served.name, **answer, "image": image}))
    if not args.out:  # --out prints it too
        print("caption:", answer["caption"])
    print(f"wrote {out}")


def run_lm(args, state) -> None:
    from ..plotting import plot_attention
    from ..tasks.language_model import LanguageModel

    lm = LanguageModel.from_state(state, device=args.device, path=args.checkpoint)
    pieces, weights = lm.self_attention(args.text)  # (L, H, T, T)
    out = plot_attention(weights, pieces, pieces, args.out, title="language-model self-attention (causal)")
    print(f"wrote {out}")


def run_classifier(args, state) -> None:
    from ..plotting import plot_attention
    from ..tasks.classification import Classifier
    from ..tasks.classification.highlight import write_highlight

    clf = Classifier.from_state(state, device=args.device, path=args.checkpoint)
    ww = clf.word_weights(args.text)
    print(f"{ww.label}\t{ww.probability:.4f}")
    title = f"{clf.model.config.pooling} pooling: which words decided"
    html_path, png_path = write_highlight(
        [(f"{ww.label} ({ww.probability:.3f})", ww.words, ww.weights)], args.out, title=title
    )
    print(f"wrote {html_path}\nwrote {png_path}")
    pieces, weights = clf.self_attention(args.text)
    path = Path(args.out).with_name(f"{Path(args.out).stem}_encoder_self.png")
    plot_attention(weights, pieces, pieces, path, title="encoder self-attention")
    print(f"wrote {path}")


def self_attention_path(out: Path, name: str) -> Path:
    return out.with_name(f"{out.stem}_{name}{out.suffix}")


def run_translation(args, state) -> None:
    from ..files import check_output_path
    from ..tasks.translation import Translator

    if not args.out and not args.html:
        raise ConfigError("give --out PNG, --html FILE or both")
    if args.out:  # every output checked before the text is decoded
        out = Path(args.out)
        if out.suffix.lower() != ".png":
            raise ConfigError(f"--out {out}: the figures are PNG images; give a path ending in .png")
        for path in (out, self_attention_path(out, "encoder_self"), self_attention_path(out, "decoder_self")):
            check_output_path(path, what="--out", make_folders=True)
    if args.html:
        check_output_path(args.html, what="--html")
    translator = Translator.from_state(state, device=args.device, path=args.checkpoint)
    if args.html:
        _write_html(translator, args)
    if args.out:
        _write_pngs(translator, args)


def _write_html(translator, args) -> None:
    from ..serve.page import render_page
    from ..tasks.translation.attention_payload import attention_payload

    if not args.text.strip():
        raise ConfigError("--text is empty: there is no attention to show")
    data = attention_payload(translator, args.text, beam=args.beam)
    from ..files import atomic_write

    out = Path(args.html)
    with atomic_write(out) as f:  # write new, then swap: a failure keeps the old file
        f.write(render_page(data))
    print("translation:", data["translation"])
    print(f"wrote {out}")


def _write_pngs(translator, args) -> None:
    from ..plotting import plot_attention
    from ..tasks.translation import attention_maps

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
            path = self_attention_path(out, name)
            plot_attention(weights, labels, labels, path, title=name.replace("_", " ") + "-attention")
            print(f"wrote {path}")
