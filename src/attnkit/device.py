"""Device names, read one way everywhere: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` and ``mps``.

``check_device_name`` checks the spelling only (a config or a command-line flag, before anything is
loaded); ``resolve_device`` also checks that the machine has the device and returns it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .errors import ConfigError

if TYPE_CHECKING:
    import torch

DEVICE_NAMES = "auto, cpu, cuda, cuda:N or mps"
_NAME = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


def check_device_name(name: str) -> str:
    """``name`` itself when it is a device name attnkit reads; else a :class:`ConfigError`."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"unknown device {name!r}: use {DEVICE_NAMES}")
    return name


def resolve_device(name: str | torch.device = "auto") -> torch.device:
    """The device ``name`` stands for: ``auto`` is the first GPU when there is one, else the CPU.

    A GPU asked for on a machine without one is a :class:`ConfigError`, not a late torch failure.
    (torch is imported here, not with the module: the command line checks names without it.)
    """
    import torch

    if isinstance(name, torch.device):
        return name
    check_device_name(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"device {name!r} asked for, but no CUDA GPU is available")
        index = int(name.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise ConfigError(
                f"device {name!r} asked for, but this machine has {torch.cuda.device_count()} GPU(s)"
            )
    if name == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device 'mps' asked for, but Apple's Metal backend is not available")
    return torch.device(name)
