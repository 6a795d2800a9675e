"""``attnkit.train.train``: lock the output folder, build the run, train it, shut the processes down."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from . import distributed as ddp
from .build import build
from .config import ExperimentConfig
from .result import TrainResult
from .run_folder import RunFolder
from .trainer import Trainer


def train(
    cfg: ExperimentConfig, *, resume: str | Path | None = None, overwrite: bool = False, log=print
) -> TrainResult:
    """Train (or resume) the experiment; returns where the checkpoints and metrics went.

    The output folder is locked for the whole run (rank 0), and an old run in it is replaced only
    once the new one has written its first checkpoint (see :mod:`.run_folder`).
    """
    main = os.environ.get("RANK", "0") == "0"
    init = cfg.train.init_from or None
    folder = RunFolder(cfg.output_dir, resume=resume, overwrite=overwrite, init_from=init) if main else None
    with folder or contextlib.nullcontext():
        setup = build(cfg, resume=resume)
        try:
            return Trainer(setup, log=log, folder=folder).run()
        finally:
            ddp.shutdown(setup.dist)
