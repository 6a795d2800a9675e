"""``attnkit attention``: every attention of one input, drawn by the checkpoint's task
(its package's ``attention_command.run``; ``TaskInfo.attention_flags`` says whether it reads ``--text`` or
``--image`` and whether it writes ``--html``).

``--out`` draws the task's PNG pictures; ``--html`` writes the server's attention page as one
self-contained file with the data embedded (every layer and head, zoom, lines, words; no server).
What each task draws is said in its own ``attention_command`` module.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..plugin.flags import DEVICE_NAMES, device, int_at_most

NAME = "attention"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="plot attention heatmaps for one sentence")
    p.add_argument("--checkpoint", required=True, help="the checkpoint whose attention to draw")
    p.add_argument("--text", help="the input text (a task that reads text)")
    p.add_argument("--image", help="the input image (a task that reads images)")
    p.add_argument(
        "--output",
        dest="out",
        help="where the task's pictures go: a PNG, with any further files beside it named after it",
    )
    p.add_argument(
        "--html",
        help="the interactive attention page as one static HTML file (a task with a page panel)",
    )
    p.add_argument(
        "--method",
        choices=("raw", "rollout", "flow"),
        default="raw",
        help="raw weights, or followed down to the input tokens through the layers with the residual "
        "counted (Abnar and Zuidema, 2020): rollout or flow (default raw)",
    )
    p.add_argument(
        "--beam",
        type=int_at_most(256),
        default=4,
        help="beam size of the search whose output is drawn (default 4)",
    )
    p.add_argument("--device", type=device, default="auto", help=f"{DEVICE_NAMES} (default auto)")


def run(args) -> None:
    from ..checkpoint import load_checkpoint
    from ..plugin import task_of, tasks

    state = load_checkpoint(args.checkpoint)
    task = task_of(state, args.checkpoint)
    drawing = task.part("attention_command")
    if drawing is None:
        raise ConfigError(f"{task.noun} has no attention to draw")
    if "--html" not in task.attention_flags and not args.out:
        takers = " and ".join(t.noun for t in tasks() if "--html" in t.attention_flags)
        raise ConfigError(f"{task.noun} needs --out (--html is for {takers})")
    needs, other = ("--image", "--text") if "--image" in task.attention_flags else ("--text", "--image")
    if getattr(args, needs[2:]) is None or getattr(args, other[2:]) is not None:
        raise ConfigError(f"{task.noun} needs {needs} (not {other})")
    if args.method != "raw" and "--method" not in task.attention_flags:
        takers = " and ".join(t.noun for t in tasks() if "--method" in t.attention_flags)
        raise ConfigError(f"--method {args.method} is for {takers}; {task.noun} draws raw weights")
    drawing.run(args, state)
