"""What of the training loop a checkpoint keeps beside the model (step, best score, random streams,
the optimizer's and sampler's states) and takes back on ``--resume``; and the line a stopped run
leaves, with the command that resumes it."""

from __future__ import annotations

import shlex
import signal
from pathlib import Path
from typing import Any

from ..checkpoint import unwrap
from ..config import ConfigBase
from .rng_state import restore_rng
from .run_folder import RESOLVED_CONFIG

# Each function reads a :class:`~.trainer.Trainer` (``trainer``: Any, since the trainer imports this).


def restore(trainer: Any, state: dict) -> None:
    """Take the trainer's own fields back from a checkpoint (``--resume``)."""
    trainer.step = state["step"]
    metrics = state["metrics"]
    if metrics.get("metric", trainer.metric) == trainer.metric:  # valid.metric may change on --resume
        trainer.best_score = metrics.get("best_score", metrics.get("best_bleu"))  # older checkpoints: BLEU
    trainer.bad_validations = metrics["bad_validations"]
    trainer.elapsed_before = metrics["elapsed_s"]
    trainer.pending_validation = metrics.get("pending_validation", False)
    if trainer.scaler and "grad_scaler" in state:  # the loss scale it had reached, not a fresh one
        trainer.scaler.load_state_dict(state["grad_scaler"])
    restore_rng(state, trainer.dist.rank)
    trainer.info(f"resumed from step {trainer.step} (epoch {trainer.epoch})")


def checkpoint_state(trainer: Any, rngs: list[dict]) -> dict:
    """The checkpoint of the run as it stands; ``rngs``: every rank's random streams, rank 0's first."""
    model = unwrap(trainer.model)
    assert isinstance(model.config, ConfigBase)  # every model keeps its config dataclass
    return {
        **trainer.task.checkpoint_fields(),  # e.g. a classifier's label names
        "arch": trainer.cfg.arch,
        **({"task": trainer.cfg.task} if trainer.cfg.task else {}),  # else the arch's task
        "model_config": model.config.to_dict(),
        "tokenizer": trainer.s.tokenizer.state_dict(),
        "experiment": trainer.cfg.to_dict(),
        **(trainer.ema.state(model) if trainer.ema else {"model": model.state_dict()}),
        "optimizer": trainer.s.optimizer.state_dict(),
        **({"grad_scaler": trainer.scaler.state_dict()} if trainer.scaler else {}),
        "step": trainer.step,
        "epoch": trainer.epoch,
        "sampler": trainer.s.sampler.state_dict(),  # the same position on every rank
        "data_fingerprint": trainer.s.data_fingerprint,  # what that position indexes
        "world_size": trainer.dist.world_size,
        "rng": rngs[0],
        **({"rng_ranks": rngs} if len(rngs) > 1 else {}),
        "metrics": {
            "metric": trainer.metric,
            "best_score": trainer.best_score,
            "bad_validations": trainer.bad_validations,
            "elapsed_s": trainer.elapsed(),
            "pending_validation": False,
        },
    }


def stopped_line(trainer: Any, signum: int, last: Path) -> str:
    """What a stopped run says: the signal, the step, and the command that resumes it."""
    config, resume = (shlex.quote(str(path)) for path in (trainer.out / RESOLVED_CONFIG, last))
    command = f"attnkit train --config {config} --resume {resume}"
    under = f" (under torchrun, {trainer.dist.world_size} processes)" if trainer.dist.enabled else ""
    return (
        f"stopped by {signal.Signals(signum).name} at step {trainer.step} (epoch {trainer.epoch}); "
        f"saved {last}; resume with: {command}{under}"
    )
