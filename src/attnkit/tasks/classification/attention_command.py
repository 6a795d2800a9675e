"""``attnkit attention`` for classifiers: ``--out`` writes the seeds' review
picture (each word shaded by its pooling weight) as OUT.html and OUT.png, and the encoder
self-attention beside it; ``--method rollout`` or ``flow`` follows both down the encoder's layers to
the input words (:mod:`attnkit.attention.rollout`)."""

from __future__ import annotations

from pathlib import Path

from ...plugin.flags import METHOD_FLAG


def add_flags(add) -> None:
    add("--text", required=True, help="the input text")
    add("--method", **METHOD_FLAG)


def run(args, state) -> None:
    from ...attention.rollout import mixing
    from ...plotting import plot_attention
    from . import Classifier
    from .highlight import write_highlight

    clf = Classifier.from_state(state, device=args.device, path=args.checkpoint)
    ww = clf.word_weights(args.text, args.method)
    print(f"{ww.label}\t{ww.probability:.4f}")
    title = f"{clf.model.config.pooling} pooling: which words decided"
    if args.method != "raw":
        title += f" ({args.method} through the encoder)"
    html_path, png_path = write_highlight(
        [(f"{ww.label} ({ww.probability:.3f})", ww.words, ww.weights)], args.out, title=title
    )
    print(f"wrote {html_path}\nwrote {png_path}")
    pieces, weights = clf.self_attention(args.text)
    path = Path(args.out).with_name(f"{Path(args.out).stem}_encoder_self.png")
    if args.method == "raw":
        plot_attention(weights, pieces, pieces, path, title="encoder self-attention")
    else:
        title = f"encoder self-attention ({args.method})"
        plot_attention(mixing(weights, args.method), pieces, pieces, path, title=title)
    print(f"wrote {path}")
