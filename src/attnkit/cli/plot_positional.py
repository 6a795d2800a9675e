"""``attnkit plot-positional``: draw the sinusoidal positional encodings as the seeds show them."""

from __future__ import annotations

from ..errors import ConfigError
from ..plugin.flags import int_at_most

NAME = "plot-positional"
# The (max_len, d_model) table is built in float64 before it is drawn on a 1000 x 600 pixel image:
# 4096 x 4096 keeps the peak memory near half a GB; larger tables show nothing more.
MAX_SIDE = 4096


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="draw the sinusoidal positional encodings")
    p.add_argument("--d-model", type=int_at_most(MAX_SIDE), default=512, help=f"at most {MAX_SIDE}")
    p.add_argument("--max-len", type=int_at_most(MAX_SIDE), default=128, help=f"at most {MAX_SIDE}")
    p.add_argument("--output", dest="out", required=True, help="PNG file")


def run(args) -> None:
    from ..files import check_output_path
    from ..plotting import plot_positional_encoding
    from ..positional import sinusoidal_encoding

    if not args.out.lower().endswith(".png"):
        raise ConfigError(f"--out {args.out}: the figure is a PNG image; give a path ending in .png")
    check_output_path(args.out, what="--output", make_folders=True)
    out = plot_positional_encoding(sinusoidal_encoding(args.max_len, args.d_model), args.out)
    print(f"wrote {out}")
