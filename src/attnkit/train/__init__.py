"""Training: the experiment config, building a run (build), the loop (trainer) and the task
objects it calls."""

from ..checkpoint import average_checkpoints, load_checkpoint, save_checkpoint
from .build import Setup, build
from .config import ExperimentConfig, load_config
from .result import TrainResult
from .run import train
from .trainer import Trainer

__all__ = [
    "ExperimentConfig",
    "Setup",
    "TrainResult",
    "Trainer",
    "average_checkpoints",
    "build",
    "load_checkpoint",
    "load_config",
    "save_checkpoint",
    "train",
]
