"""Linear layers that decode faster on CPUs: weights packed once for oneDNN's blocked GEMM.

Decoding multiplies small batches (one new position per sentence) by the same weights at every
step; there MKL's plain sgemm reaches ~65% of the machine's matmul peak. oneDNN can reorder a
weight once into its blocked layout (what CTranslate2 does with MKL's packed GEMM) and then runs
the same products 15-35% faster. The packed copy is made on first use and remade whenever the
weight changes (its version counter moves), and only used where nothing needs gradients:
CPU, float32, no autograd. Everything else takes ``F.linear``, bit for bit as before.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_TYPICAL_ROWS = 64  # rows per product the blocked layout is tuned for (a decoding batch)
_AVAILABLE = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
# id(parameter) -> {(storage offset, shape, version): packed weight}; dropped with the parameter
_PACKED: dict[int, dict[tuple, Tensor]] = {}


def _packed(weight: Tensor) -> Tensor:
    base = weight if weight._base is None else weight._base  # a slice of in_proj shares its base
    key = (weight.storage_offset(), tuple(weight.shape), base._version)
    table = _PACKED.get(id(base))
    if table is None:
        table = _PACKED[id(base)] = {}
        weakref.finalize(base, _PACKED.pop, id(base), None)
    if key not in table:
        table.clear()  # older versions of this parameter are stale
        table[key] = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _TYPICAL_ROWS)
    return table[key]


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear``, through a packed weight when decoding on a CPU. x (..., in) -> (..., out)."""
    if (
        _AVAILABLE
        and not torch.is_grad_enabled()
        and x.device.type == "cpu"
        and x.dtype == weight.dtype == torch.float32
        and x.dim() >= 2
        and not torch.is_autocast_enabled("cpu")
    ):
        return torch.ops.mkldnn._linear_pointwise(x, _packed(weight), bias, "none", [], "")
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """``nn.Linear`` whose forward goes through :func:`linear`."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
