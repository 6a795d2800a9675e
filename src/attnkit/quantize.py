"""int8 CPU inference: every ``nn.Linear`` of a model (the tied output projection included) gets int8
weights, quantized once per output row (symmetric, scale = max |w| / 127); activations are
quantized on the fly per call (torch's dynamic quantization kernels, fbgemm/oneDNN int8 GEMM).

Embeddings, LayerNorms, attention scores and softmax stay float32, as in CTranslate2's int8 mode.
Used through ``Translator(..., quantize="int8")`` / ``attnkit translate --quantize int8``; the
BLEU change and the speed against CTranslate2 int8 are in docs/BENCHMARKS.md (bench/int8.py).
"""

from __future__ import annotations

import copy
import functools
import warnings
from typing import TypeVar

import torch
from torch import Tensor, nn

from .errors import ConfigError

QUANTIZE_CHOICES = ("int8",)
M = TypeVar("M", bound=nn.Module)


class Int8Linear(nn.Module):
    """``nn.Linear`` with int8 weights (per output row) for CPU inference. (..., in) -> (..., out)."""

    def __init__(self, weight: Tensor, bias: Tensor | None = None):
        super().__init__()
        w = weight.detach().float().cpu()  # (out, in)
        scale = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12).double()  # (out,)
        with warnings.catch_warnings():  # torch 2.13 marks quantized tensor creation deprecated
            warnings.simplefilter("ignore", UserWarning)
            qw = torch.quantize_per_channel(
                w, scale, torch.zeros_like(scale, dtype=torch.long), 0, torch.qint8
            )
        bias = None if bias is None else bias.detach().float().cpu()
        self._packed = torch.ops.quantized.linear_prepack(qw, bias)
        self.out_features, self.in_features = w.shape

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Int8Linear:
        return cls(linear.weight, linear.bias)

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.quantized.linear_dynamic(x, self._packed, _reduce_range())

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


@functools.cache
def _reduce_range() -> bool:
    """7-bit activations, unless the CPU has VNNI: without it, the AVX2 int8 kernels add pairs of
    u8 x s8 products in int16, which 8-bit activations can saturate. 8 bits halve the error
    (teacher-forced top-1 agreement with float32 99.2% instead of 97.0% on the test model)."""
    try:
        flags = open("/proc/cpuinfo", encoding="ascii", errors="ignore").read()
    except OSError:
        return True
    return not ("avx512_vnni" in flags or "avx_vnni" in flags or "amx_int8" in flags)


def quantize_int8(model: M) -> M:
    """A copy of ``model`` (eval mode, CPU) whose linear layers run with int8 weights; the original
    is untouched. Inference only: the copy cannot be trained."""
    if not torch.backends.quantized.supported_engines or torch.backends.quantized.engine == "none":
        raise ConfigError("int8: this torch build has no quantized CPU kernels")
    model = copy.deepcopy(model).cpu().eval()
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, Int8Linear.from_linear(child))
    return model


def check_quantize(quantize: str | None, device: torch.device) -> None:
    if quantize is None:
        return
    if quantize not in QUANTIZE_CHOICES:
        raise ConfigError(f"unknown quantization {quantize!r} (choose from {', '.join(QUANTIZE_CHOICES)})")
    if device.type != "cpu":
        raise ConfigError(f"--quantize {quantize} runs on the CPU only (device is {device})")
