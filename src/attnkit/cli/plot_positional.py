"""``attnkit plot-positional``: draw the sinusoidal positional encodings as the seeds show them."""

from __future__ import annotations

from .common import positive_int

NAME = "plot-positional"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="draw the sinusoidal positional encodings")
    p.add_argument("--d-model", type=positive_int, default=512)
    p.add_argument("--max-len", type=positive_int, default=128)
    p.add_argument("--out", required=True)


def run(args) -> None:
    from ..plotting import plot_positional_encoding
    from ..positional import sinusoidal_encoding

    out = plot_positional_encoding(sinusoidal_encoding(args.max_len, args.d_model), args.out)
    print(f"wrote {out}")
