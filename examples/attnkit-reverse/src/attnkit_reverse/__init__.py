"""attnkit-reverse: a task written outside attnkit, to show what a task plugin holds.

The model learns to reverse a sequence of letters ("a b c" -> "c b a"): every answer is known, so
its accuracy is exact and its cross-attention should run along the anti-diagonal. Installed, it
gets ``attnkit train`` and ``attnkit evaluate`` (``task: reverse`` in a config), its own verbs
(``attnkit make-reversal``, ``attnkit reverse``), its endpoint (``POST /v1/reverse`` under
``attnkit serve``) and its panel of the attention page, through the entry point in its
pyproject.toml alone.
"""

from attnkit.plugin import TaskInfo

TASK = TaskInfo(
    name="reverse",
    noun="a reversal model",
    archs=("transformer",),  # translation's too: a config chooses this task with `task: reverse`
    records="pairs",
    # its parts by place ("module:name", as an entry point names one): imported when first used, so
    # registering imports no torch and `attnkit --help` stays instant
    training=".training:ReverseTask",
    open=".reverser:Reverser.from_state",
    serve=".reverser:Reverser.serve",
    # attnkit finds the rest in this package by name: routes.py (the endpoints), reverse_command.py
    # and make_reversal_command.py (the verbs), evaluate_command.py, static/panel.js (its panel)
    package=__name__,
    endpoints=("reverse",),
    commands=("reverse", "make-reversal"),
)

__all__ = ["TASK"]
