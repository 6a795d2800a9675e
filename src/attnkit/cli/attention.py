"""``attnkit attention``: every attention of one input, drawn by the checkpoint's task (its
package's ``attention_command.run``, whose ``add_flags`` adds what it reads: ``--text`` or
``--image``, ``--html``, ``--method``).

``--out`` draws the task's PNG pictures; ``--html`` writes the server's attention page as one
self-contained file with the data embedded (every layer and head, zoom, lines, words; no server).
What each task draws is said in its own ``attention_command`` module.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..plugin.flags import DEVICE_NAMES, add_task_flags, check_task_flags, device, int_at_most, task_flags

NAME = "attention"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="plot attention heatmaps for one sentence")
    p.add_argument("--checkpoint", required=True, help="the checkpoint whose attention to draw")
    p.add_argument(
        "--output",
        dest="out",
        help="where the task's pictures go: a PNG, with any further files beside it named after it",
    )
    add_task_flags(p, NAME)  # each task's own: --text or --image, --html, --method
    p.add_argument(
        "--beam",
        type=int_at_most(256),
        default=4,
        help="beam size of the search whose output is drawn (default 4)",
    )
    p.add_argument("--device", type=device, default="auto", help=f"{DEVICE_NAMES} (default auto)")


def run(args) -> None:
    from ..checkpoint import load_checkpoint
    from ..plugin import task_of

    state = load_checkpoint(args.checkpoint)
    task = task_of(state, args.checkpoint)
    drawing = task.part("attention_command")
    if drawing is None:
        raise ConfigError(f"{task.noun} has no attention to draw")
    own = task_flags(task, NAME)
    check_task_flags(args, task, NAME, f"{task.noun} reads {', '.join(own) or 'no flag of its own'}")
    if not args.out and not getattr(args, "html", None):
        raise ConfigError("give --output PNG" + (", --html FILE or both" if "--html" in own else ""))
    drawing.run(args, state)
