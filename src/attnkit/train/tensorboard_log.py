"""``train.tensorboard``: the run's curves and pictures in ``<output_dir>/tensorboard`` as well.

Training loss, learning rate, gradient norm and tokens/s at every log step; every validation metric;
and at each validation the task's picture, where it draws one (``Task.picture``: for a translation
model, the cross-attention of the first validation sentence, as ``attnkit attention`` draws it).
metrics.csv and the PNG curve are written as before: this adds a view, it replaces nothing.
TensorBoard itself is the ``tensorboard`` extra.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data.tokenizer import SubwordTokenizer
from ..errors import ConfigError


def require_tensorboard() -> Any:
    """torch's SummaryWriter, or a ConfigError when TensorBoard is not installed (asked before the run
    touches its output folder)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # torch's writer needs the tensorboard package
        raise ConfigError(
            "train.tensorboard needs TensorBoard: pip install 'attnkit[tensorboard]' "
            "(or set train.tensorboard=false)"
        ) from None
    return SummaryWriter


class TensorBoardLog:
    """One run's event files; rank 0 alone writes them."""

    def __init__(self, output_dir: Path):
        SummaryWriter = require_tensorboard()
        self.folder = Path(output_dir) / "tensorboard"
        self.writer = SummaryWriter(log_dir=str(self.folder))

    def scalars(self, section: str, step: int, values: dict[str, Any]) -> None:
        """``section/name`` for each numeric value (a blank or missing one is left out)."""
        for name, value in values.items():
            if isinstance(value, str):
                value = float(value) if value else None
            if value is not None:
                self.writer.add_scalar(f"{section}/{name}", float(value), step)
        self.writer.flush()

    def picture(
        self, step: int, task, model: nn.Module, tokenizer: SubwordTokenizer, records: list, device
    ) -> None:
        """The task's picture of this validation (a translation model: the first validation sentence's
        cross-attention), where it draws one."""
        with tempfile.TemporaryDirectory() as tmp:
            png = Path(tmp) / "picture.png"
            was_training = model.training
            tag = task.picture(model, tokenizer, records, device, png)
            model.train(was_training)
            if tag is None:
                return
            image = _read_png(png)
        self.writer.add_image(tag, image, step, dataformats="HWC")
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def _read_png(path: Path) -> torch.Tensor:
    """(H, W, 3) uint8 pixels of a PNG that matplotlib wrote."""
    import matplotlib.image

    pixels = torch.from_numpy(matplotlib.image.imread(str(path)))  # (H, W, 4) float in [0, 1]
    return (pixels[..., :3] * 255).round().to(torch.uint8)
