"""int8 CPU inference: every ``nn.Linear`` of a model (the tied output projection included) gets int8
weights, quantized once per output row (symmetric, scale = max |w| / 127); activations are
quantized on the fly per call (torch's dynamic quantization kernels, fbgemm/oneDNN int8 GEMM).

Embeddings, LayerNorms, attention scores and softmax stay float32, as in CTranslate2's int8 mode.
Used through ``Translator(..., quantize="int8")`` / ``attnkit translate --quantize int8``; the
BLEU change and the speed against CTranslate2 int8 are in docs/BENCHMARKS.md (bench/int8.py).
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from .errors import ConfigError

QUANTIZE_CHOICES = ("int8",)


class Int8Linear(nn.Module):
    """``nn.Linear`` with int8 weights (per output row) for CPU inference. (..., in) -> (..., out)."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        w = linear.weight.detach().float().cpu()  # (out, in)
        scale = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12).double()  # (out,)
        qw = torch.quantize_per_channel(w, scale, torch.zeros_like(scale, dtype=torch.long), 0, torch.qint8)
        bias = None if linear.bias is None else linear.bias.detach().float().cpu()
        self._packed = torch.ops.quantized.linear_prepack(qw, bias)
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: Tensor) -> Tensor:
        # reduce_range: 7-bit activations, so that int8 x int8 sums cannot saturate without VNNI
        return torch.ops.quantized.linear_dynamic(x, self._packed, True)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of ``model`` (eval mode, CPU) whose linear layers run with int8 weights; the original
    is untouched. Inference only: the copy cannot be trained."""
    if not torch.backends.quantized.supported_engines or torch.backends.quantized.engine == "none":
        raise ConfigError("int8: this torch build has no quantized CPU kernels")
    model = copy.deepcopy(model).cpu().eval()
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, Int8Linear(child))
    return model


def check_quantize(quantize: str | None, device: torch.device) -> None:
    if quantize is None:
        return
    if quantize not in QUANTIZE_CHOICES:
        raise ConfigError(f"unknown quantization {quantize!r} (choose from {', '.join(QUANTIZE_CHOICES)})")
    if device.type != "cpu":
        raise ConfigError(f"--quantize {quantize} runs on the CPU only (device is {device})")
