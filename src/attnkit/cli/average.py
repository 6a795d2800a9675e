"""``attnkit average``: average the weights of several checkpoints of one run (paper section 6.1)."""

from __future__ import annotations

NAME = "average"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="average the weights of several checkpoints of one run")
    p.add_argument("--checkpoints", nargs="+", required=True, help="checkpoints of one run, each once")
    p.add_argument("--output", required=True, help="a new file: never one of the --checkpoints")
    p.add_argument("--force", action="store_true", help="replace an existing checkpoint at --output")


def run(args) -> None:
    from ..checkpoint import average_checkpoints, check_checkpoint_output, save_checkpoint

    out = check_checkpoint_output(args.output, force=args.force)
    out = save_checkpoint(average_checkpoints(args.checkpoints), out)
    n = len(args.checkpoints)
    print(f"averaged {n} checkpoint{'s' if n != 1 else ''} into {out}")
