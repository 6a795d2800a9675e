"""``attnkit average``: average the weights of several checkpoints of one run (paper section 6.1)."""

from __future__ import annotations

NAME = "average"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="average the weights of several checkpoints of one run")
    p.add_argument("--checkpoints", nargs="+", required=True)
    p.add_argument("--output", required=True)


def run(args) -> None:
    from ..checkpoint import average_checkpoints, save_checkpoint

    out = save_checkpoint(average_checkpoints(args.checkpoints), args.output)
    print(f"averaged {len(args.checkpoints)} checkpoints into {out}")
