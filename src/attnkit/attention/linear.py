"""Linear layers that decode faster on CPUs: weights packed once for oneDNN's blocked GEMM.

Decoding multiplies small batches (one new position per sentence) by the same weights at every
step; there MKL's plain sgemm reaches ~65% of the machine's matmul peak. oneDNN can reorder a
weight once into its blocked layout (what CTranslate2 does with MKL's packed GEMM) and then runs
the same products 15-35% faster.

Packing is scoped: only inside ``with packed_weights():`` (the searches and ``Translator`` open
one), where the weights cannot change, are packed copies made and reused; they are dropped when
the block ends. (A cache that outlives the block would need to notice in-place weight updates, and
fused optimizers update weights without moving their version counters.) Everywhere else, and
whenever autograd, another device or dtype, or autocast is involved, ``F.linear`` runs as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_TYPICAL_ROWS = 64  # rows per product the blocked layout is tuned for (a decoding batch)
_AVAILABLE = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
_scope = threading.local()  # .packed: {(id(base), storage offset, shape): packed weight} while open


@contextlib.contextmanager
def packed_weights() -> Iterator[None]:
    """Reuse packed weights for CPU inference inside this block (the weights must not change in it)."""
    if getattr(_scope, "packed", None) is not None:  # nested: the outer block owns the cache
        yield
        return
    _scope.packed = {}
    try:
        yield
    finally:
        _scope.packed = None


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear``, through a packed weight inside :func:`packed_weights` on a CPU. (..., in) -> (..., out)."""
    packed = getattr(_scope, "packed", None)
    if (
        packed is not None
        and _AVAILABLE
        and not torch.is_grad_enabled()
        and x.device.type == "cpu"
        and x.dtype == weight.dtype == torch.float32
        and x.dim() >= 2
        and not torch.is_autocast_enabled("cpu")
    ):
        base = weight if weight._base is None else weight._base  # slices of in_proj share a base
        key = (id(base), weight.storage_offset(), tuple(weight.shape))
        if key not in packed:
            packed[key] = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _TYPICAL_ROWS)
        return torch.ops.mkldnn._linear_pointwise(x, packed[key], bias, "none", [], "")
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """``nn.Linear`` whose forward goes through :func:`linear`."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
