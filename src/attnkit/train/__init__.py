"""Training: the experiment config, the trainer, checkpoints and the learning-rate schedule."""

from ..checkpoint import average_checkpoints, load_checkpoint, save_checkpoint
from .config import ExperimentConfig, load_config
from .trainer import Trainer, TrainResult, train

__all__ = [
    "ExperimentConfig",
    "TrainResult",
    "Trainer",
    "average_checkpoints",
    "load_checkpoint",
    "load_config",
    "save_checkpoint",
    "train",
]
